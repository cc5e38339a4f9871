"""Callbacks hear of every ending at least once, even when the driver dies between a
trial's last record and its on_trial_complete: the restore tells them."""

from __future__ import annotations

import os
import subprocess
import sys

import fasttune as tune
from tests.runner._dies_in_callback import one_report

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_an_ending_missed_by_a_crash_is_told_on_restore(tmp_path):
    storage, side = str(tmp_path / "store"), str(tmp_path / "side")
    os.makedirs(side)
    proc = subprocess.run(
        [sys.executable, "-m", "tests.runner._dies_in_callback", storage, side],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == -9 and os.path.exists(os.path.join(side, "died"))
    assert not os.path.exists(os.path.join(side, "told.log"))  # it died before logging
    tune.init(num_cpus=2)
    try:
        grid = tune.Tuner.restore(os.path.join(storage, "dies"), trainable=one_report).fit()
    finally:
        tune.shutdown()
    assert len(grid) == 3 and grid.num_errors == 0
    told = sorted(int(x) for x in open(os.path.join(side, "told.log")).read().split())
    assert told == [1, 2, 3]  # trial 1's ending, missed by the crash, is told on restore
