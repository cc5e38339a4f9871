"""create_scheduler and SCHEDULER_IMPORT (Ray's names, lazy imports)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from fasttune.schedulers import FIFOScheduler
from fasttune.schedulers._registry import SCHEDULER_IMPORT, create_scheduler, scheduler_class

RAY_NAMES = {
    "fifo", "async_hyperband", "asynchyperband", "median_stopping_rule", "medianstopping",
    "hyperband", "hb_bohb", "pbt", "pbt_replay", "pb2", "resource_changing",
}  # fmt: skip


def test_the_names_are_rays():
    assert set(SCHEDULER_IMPORT) == RAY_NAMES


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"'nope'.*'async_hyperband'.*'resource_changing'"):
        create_scheduler("nope")
    with pytest.raises(ValueError, match="unknown scheduler None"):
        create_scheduler(None)


def test_names_are_case_insensitive_and_unknown_kwargs_are_left_out():
    scheduler = create_scheduler("FIFO", metric="loss", max_t=3)
    assert type(scheduler) is FIFOScheduler
    assert scheduler_class("MedianStopping").__name__ == "MedianStoppingRule"


def test_a_name_imports_no_other_scheduler_module():
    code = (
        "import sys, fasttune.schedulers; before = set(sys.modules); "
        "from fasttune.schedulers._registry import create_scheduler; "
        "create_scheduler('asynchyperband', metric='m', mode='min'); "
        "print(sorted(m for m in set(sys.modules) - before if m.startswith('fasttune.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    new = set(eval(out.stdout))
    others = {v.partition(":")[0] for v in SCHEDULER_IMPORT.values()}
    others -= {"fasttune.schedulers.async_hyperband"}
    assert not new & others
