"""A TuneBOHB + HyperBandForBOHB experiment run as its own process (which the tests kill).

``python -m tests.search._bohb_driver STORAGE MARKERS RELEASE`` prints ``started``
and runs :func:`make_tuner`. Each trial leaves a file in ``MARKERS`` when it first
starts; the trial that finds ``block_at`` files there waits in its first iteration
until the file ``RELEASE`` exists, so the test can kill the driver meanwhile.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import uuid

import fasttune as tune

NUM_SAMPLES = 9
BLOCK_AT = 6


def curve(config):
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "state.json")) as f:
            start = json.load(f)["step"]
    else:
        markers = config["markers"]
        open(os.path.join(markers, uuid.uuid4().hex), "w").close()
        if len(os.listdir(markers)) == config["block_at"]:
            deadline = time.time() + 60
            while not os.path.exists(config["release"]) and time.time() < deadline:
                time.sleep(0.02)
    for step in range(start, 9):
        directory = tempfile.mkdtemp()
        with open(os.path.join(directory, "state.json"), "w") as f:
            json.dump({"step": step + 1}, f)
        loss = (config["x"] - 0.3) ** 2 + 1.0 / (step + 1)
        tune.report({"loss": loss}, checkpoint=tune.Checkpoint.from_directory(directory))


def make_tuner(storage: str, markers: str, release: str, block_at: int) -> tune.Tuner:
    from fasttune.schedulers.hb_bohb import HyperBandForBOHB
    from fasttune.search.bohb import TuneBOHB

    space = {"x": tune.uniform(0, 1), "markers": markers, "release": release, "block_at": block_at}
    return tune.Tuner(
        curve,
        param_space=space,
        tune_config=tune.TuneConfig(
            search_alg=TuneBOHB(seed=3),
            scheduler=HyperBandForBOHB(max_t=9, reduction_factor=3),
            metric="loss",
            mode="min",
            num_samples=NUM_SAMPLES,
            max_concurrent_trials=2,
        ),
        run_config=tune.RunConfig(storage_path=storage, name="killed", verbose=0),
    )


if __name__ == "__main__":
    storage, markers, release = sys.argv[1:4]
    tune.init(num_cpus=2)
    print("started", flush=True)
    make_tuner(storage, markers, release, block_at=BLOCK_AT).fit()
    print("finished", flush=True)


# ---------------------------------------------------------------------- test helper
def killed_then_restored(tmp_path):
    """Kill the driver while a trial is blocked mid-experiment, then restore.

    Returns:
        ``(restored_grid, state_before, state_after)``: the searcher's saved
        ``get_state()`` at the crash and at the end of the restored run.
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
            [sys.executable, "-m", "tests.search._bohb_driver", storage, markers, release],
            cwd=root, env=dict(os.environ, PYTHONPATH=root), stdout=subprocess.PIPE,
            stderr=err, text=True,
        )  # fmt: skip
        try:
            assert proc.stdout.readline().strip() == "started"
            deadline = time.time() + 60
            while len(os.listdir(markers)) < BLOCK_AT:
                assert proc.poll() is None, f"the driver exited early ({proc.returncode})"
                assert time.time() < deadline, f"fewer than {BLOCK_AT} trials started in 60 s"
                time.sleep(0.01)
            time.sleep(0.3)  # let the other trials reach their pauses
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            proc.stdout.close()
    open(release, "w").close()  # the orphaned worker of the blocked trial may now end
    path = os.path.join(storage, "killed")
    assert tune.Tuner.can_restore(path)
    before = saved_searcher_state(path)
    grid = tune.Tuner.restore(path, trainable=curve).fit()
    after = saved_searcher_state(path)
    return grid, before, after
