"""A driver killed at its first durable write points leaves an experiment that is
either restorable or cleanly absent: ``tuner.pkl`` is the first file written.

Each case runs the driver as its own process and SIGKILLs it just before its k-th
``fsync``/``os.replace`` (k = 0: right after the ``Tuner`` is built).
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import fasttune as tune
from tests.runner._killed_at_write import count, make_tuner

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
# The writes of the whole run but its last: a write test of the storage, tuner.pkl,
# the plugins' states, the base records, the snapshots, the search state (appends to
# its log are not among them: tests/runner/test_search_state_log.py kills at those).
POINTS = 22


def _killed_at(storage: str, k: int) -> int:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.runner._killed_at_write", storage, str(k)],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    return proc.returncode


def _scores(grid) -> list[float]:
    assert grid.num_errors == 0
    return sorted(r.metrics["score"] for r in grid)


@pytest.mark.parametrize("k", range(POINTS + 1))
def test_killed_at_an_early_write_is_restorable_or_cleanly_absent(tmp_path, k):
    storage = str(tmp_path / "store")
    path = os.path.join(storage, "early")
    if _killed_at(storage, k) == 0:
        pytest.fail(f"the driver finished before its write point {k}: raise POINTS' reach")
    if tune.Tuner.can_restore(path):
        # Restorable: the run ends as an uninterrupted one (every score once).
        grid = tune.Tuner.restore(path, trainable=count).fit()
        assert _scores(grid) == [12, 22, 32]
        return
    # Cleanly absent: nothing a restore could take for an experiment, and a new fit
    # with the same name runs in place (nothing is moved aside as an earlier run).
    names = set(os.listdir(path)) if os.path.isdir(path) else set()
    assert "tuner.pkl" not in names
    assert not [n for n in names if not n.startswith(".")], names
    with pytest.raises(ValueError, match="no fasttune experiment there"):
        tune.Tuner.restore(path, trainable=count)
    assert _scores(make_tuner(storage).fit()) == [12, 22, 32]
    assert os.listdir(storage) == ["early"]
    assert not [n for n in os.listdir(path) if n.endswith(".tmp")]  # cut writes removed
