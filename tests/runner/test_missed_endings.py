"""Callbacks hear of every ending at least once, even when the driver dies between a
trial's last record and its on_trial_complete: the restore tells them."""

from __future__ import annotations

import os
import shutil
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


class _HearsEndings(tune.Callback):
    def on_trial_complete(self, iteration, trials, trial, **info):
        pass


def _copies_the_journal(config):
    """The second trial copies the journal as the first trial's records left it (the
    run's last snapshot starts a fresh journal)."""
    if config["x"] == 2:
        shutil.copy(os.path.join(config["path"], "experiment_state.journal"), config["copy"])
    tune.report({"score": config["x"]})


def test_an_ending_no_callback_hears_is_journaled_once_as_told(tmp_path):
    """Without a callback listening to endings, a trial's end is one record, already
    marked told (nothing to tell after a crash); with one, the mark follows the call."""
    from fasttune._internal.state_framing import read_lines

    for callbacks, expected in (
        ([], [("PENDING", False), ("RUNNING", False), ("TERMINATED", True)]),
        (
            [_HearsEndings()],
            [("PENDING", False), ("RUNNING", False), ("TERMINATED", False), ("TERMINATED", True)],
        ),
    ):
        name = f"callbacks_{len(callbacks)}"
        copy = str(tmp_path / f"{name}.journal")
        grid = tune.Tuner(
            _copies_the_journal,
            param_space={
                "x": tune.grid_search([1, 2]),
                "path": str(tmp_path / name),
                "copy": copy,
            },
            tune_config=tune.TuneConfig(max_concurrent_trials=1),
            run_config=tune.RunConfig(
                storage_path=str(tmp_path), name=name, callbacks=callbacks, verbose=0
            ),
        ).fit()
        assert grid.num_errors == 0
        first = grid[0] if grid[0].config["x"] == 1 else grid[1]
        trial_id = first.metrics["trial_id"]
        with open(copy, "rb") as f:
            records = read_lines(f.read()).records
        states = [
            (r["status"], r["ending_told"])
            for r in (record.get("trial") or record["change"] for record in records)
            if r["trial_id"] == trial_id
        ]
        assert states == expected
