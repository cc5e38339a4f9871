"""An experiment with a model-based searcher, run as its own process (which the tests kill).

``python -m tests.search._searcher_driver KIND STORAGE MARKERS RELEASE`` prints
``started`` and runs :func:`make_tuner`. Each trial leaves a file in ``MARKERS``
when it starts; the trial that finds ``block_at`` files there waits until the file
``RELEASE`` exists, so the test can kill the driver while that trial runs.
"""

from __future__ import annotations

import os
import sys
import time
import uuid

import fasttune as tune

NUM_SAMPLES = 8


def objective(config):
    markers = config["markers"]
    open(os.path.join(markers, uuid.uuid4().hex), "w").close()
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
    from fasttune.search.bayesopt import BayesOptSearch

    return BayesOptSearch(random_state=5, random_search_steps=3)


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
def _wait_for_files(directory: str, count: int, proc, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if len(os.listdir(directory)) >= count:
            return
        if proc.poll() is not None:
            raise AssertionError(f"the driver exited early with code {proc.returncode}")
        time.sleep(0.01)
    raise AssertionError(f"fewer than {count} trials started in {timeout} s")


def killed_then_restored(tmp_path, kind: str):
    """Kill the driver while its 4th trial runs, restore, and run a reference without a crash.

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
            cwd=root, env=dict(os.environ, PYTHONPATH=root), stdout=subprocess.PIPE,
            stderr=err, text=True,
        )  # fmt: skip
        try:
            assert proc.stdout.readline().strip() == "started"
            _wait_for_files(markers, 4, proc)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            proc.stdout.close()
    open(release, "w").close()  # the orphaned worker of the blocked trial may now end
    path = os.path.join(storage, "killed")
    assert tune.Tuner.can_restore(path)
    grid = tune.Tuner.restore(path, trainable=objective).fit()
    saved = saved_searcher_state(path)
    ref_markers = str(tmp_path / "ref_markers")
    os.makedirs(ref_markers)
    reference = make_tuner(kind, str(tmp_path / "ref"), ref_markers, release, block_at=0).fit()
    return grid, saved, reference
