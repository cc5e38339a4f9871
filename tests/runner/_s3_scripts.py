"""Processes of the remote-storage tests: a driver that gets killed, a driver on
"another machine" that restores, a reader. Each prints one JSON line when done."""

from __future__ import annotations

import json
import os
import sys

import fasttune as tune
from tests.runner._driver_script import make_tuner, slow_counter


def restore(url: str) -> None:
    assert tune.Tuner.can_restore(url)
    grid = tune.Tuner.restore(url, trainable=slow_counter).fit()
    print(json.dumps({"trials": len(grid), "terminated": grid.num_terminated}), flush=True)


def read(url: str) -> None:
    """Results and the best checkpoint, from storage alone."""
    analysis = tune.ExperimentAnalysis(url, default_metric="i", default_mode="max")
    grid = tune.ResultGrid(analysis)
    best = grid.get_best_result()
    with best.checkpoint.as_directory() as local, open(os.path.join(local, "state.json")) as f:
        state = json.load(f)
    print(
        json.dumps(
            {
                "statuses": sorted(t.status.value for t in analysis.trials),
                "xs": sorted(r.config["x"] for r in grid),
                "best_path": best.path,
                "best_checkpoint": best.checkpoint.path,
                "filesystem": best.checkpoint.filesystem.type_name,
                "checkpoint_state": state,
                "rows": len(best.metrics_dataframe),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    tune.init(num_cpus=2)
    command, url = sys.argv[1], sys.argv[2]
    if command == "fit":
        print("started", flush=True)
        make_tuner(url, sleep=float(os.environ.get("COUNTER_SLEEP_S", "0.05"))).fit()
        print(json.dumps({"finished": True}), flush=True)
    elif command == "restore":
        restore(url)
    else:
        read(url)
