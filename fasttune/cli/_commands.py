"""What each ``fasttune`` subcommand does (parsing is in ``fasttune/cli/__init__.py``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from fasttune import result as R
from fasttune.results import rows as table
from fasttune.results.experiment_view import (
    ExperimentView,
    NotAnExperimentError,
    find_experiments,
    format_time,
)

STATUSES = ("RUNNING", "PENDING", "PAUSED", "TERMINATED", "ERROR")
EXPECTED_ERRORS = (table.UsageError, NotAnExperimentError, ValueError, OSError, ImportError)
_CONFIG_COLUMNS = 6  # config columns ls shows by default


def run(args: argparse.Namespace) -> int:
    handler = {"ls": ls, "lsx": lsx, "show": show, "plot": plot, "dashboard": dashboard}
    return handler[args.command](args)


def _out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


# ---------------------------------------------------------------------------- tables
def _emit(args: argparse.Namespace, rows: list[dict[str, Any]], default: list[str]) -> int:
    if args.limit is not None and args.limit < 0:
        raise table.UsageError(f"--limit {args.limit}: pass a number of rows, 0 or more.")
    for expression in args.filter:
        rows = table.apply_filter(rows, expression)
    if args.sort:
        rows = table.apply_sort(rows, args.sort, args.desc)
    if args.limit is not None:
        rows = rows[: args.limit]
    if args.columns:
        wanted = [c.strip() for c in args.columns.split(",") if c.strip()]
        columns = table.select_columns(rows, wanted, default)
    else:
        columns = default
    _out(table.render(rows, columns))
    if args.output:
        table.save(rows, columns, args.output)
        _out(f"Saved {len(rows)} rows to {args.output}")
    return 0


def ls(args: argparse.Namespace) -> int:
    """The trials of one experiment, one row each."""
    view = ExperimentView(args.path, metric=args.metric)
    rows = [_trial_row(t) for t in view.trials]
    config_keys = list(dict.fromkeys(k for t in view.trials for k in t.config))
    default = [
        "trial_id",
        "status",
        *(f"config/{k}" for k in config_keys[:_CONFIG_COLUMNS]),
        *([view.metric] if view.metric else []),
        R.TRAINING_ITERATION,
        R.TIME_TOTAL_S,
        "last_update_time",
    ]
    if not rows:
        _out(f"No trials yet in {view.path}.")
    return _emit(args, rows, list(dict.fromkeys(default)))


def _trial_row(trial: Any) -> dict[str, Any]:
    row = trial.row()
    row["start_time"] = format_time(trial.start_time)
    row["last_update_time"] = format_time(trial.last_update)
    return row


def lsx(args: argparse.Namespace) -> int:
    """The experiments under a folder, one row each."""
    rows = []
    for path in find_experiments(args.path):
        try:
            view = ExperimentView(path)
        except NotAnExperimentError as e:
            print(f"fasttune lsx: skipping {path}: {e}", file=sys.stderr)
            continue
        counts = view.status_counts()
        best = view.best_trial()
        row: dict[str, Any] = {
            "name": view.name,
            "total_trials": len(view.trials),
            **{status.lower(): counts.get(status, 0) for status in STATUSES},
            "metric": view.metric,
            "mode": view.mode,
            "best": best.last_result.get(view.metric) if best and view.metric else None,
            "best_trial": best.trial_id if best else None,
            "start_time": format_time(view.start_time()),
            "last_updated": format_time(view.last_update()),
            "path": path,
        }
        rows.append(row)
    if not rows:
        _out(f"No experiments under {args.path}.")
    default = [
        "name",
        "total_trials",
        "running",
        "terminated",
        "error",
        "metric",
        "best",
        "last_updated",
    ]
    return _emit(args, rows, default)


# ---------------------------------------------------------------------------- show
def first_error_line(text: str) -> str:
    """The exception line of the last failure in an ``error.txt`` report.

    >>> first_error_line("Failure # 1\\nTraceback...\\n  x\\nValueError: bad\\n\\n")
    'ValueError: bad'
    """
    last_failure = text.rsplit("Failure # ", 1)[-1]
    lines = [line.strip() for line in last_failure.splitlines() if line.strip()]
    return lines[-1] if len(lines) > 1 else (lines[0] if lines else "unknown error")


def show(args: argparse.Namespace) -> int:
    """Status counts, the best trial (config, checkpoint) and the errors."""
    view = ExperimentView(args.path, metric=args.metric, mode=args.mode)
    counts = view.status_counts()
    _out(f"Experiment: {view.path}")
    summary = ", ".join(f"{s} {counts[s]}" for s in STATUSES if counts.get(s))
    _out(f"Trials: {len(view.trials)}" + (f" ({summary})" if summary else ""))
    if view.start_time() is not None:
        _out(
            f"Started: {format_time(view.start_time())}   "
            f"last result: {format_time(view.last_update())}"
        )
    _out()
    if not view.metric or not view.mode:
        _out(
            "Best trial: unknown: the experiment has no metric and mode; pass "
            "--metric NAME --mode min|max."
        )
    else:
        best = view.best_trial()
        if best is None:
            _out(f"Best trial: none yet (no trial reported a number for {view.metric!r}).")
        else:
            value = best.last_result.get(view.metric)
            _out(
                f"Best trial: {best.trial_id} ({best.status}), {view.metric} = "
                f"{table.format_cell(value)} ({view.mode}) at iteration {best.iterations}"
            )
            _out(f"  path: {best.path}")
            _out("  config:")
            for key, val in best.config.items():
                _out(f"    {key}: {val!r}")
            checkpoints = view.checkpoints(best.trial_id)
            if checkpoints:
                _out(f"  checkpoint: {checkpoints[-1]} (latest of {len(checkpoints)})")
            else:
                _out("  checkpoint: none")
    errored = [t for t in view.trials if t.error_file]
    if errored:
        _out()
        _out(f"Errors ({len(errored)} trials):")
        for trial in errored:
            text = view.error_text(trial.trial_id) or ""
            _out(f"  {trial.trial_id} ({trial.status}): {first_error_line(text)}")
            _out(f"    {trial.error_file}")
    return 0


# ---------------------------------------------------------------------------- plot, dashboard
def plot(args: argparse.Namespace) -> int:
    """Write one chart of the experiment to an HTML (or image) file."""
    from fasttune import visualization as vis

    view = ExperimentView(args.path, metric=args.metric, mode=args.mode)
    if not view.metric and args.kind not in ("stops", "pbt"):
        raise table.UsageError(
            f"--metric: the experiment {args.path!r} names no metric; pass --metric NAME "
            f"(one of: {', '.join(view.metrics()) or 'none reported yet'})."
        )
    makers: dict[str, Any] = {
        "curves": vis.plot_learning_curves,
        "parallel": vis.plot_parallel_coordinate,
        "importance": vis.plot_param_importances,
        "history": vis.plot_optimization_history,
        "scatter": vis.plot_slice,
    }
    if args.param and args.kind not in ("scatter", "parallel"):
        raise table.UsageError(f"--param goes with --kind scatter or parallel, not {args.kind}.")
    if args.kind == "stops":
        figure = vis.plot_stopping_points(view)
    elif args.kind == "pbt":
        figure = vis.plot_pbt_exploits(view)
    else:
        extra = {"params": args.param} if args.param else {}
        figure = makers[args.kind](view, metric=view.metric, mode=view.mode, **extra)
    vis.write_figure(figure, args.output, width=args.width, height=args.height)
    _out(f"Wrote {args.kind} of {view.name} to {args.output}")
    return 0


def dashboard(args: argparse.Namespace) -> int:
    """Serve the dashboard for the experiments under ``args.path``."""
    from fasttune.dashboard import serve

    serve(args.path, host=args.host, port=args.port, token=args.token)
    return 0
