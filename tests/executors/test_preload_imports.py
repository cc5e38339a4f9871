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


_DRIVER = textwrap.dedent(
    """
    import json, os, sys
    import fasttune as tune
    from fasttune.executors import _forkserver
    from tests.executors import _imported_where


    class Where(tune.Trainable):
        def step(self):
            return {"imported_in": _imported_where.IMPORTED_IN, "pid": os.getpid(), "done": True}


    grid = tune.Tuner(
        Where,
        param_space={"x": tune.grid_search([1, 2, 3, 4])},
        run_config=tune.RunConfig(storage_path=sys.argv[1], verbose=0),
    ).fit()
    assert not grid.errors
    print(json.dumps({
        "server": _forkserver.default_server().server_pid,
        "results": [[r.metrics["imported_in"], r.metrics["pid"]] for r in grid],
    }))
    """
)


def _run_driver(tmp_path, **env) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", _DRIVER, str(tmp_path)],
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
