"""The fork server imports what the trainable imports, so workers start with it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import cloudpickle
import pytest

from fasttune._support.pickled_modules import MAX_BLOB_BYTES, modules_named_in
from fasttune.executors._learned_imports import imported_since

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


def test_a_function_pickled_by_value_names_the_third_party_modules_it_uses():
    namespace = {"__name__": "__main__"}
    exec(
        "import json, loky, psutil\n"
        "def train(config):\n"
        "    return psutil.cpu_count(), loky.cpu_count(), json.dumps(config)\n",
        namespace,
    )
    named = modules_named_in(cloudpickle.dumps(namespace["train"]))
    assert sorted(named) == ["loky", "psutil"]  # the standard library's json left out


def test_a_class_pickled_by_reference_names_its_module():
    from tests.executors._trainables import Counter

    assert modules_named_in(cloudpickle.dumps(Counter)) == ["tests.executors._trainables"]


def test_modules_not_imported_here_and_unreadable_pickles_are_left_out():
    blob = cloudpickle.dumps(("not_a_module_anywhere", 1))
    assert modules_named_in(blob) == []
    assert modules_named_in(b"not a pickle") == []
    assert modules_named_in(b"\x80\x05" + b"x" * (MAX_BLOB_BYTES + 1)) == []


def _driver(trainable: str, tune_config: str = "") -> str:
    """A driver script: four trials of the Trainable ``trainable`` defines, a new worker
    each (a class trainable: no reuse); prints the fork server's pid and, per trial,
    the pid its ``imported_in`` metric names and its worker's."""
    return (
        "import json, os, sys\n"
        "import fasttune as tune\n"
        "from fasttune.executors import _forkserver\n"
        "from tests.executors import _imported_where\n"
        + textwrap.dedent(trainable)
        + textwrap.dedent(
            f"""
            grid = tune.Tuner(
                Where,
                param_space={{"x": tune.grid_search([1, 2, 3, 4])}},
                {tune_config}
                run_config=tune.RunConfig(storage_path=sys.argv[1], verbose=0),
            ).fit()
            assert not grid.errors
            print(json.dumps({{
                "server": _forkserver.default_server().server_pid,
                "results": [[r.metrics["imported_in"], r.metrics["pid"]] for r in grid],
            }}))
            """
        )
    )


_DRIVER = _driver(
    """
    class Where(tune.Trainable):
        def step(self):
            return {"imported_in": _imported_where.IMPORTED_IN, "pid": os.getpid(), "done": True}
    """
)


def _run_driver(tmp_path, driver=_DRIVER, **env) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", driver, str(tmp_path)],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT, **env), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(sys.platform != "linux", reason="preloading is for Linux")
def test_workers_start_with_the_trainables_imports_done_by_the_fork_server(tmp_path):
    """Four trials, a new worker each (a class trainable: no reuse): the module the
    trainable uses was imported once, in the fork server, not in each worker."""
    seen = _run_driver(tmp_path)
    pids = {pid for _, pid in seen["results"]}
    assert len(pids) == 4
    assert {where for where, _ in seen["results"]} == {seen["server"]}


def test_FASTTUNE_PRELOAD_IMPORTS_0_leaves_each_worker_to_import_them(tmp_path):
    seen = _run_driver(tmp_path, FASTTUNE_PRELOAD_IMPORTS="0")
    assert all(where == pid for where, pid in seen["results"])


_EXITING_DRIVER = textwrap.dedent(
    """
    import json, os, sys
    os.environ["DRIVER_PID"] = str(os.getpid())
    import fasttune as tune
    from fasttune.executors import _forkserver
    from tests.executors import _exits_on_import_elsewhere


    def uses_it(config):
        tune.report({"name": _exits_on_import_elsewhere.__name__})


    def plain(config):
        tune.report({"score": 1})


    def tuner(trainable, name):
        return tune.Tuner(
            trainable,
            run_config=tune.RunConfig(storage_path=sys.argv[1], name=name, verbose=0),
        )

    first = tuner(uses_it, "a")
    server = _forkserver.default_server().server_pid  # started by the Tuner
    failed = first.fit()
    ok = tuner(plain, "b").fit()
    print(json.dumps({
        "failed": len(failed.errors),
        "ok": [r.metrics["score"] for r in ok],
        "same_server": _forkserver.default_server().server_pid == server,
    }))
    """
)


def test_a_module_exiting_on_import_fails_its_trial_not_the_fork_server(tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", _EXITING_DRIVER, str(tmp_path)],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {"failed": 1, "ok": [1], "same_server": True}


def _package(root, name: str, **modules: str) -> None:
    os.makedirs(root / name)
    (root / name / "__init__.py").write_text("")
    for module, text in modules.items():
        (root / name / f"{module}.py").write_text(text)


def test_a_worker_names_the_installed_submodules_it_imported_of_packages_it_started_with(
    tmp_path,
):
    """Of what was imported after the count: submodules of packages loaded before it
    from an installed distribution; not a new top-level package, the standard library,
    or a package of the user's project (not under site-packages)."""
    installed, project = tmp_path / "site-packages", tmp_path / "project"
    for root, package in ((installed, "old_pkg_learn"), (installed, "new_pkg_learn")):
        _package(root, package, sub="")
    _package(project, "proj_pkg_learn", sub="")
    sys.path[:0] = [str(installed), str(project)]
    try:
        import old_pkg_learn
        import proj_pkg_learn

        count = len(sys.modules)
        assert imported_since(count) == ()
        import xml.dom.minidom  # noqa: F401

        import new_pkg_learn.sub  # noqa: F401
        import old_pkg_learn.sub  # noqa: F401
        import proj_pkg_learn.sub  # noqa: F401

        assert imported_since(count) == ("old_pkg_learn.sub",)
    finally:
        del sys.path[:2]
        for name in [n for n in sys.modules if n.partition(".")[0].endswith("_pkg_learn")]:
            del sys.modules[name]


_RECORDS_PID = "import os\nIMPORTED_IN = os.getpid()\n"

_LEARNING_DRIVER = textwrap.dedent(
    """
    import json, os, sys, time
    import fasttune as tune
    from fasttune.executors import _forkserver
    from lazypkg_learn import eager  # named by the pickled class: preloaded


    class Lazy(tune.Trainable):
        def step(self):
            if os.environ.get("TRIAL_SETS_ENV"):
                os.environ["SET_BY_THE_TRIAL"] = "1"
            from lazypkg_learn import lazy  # at its first use, as torch imports _dynamo

            time.sleep(0.1)  # the server's check of what it learns runs meanwhile
            return {"imported_in": lazy.IMPORTED_IN, "pid": os.getpid(),
                    "eager": eager.IMPORTED_IN, "done": True}


    grid = tune.Tuner(
        Lazy,
        param_space={"x": tune.grid_search([1, 2, 3, 4, 5, 6])},
        tune_config=tune.TuneConfig(max_concurrent_trials=1),
        run_config=tune.RunConfig(storage_path=sys.argv[1], verbose=0),
    ).fit()
    assert not grid.errors
    print(json.dumps({
        "server": _forkserver.default_server().server_pid,
        "results": [[r.metrics["imported_in"], r.metrics["pid"], r.metrics["eager"]]
                    for r in grid],
    }))
    """
)


def _run_learning(tmp_path, lazy: str = _RECORDS_PID, **env: str) -> tuple[int, list]:
    """Six trials one at a time, a new worker each, of a class whose module comes from
    an installed package (preloaded) and which imports another module of that package
    when it runs; each trial's (where that module was imported, its pid)."""
    installed = tmp_path / "site-packages"
    _package(installed, "lazypkg_learn", eager=_RECORDS_PID, lazy=lazy)
    storage = tmp_path / "results"
    out = subprocess.run(
        [sys.executable, "-c", _LEARNING_DRIVER, str(storage)],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{installed}", **env),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert len({pid for _, pid, _ in seen["results"]}) == 6  # a new worker each
    return seen["server"], [(where, pid) for where, pid, _ in seen["results"]]


@pytest.mark.skipif(sys.platform != "linux", reason="preloading is for Linux")
def test_what_a_trial_imports_at_its_first_use_is_imported_ahead_for_the_next_workers(
    tmp_path,
):
    """The first trial imports the module itself; the fork server imports it after
    that trial, once a throwaway child of its own showed the import starts no thread,
    so the workers forked after start with it (torch's ``torch._dynamo`` cost each
    worker seconds). Workers forked while that check runs import it themselves."""
    server, seen = _run_learning(tmp_path)
    (first_in, first_pid), *later = seen
    assert first_in == first_pid
    assert [where for where, _ in later[-3:]] == [server] * 3


def test_FASTTUNE_PRELOAD_IMPORTS_0_learns_nothing_either(tmp_path):
    _, seen = _run_learning(tmp_path, FASTTUNE_PRELOAD_IMPORTS="0")
    assert all(where == pid for where, pid in seen)


def test_nothing_is_learned_from_a_trial_that_changes_the_environment(tmp_path):
    """A module reading a variable on import would read the driver's in the server."""
    _, seen = _run_learning(tmp_path, TRIAL_SETS_ENV="1")
    assert all(where == pid for where, pid in seen)


@pytest.mark.skipif(sys.platform != "linux", reason="preloading is for Linux")
def test_a_module_that_starts_a_thread_on_import_is_never_imported_in_the_fork_server(
    tmp_path,
):
    """Its trial import in a throwaway child shows the thread: later workers would be
    forked from a threaded server, so each imports it itself."""
    starts_thread = (
        "import threading, time\n"
        "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
    )
    _, seen = _run_learning(tmp_path, starts_thread + _RECORDS_PID)
    assert all(where == pid for where, pid in seen)


@pytest.mark.skipif(sys.platform != "linux", reason="preloading is for Linux")
def test_a_module_that_sets_a_variable_on_import_is_still_learned(tmp_path):
    """torch sets TORCHINDUCTOR_CACHE_DIR when torch._dynamo is imported: the trial's
    environment changed, but the server's check makes the same change by importing."""
    sets_variable = 'import os\nos.environ.setdefault("LEARNED_CACHE_DIR", "/tmp/learned")\n'
    server, seen = _run_learning(tmp_path, sets_variable + _RECORDS_PID)
    assert [where for where, _ in seen[-3:]] == [server] * 3
