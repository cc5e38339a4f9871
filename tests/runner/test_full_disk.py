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


class _ResultFileOnAFullDisk(tune.Callback):
    """Puts the first trial's result.json on the full device, once (the callback is
    restored with the experiment, and the disk has space again by then)."""

    def __init__(self, marker: str):
        self.marker = marker

    def on_trial_start(self, iteration, trials, trial, **info):
        if os.path.exists(self.marker):
            return
        open(self.marker, "w").close()
        os.makedirs(trial.local_path, exist_ok=True)
        os.symlink("/dev/full", os.path.join(trial.local_path, "result.json"))


def _three_reports(config):
    for i in range(3):
        tune.report({"i": i})


def test_a_full_disk_is_one_clear_error_and_restore_continues(tmp_path):
    tuner = tune.Tuner(
        _three_reports,
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), name="full", verbose=0,
            callbacks=[_ResultFileOnAFullDisk(str(tmp_path / "filled"))],
        ),
    )  # fmt: skip
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
