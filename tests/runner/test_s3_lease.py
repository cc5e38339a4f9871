"""One driver per experiment in S3: the lease object, against a real S3 server (moto).

Drivers run as processes of their own with staging directories of their own, as on
other machines. A second driver is refused while the first runs; the lease of a
SIGKILLed driver is taken over; the lease of a paused driver is taken over once it
went stale, and that driver, resumed, stops without writing the experiment again; a
finished run deletes its lease.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest

import fasttune as tune
from fasttune.storage.experiment_lease import LEASE_FILE
from fasttune.storage.experiment_lock import ExperimentInUseError
from tests.runner._driver_script import slow_counter
from tests.runner._lease_scripts import NAME, PAUSE_AT_RESULT, STEPS

s3fs = pytest.importorskip("s3fs", reason='needs the test extra: pip install -e ".[test]"')

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
LOGGER = "fasttune.storage.experiment_lease"


def _run(command: str, url: str, staging: str, **env: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.runner._lease_scripts", command, url],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT, FASTTUNE_STAGING_DIR=staging, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
    return proc


def _ended(proc: subprocess.Popen, returncode: int) -> dict:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == returncode, err
    return json.loads(out.strip().splitlines()[-1])


def _stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped by a signal (state T in /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rpartition(")")[2].split()[0] == "T"


def _wait(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


class _Bucket:
    def __init__(self, server, bucket: str):
        self.s3 = s3fs.S3FileSystem(endpoint_url=server.endpoint_url, skip_instance_cache=True)
        self.prefix = f"{bucket}/exps/{NAME}"
        self.lease = f"{self.prefix}/{LEASE_FILE}"
        self.manifest = f"{self.prefix}/experiment_state.manifest.json"

    def exists(self, path: str) -> bool:
        self.s3.invalidate_cache()
        return bool(self.s3.exists(path))

    def json(self, path: str) -> dict:
        return json.loads(self.s3.cat_file(path))

    def generation(self) -> int:
        return int(self.json(self.manifest)["generation"])

    def iterations(self) -> list[list[int]]:
        """Each trial's training_iteration column, from its result.json in the bucket."""
        self.s3.invalidate_cache()
        found = []
        for trial_dir in sorted(self.s3.ls(self.prefix, detail=False)):
            name = trial_dir.rsplit("/", 1)[-1]
            if name.startswith(".") or name.endswith(".json"):
                continue
            lines = self.s3.cat_file(f"{trial_dir}/result.json").decode().splitlines()
            found.append([json.loads(line)["training_iteration"] for line in lines])
        return found


@pytest.fixture
def machine3(tmp_path, monkeypatch):
    """This process as a third machine: a staging directory of its own."""
    monkeypatch.setenv("FASTTUNE_STAGING_DIR", str(tmp_path / "machine3"))


@pytest.mark.slow
def test_a_second_driver_is_refused_and_a_killed_drivers_lease_is_taken_over(
    s3_server, s3_bucket, tmp_path, machine3, caplog
):
    url = f"s3://{s3_bucket}/exps"
    experiment = f"{url}/{NAME}"
    bucket = _Bucket(s3_server, s3_bucket)
    first = _run("fit", url, str(tmp_path / "machine1"), TUNE_GLOBAL_CHECKPOINT_S="0.2")
    try:
        _wait(lambda: bucket.exists(bucket.lease) and bucket.exists(bucket.manifest), "a lease")
        holder = bucket.json(bucket.lease)
        assert holder["pid"] == first.pid and holder["ttl_s"] == 60

        # A fresh fit of the same experiment, in another process.
        second = _ended(_run("fit", url, str(tmp_path / "machine2")), 3)
        assert second["error"] == "ExperimentInUseError"
        assert f"pid {first.pid} on host" in second["message"]
        assert f"Tuner.restore({experiment!r}" in second["message"]
        # A restore, in this one: refused before anything is downloaded.
        with pytest.raises(ExperimentInUseError, match=rf"pid {first.pid} on host .* expires at"):
            tune.Tuner.restore(experiment, trainable=slow_counter)
        assert not (tmp_path / "machine3").exists()
        assert first.poll() is None, "the running driver was disturbed"
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)

    # Its holder is gone from this machine: taken over at once, with a warning.
    assert bucket.exists(bucket.lease)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        grid = tune.Tuner.restore(experiment, trainable=slow_counter).fit()
    assert f"Taking over the experiment {experiment}" in caplog.text
    assert f"pid {first.pid} on host" in caplog.text
    assert len(grid) == 2 and grid.num_terminated == 2
    assert bucket.iterations() == [list(range(1, STEPS + 1))] * 2  # nothing lost, nothing twice
    assert not bucket.exists(bucket.lease)  # the finished run released it
    tune.Tuner.restore(experiment, trainable=slow_counter)  # so nothing refuses it now


@pytest.mark.slow
def test_a_paused_drivers_stale_lease_is_taken_over_and_it_stops_when_resumed(
    s3_server, s3_bucket, tmp_path, machine3, caplog
):
    url = f"s3://{s3_bucket}/exps"
    experiment = f"{url}/{NAME}"
    bucket = _Bucket(s3_server, s3_bucket)
    first = _run(
        "fit",
        url,
        str(tmp_path / "machine1"),
        TUNE_GLOBAL_CHECKPOINT_S="0.2",
        FASTTUNE_LEASE_TTL_S="5",  # renewed every 1.25 s: fresh when looked at below
        # It stops itself (SIGSTOP) at its 12th result, ~1.5 s in, between two syncs:
        # alive, but it renews nothing any more.
        **{PAUSE_AT_RESULT: "12"},
    )
    try:
        _wait(lambda: _stopped(first.pid), "the driver to pause", timeout=30)
        # Synced during the run before it paused (the start's sync, then at least one
        # of the 0.2 s ones: how many fit in its ~1.5 s depends on the machine's hour).
        assert bucket.exists(bucket.manifest) and bucket.generation() >= 2
        holder = bucket.json(bucket.lease)
        assert holder["pid"] == first.pid and holder["ttl_s"] == 5
        with pytest.raises(ExperimentInUseError, match=rf"pid {first.pid} on host"):
            tune.Tuner.restore(experiment, trainable=slow_counter)  # still fresh
        _wait(lambda: time.time() > holder["renewed"] + holder["ttl_s"] + 0.2, "the lease to age")
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            grid = tune.Tuner.restore(experiment, trainable=slow_counter).fit()
        assert f"Taking over the experiment {experiment}" in caplog.text
        assert len(grid) == 2 and grid.num_terminated == 2
        generation = bucket.generation()
    finally:
        first.send_signal(signal.SIGCONT)
    # Resumed, the first driver finds its lease lost and ends without writing state.
    ended = _ended(first, 3)
    assert ended["error"] == "LeaseLostError"
    assert "no longer holds the lease" in ended["message"]
    assert bucket.generation() == generation
    assert not bucket.exists(bucket.lease)
    assert bucket.iterations() == [list(range(1, STEPS + 1))] * 2
