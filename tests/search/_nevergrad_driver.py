"""A NevergradSearch experiment run as its own process (which the tests kill).

``python -m tests.search._nevergrad_driver STORAGE MARKERS RELEASE`` prints
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
POINT = {"x": 0.9, "y": -0.9}


def objective(config):
    markers = config["markers"]
    open(os.path.join(markers, uuid.uuid4().hex), "w").close()
    if len(os.listdir(markers)) == config["block_at"]:
        deadline = time.time() + 60
        while not os.path.exists(config["release"]) and time.time() < deadline:
            time.sleep(0.02)
    tune.report({"loss": (config["x"] - 0.3) ** 2 + (config["y"] + 0.2) ** 2})


def make_searcher():
    """A seeded native space: the same suggestions in every run."""
    import nevergrad as ng

    from fasttune.search.nevergrad import NevergradSearch

    space = ng.p.Dict(x=ng.p.Scalar(lower=-1, upper=1), y=ng.p.Scalar(lower=-1, upper=1))
    space.random_state.seed(5)
    return NevergradSearch(ng.optimizers.OnePlusOne, space=space, points_to_evaluate=[POINT])


def make_tuner(storage: str, markers: str, release: str, block_at: int) -> tune.Tuner:
    """One trial at a time, so the optimizer hears results in the same order in every run."""
    space = {"markers": markers, "release": release, "block_at": block_at}
    return tune.Tuner(
        objective,
        param_space=space,
        tune_config=tune.TuneConfig(
            search_alg=make_searcher(),
            metric="loss",
            mode="min",
            num_samples=NUM_SAMPLES,
            max_concurrent_trials=1,
        ),
        run_config=tune.RunConfig(storage_path=storage, name="killed", verbose=0),
    )


if __name__ == "__main__":
    storage, markers, release = sys.argv[1:4]
    tune.init(num_cpus=2)
    print("started", flush=True)
    make_tuner(storage, markers, release, block_at=4).fit()
    print("finished", flush=True)


# ---------------------------------------------------------------------- test helper
def killed_then_restored(tmp_path):
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
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.search._nevergrad_driver", storage, markers, release],
            cwd=root, env=dict(os.environ, PYTHONPATH=root), stdout=subprocess.PIPE,
            stderr=err, text=True,
        )  # fmt: skip
        try:
            assert proc.stdout.readline().strip() == "started"
            deadline = time.time() + 60
            while len(os.listdir(markers)) < 4:
                assert proc.poll() is None, f"the driver exited early ({proc.returncode})"
                assert time.time() < deadline, "fewer than 4 trials started in 60 s"
                time.sleep(0.01)
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
    reference = make_tuner(str(tmp_path / "ref"), ref_markers, release, block_at=0).fit()
    return grid, saved, reference
