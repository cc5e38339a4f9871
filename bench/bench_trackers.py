"""Trials/s of a small workload with each experiment tracker's callback, beside none.

Each tracker logs from the driver, on a thread of its own; this measures what that
costs the run: ``fit()`` wall time (which includes waiting for the tracker at the end)
with the callback, over the same run without it, as trials/s and their ratio, and the
tracker's time per trial that the run did not hide (``s/trial``). ``--sleep`` makes each
iteration take that long, as training does.

    .venv/bin/python bench/bench_trackers.py --trials 16 --iters 5 --sleep 0.1
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import fasttune as tune
from fasttune import RunConfig, Tuner


def _trainable(config: dict[str, Any]) -> None:
    for i in range(config["iters"]):
        time.sleep(config["sleep"])
        tune.report({"loss": config["x"] / (i + 1), "acc": i * 0.1})


def _aim(tmp: str) -> Any:
    from fasttune.logger.aim import AimLoggerCallback

    return AimLoggerCallback(
        repo=os.path.join(tmp, "aim"), system_tracking_interval=None, log_system_params=False
    )


def _comet(tmp: str) -> Any:
    from fasttune.air.integrations.comet import CometLoggerCallback

    return CometLoggerCallback(
        online=False, offline_directory=os.path.join(tmp, "comet"), display_summary_level=0
    )


def _mlflow(tmp: str) -> Any:
    from fasttune.air.integrations.mlflow import MLflowLoggerCallback

    return MLflowLoggerCallback(tracking_uri=f"sqlite:///{tmp}/mlflow.db", experiment_name="b")


def _wandb(tmp: str) -> Any:
    from fasttune.air.integrations.wandb import WandbLoggerCallback

    os.environ["WANDB_MODE"] = "offline"
    return WandbLoggerCallback(project="bench")


_RUNS = itertools.count()
TRACKERS: dict[str, Callable[[str], Any]] = {
    "aim": _aim,
    "comet": _comet,
    "mlflow": _mlflow,
    "wandb": _wandb,
}


def _fit(trials: int, iters: int, sleep: float, callbacks: list[Any], storage: str) -> float:
    start = time.perf_counter()
    results = Tuner(
        _trainable,
        param_space={
            "x": tune.grid_search(list(range(1, trials + 1))),
            "iters": iters,
            "sleep": sleep,
        },
        run_config=RunConfig(
            storage_path=storage, name=f"run{next(_RUNS)}", callbacks=callbacks, verbose=0
        ),
    ).fit()
    elapsed = time.perf_counter() - start
    assert not results.errors, results.errors
    return trials / elapsed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--iters", type=int, default=5)
    parser.add_argument("--sleep", type=float, default=0.0, help="seconds per iteration")
    parser.add_argument("--trackers", default="aim,comet,mlflow")
    args = parser.parse_args(argv)
    names = [n for n in args.trackers.split(",") if n]
    unknown = [n for n in names if n not in TRACKERS]
    if unknown:
        parser.error(f"--trackers: unknown {unknown}; choose from {sorted(TRACKERS)}")
    with tempfile.TemporaryDirectory(prefix="bench_trackers_") as tmp:
        _fit(2, 1, 0.0, [], tmp)  # warm the workers up
        print(f"{args.trials} trials x {args.iters} results each, {args.sleep} s apart")
        print(f"{'tracker':<8} {'trials/s':>9} {'without':>9} {'ratio':>6} {'s/trial':>8}")
        for name in names:
            callback = TRACKERS[name](tmp)
            with_it = _fit(args.trials, args.iters, args.sleep, [callback], tmp)
            without = _fit(args.trials, args.iters, args.sleep, [], tmp)
            cost = 1 / with_it - 1 / without  # the tracker's time per trial not hidden
            print(f"{name:<8} {with_it:9.1f} {without:9.1f} {with_it / without:6.2f} {cost:8.3f}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
