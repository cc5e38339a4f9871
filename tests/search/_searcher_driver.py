"""An experiment with a model-based searcher, run as its own process (which the tests kill).

``python -m tests.search._searcher_driver KIND STORAGE MARKERS RELEASE`` prints
``started`` and runs :func:`make_tuner`. Each trial leaves a file in ``MARKERS``
when it starts (named by the time, holding its ``x`` and ``y``); the trial that finds
``block_at`` files there waits until the file ``RELEASE`` exists, so the test can
kill the driver while that trial runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import uuid
from collections.abc import Iterator

import fasttune as tune

NUM_SAMPLES = 8


def objective(config):
    markers = config["markers"]
    with open(os.path.join(markers, f"{time.time_ns():020d}-{uuid.uuid4().hex}"), "w") as f:
        json.dump([config["x"], config["y"]], f)
    if len(os.listdir(markers)) == config["block_at"]:
        deadline = time.time() + 60
        while not os.path.exists(config["release"]) and time.time() < deadline:
            time.sleep(0.02)
    tune.report({"loss": (config["x"] - 0.3) ** 2 + (config["y"] + 0.2) ** 2})


def make_searcher(kind: str):
    if kind == "hyperopt":
        from fasttune.search.hyperopt import HyperOptSearch

        return HyperOptSearch(random_state_seed=5, n_initial_points=3)
    if kind == "zoopt":
        from fasttune.search.zoopt import ZOOptSearch

        return ZOOptSearch(budget=NUM_SAMPLES, seed=5)
    if kind == "ax":
        return _ax_search(sobol_trials=3)
    if kind == "hebo":
        from fasttune.search.hebo import HEBOSearch

        return HEBOSearch(random_state_seed=5, rand_sample=3)
    from fasttune.search.bayesopt import BayesOptSearch

    return BayesOptSearch(random_state=5, random_search_steps=3)


def _ax_search(sobol_trials: int):
    """Ax with ``sobol_trials`` seeded Sobol points, then BoTorch's model (seeded)."""
    from ax.adapter.registry import Generators
    from ax.generation_strategy.generation_node import GenerationStep
    from ax.generation_strategy.generation_strategy import GenerationStrategy

    from fasttune.search.ax import AxSearch

    steps = [
        GenerationStep(Generators.SOBOL, sobol_trials, generator_kwargs={"seed": 5}),
        GenerationStep(Generators.BOTORCH_MODULAR, -1),
    ]
    return AxSearch(random_seed=5, generation_strategy=GenerationStrategy(nodes=steps))


def make_tuner(kind: str, storage: str, markers: str, release: str, block_at: int) -> tune.Tuner:
    """One trial at a time, so the searcher sees results in the same order in every run."""
    space = {
        "x": tune.uniform(-1, 1),
        "y": tune.uniform(-1, 1),
        "markers": markers,
        "release": release,
        "block_at": block_at,
    }
    return tune.Tuner(
        objective,
        param_space=space,
        tune_config=tune.TuneConfig(
            search_alg=make_searcher(kind),
            metric="loss",
            mode="min",
            num_samples=NUM_SAMPLES,
            max_concurrent_trials=1,
        ),
        run_config=tune.RunConfig(storage_path=storage, name="killed", verbose=0),
    )


if __name__ == "__main__":
    kind, storage, markers, release = sys.argv[1:5]
    tune.init(num_cpus=2)
    print("started", flush=True)
    make_tuner(kind, storage, markers, release, block_at=4).fit()
    print("finished", flush=True)


# ---------------------------------------------------------------------- test helpers
def parabola(config):
    """A trainable whose loss is least at ``x == 7`` (and reward, its negation, most)."""
    tune.report({"loss": (config["x"] - 7) ** 2, "reward": -((config["x"] - 7) ** 2)})


def fails_right_of_five(config):
    """A trainable that raises for ``x > 5``, else reports a loss least at ``x == 3``."""
    if config["x"] > 5:
        raise RuntimeError("no good")
    tune.report({"loss": (config["x"] - 3) ** 2})


def drive(searcher, count, objective=None, prefix="t"):
    """Suggest and complete ``count`` trials in process; return the configs (all dicts)."""
    configs = []
    for i in range(count):
        config = searcher.suggest(f"{prefix}{i}")
        assert isinstance(config, dict), f"suggestion {i} was {config!r}"
        configs.append(config)
        if objective is not None:
            searcher.on_trial_complete(f"{prefix}{i}", {"loss": objective(config)})
    return configs


def assert_runtime_errors_without_space_or_mode(make):
    """``make(space=None, **kwargs)`` builds the searcher; without a space or a mode it
    cannot suggest, and a ``param_space`` of constants is no space."""
    import pytest

    from fasttune.search.sample import uniform

    with pytest.raises(RuntimeError, match=r"has no search space yet"):
        make(metric="m", mode="min").suggest("t")
    with pytest.raises(RuntimeError, match=r"needs a metric and a mode"):
        make({"x": uniform(0, 1)}, metric="m").suggest("t")
    with pytest.raises(RuntimeError, match=r"has no search space"):
        make().set_search_properties("m", "min", {"k": 1})


def assert_restores_and_continues(tmp_path, original, fresh, objective, before, after):
    """Drive ``before`` trials of ``original``, save it with one more running, restore
    into ``fresh`` (which takes space, metric and mode from the file), end the running
    trial on both; then both suggest the same ``after`` configs."""
    drive(original, before, objective)
    running = original.suggest("live")
    path = str(tmp_path / "searcher.pkl")
    original.save(path)
    fresh.restore(path)
    assert (fresh.metric, fresh.mode) == (original.metric, original.mode)
    for searcher in (original, fresh):
        searcher.on_trial_complete("live", {"loss": objective(running)})
    assert drive(fresh, after, objective, "n") == drive(original, after, objective, "n")


def assert_fresh_searcher_restores_space_metric_and_mode(tmp_path, searcher_class, **kwargs):
    """A ``searcher_class()`` built without arguments restores from the file alone (as
    Ray's) and suggests what the saved one, built with ``kwargs``, suggests next."""
    from fasttune.search.sample import uniform

    original = searcher_class(metric="acc", mode="max", **kwargs)
    original.set_search_properties(None, None, {"x": uniform(0, 1), "n": {"y": uniform(2, 3)}})
    config = original.suggest("a")
    original.on_trial_complete("a", {"acc": config["x"]})
    path = str(tmp_path / "searcher.pkl")
    original.save(path)
    restored = searcher_class()
    restored.restore(path)
    assert (restored.metric, restored.mode) == ("acc", "max")
    assert restored.suggest("b") == original.suggest("b")


def _index(result) -> int:
    return int(result.metrics["trial_id"].rsplit("_", 1)[1])


def configs_in_order(grid) -> list[tuple[float, float]]:
    """The ``(x, y)`` of each trial, in the order the trials were created."""
    return [(r.config["x"], r.config["y"]) for r in sorted(grid, key=_index)]


def assert_resumed_once_each(grid):
    """The run restored after the kill ran every trial once: none errored, none was
    lost, no config was suggested twice."""
    assert len(grid) == NUM_SAMPLES
    assert grid.num_terminated == NUM_SAMPLES and grid.num_errors == 0
    assert len(set(configs_in_order(grid))) == NUM_SAMPLES


def assert_resumed_as_reference(grid, reference):
    """The run restored after the kill ran every trial once, and suggested what the same
    seeded run without a crash suggested, in order."""
    assert_resumed_once_each(grid)
    assert configs_in_order(grid) == configs_in_order(reference)


def _started(markers: str) -> list[tuple[float, float]]:
    """The ``(x, y)`` of the trials that started, in order, from their marker files."""
    started = []
    for name in sorted(os.listdir(markers)):
        with open(os.path.join(markers, name)) as f:
            started.append(tuple(json.load(f)))
    return started


def _wait_for_files(directory: str, count: int, proc, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if len(os.listdir(directory)) >= count:
            return
        if proc.poll() is not None:
            raise AssertionError(f"the driver exited early with code {proc.returncode}")
        time.sleep(0.01)
    raise AssertionError(f"fewer than {count} trials started in {timeout} s")


def killed_then_restored(tmp_path, kind: str, reference: bool = True):
    """Kill the driver while its 4th trial runs, restore, and run a reference without a crash.

    Checks that the restored run's first trials are the ones started before the kill,
    with the same configs in the same order (the 4th, cut short, runs again).

    Args:
        reference: False to skip the reference run (for searchers whose model-based
            suggestions are not reproducible from a seed); it is then None.

    Returns:
        ``(restored_grid, saved_searcher_state, reference_grid)``: the searcher state
        is what the restored run saved last (its ``get_state()``).
    """
    import signal
    import subprocess

    from tests.search._saved_state import saved_searcher_state

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    storage, markers = str(tmp_path / "store"), str(tmp_path / "markers")
    release = str(tmp_path / "release")
    os.makedirs(markers)
    with open(tmp_path / "driver.err", "w") as err:
        args = [kind, storage, markers, release]
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.search._searcher_driver", *args],
            cwd=root, env=dict(os.environ, PYTHONPATH=root, OMP_NUM_THREADS="1"),
            stdout=subprocess.PIPE,
            stderr=err, text=True,
        )  # fmt: skip
        try:
            assert proc.stdout.readline().strip() == "started"
            _wait_for_files(markers, 4, proc)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            proc.stdout.close()
    before_kill = _started(markers)
    assert len(before_kill) == 4
    open(release, "w").close()  # the orphaned worker of the blocked trial may now end
    path = os.path.join(storage, "killed")
    assert tune.Tuner.can_restore(path)
    with _torch_on_one_thread(kind):
        grid = tune.Tuner.restore(path, trainable=objective).fit()
        assert configs_in_order(grid)[:4] == before_kill
        saved = saved_searcher_state(path)
        if not reference:
            return grid, saved, None
        ref_markers = str(tmp_path / "ref_markers")
        os.makedirs(ref_markers)
        ref_storage = str(tmp_path / "ref")
        reference = make_tuner(kind, ref_storage, ref_markers, release, block_at=0).fit()
    return grid, saved, reference


@contextlib.contextmanager
def _torch_on_one_thread(kind: str) -> Iterator[None]:
    """Fit Ax's and HEBO's models on one torch thread in this process (as the driver's
    ``OMP_NUM_THREADS=1``): their matrices are tiny, and on a loaded 2-core machine
    torch's threads only contend with the workers and whatever else runs (with two
    busy processes beside it, Ax's test took 99 s on torch's default threads, 48 s on
    one)."""
    if kind not in ("ax", "hebo"):
        yield
        return
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
