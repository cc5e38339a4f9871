"""A full disk gives one clear error naming the file, and the experiment continues
once there is space again.

The device is real: a trial's ``result.json`` is a symlink to ``/dev/full``, whose
writes fail with ENOSPC in the kernel, as on a full disk.
"""

from __future__ import annotations

import os

import pytest

import fasttune as tune
from fasttune.error import StorageFullError


class _ResultFileOnAFullDisk:
    """A trial dirname creator that puts the first trial's result.json on the full
    device before the trial starts, once (the experiment keeps the dirname creator,
    and the disk has space again when it is restored)."""

    def __init__(self, experiment: str, marker: str):
        self.experiment = experiment
        self.marker = marker

    def __call__(self, trial):
        name = f"trial_{trial.trial_id}"
        if not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os.makedirs(os.path.join(self.experiment, name), exist_ok=True)
            os.symlink("/dev/full", os.path.join(self.experiment, name, "result.json"))
        return name


def _three_reports(config):
    for i in range(3):
        tune.report({"i": i})


# The default loggers' files are written by the workers (the default) or by the
# driver (when a driver-side plugin decides per result): a full disk reads the same.
@pytest.mark.parametrize("driver_writes", ["0", "1"], ids=["worker_writes", "driver_writes"])
def test_a_full_disk_is_one_clear_error_and_restore_continues(tmp_path, monkeypatch, driver_writes):
    monkeypatch.setenv("FASTTUNE_DRIVER_WRITES_RESULTS", driver_writes)
    tuner = tune.Tuner(
        _three_reports,
        tune_config=tune.TuneConfig(
            trial_dirname_creator=_ResultFileOnAFullDisk(
                str(tmp_path / "full"), str(tmp_path / "filled")
            )
        ),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="full", verbose=0),
    )
    with pytest.raises(StorageFullError) as info:
        tuner.fit()
    message = str(info.value)
    assert "result.json failed (No space left on device)" in message
    assert "Tuner.restore(" in message
    assert info.value.__cause__ is None and info.value.__suppress_context__  # one traceback
    experiment = str(tmp_path / "full")
    for name in os.listdir(experiment):  # space again: the link is gone
        link = os.path.join(experiment, name, "result.json")
        if os.path.islink(link):
            os.remove(link)
    grid = tune.Tuner.restore(experiment, trainable=_three_reports).fit()
    assert grid.num_errors == 0 and grid[0].metrics["training_iteration"] == 3
