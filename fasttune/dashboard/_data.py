"""What the dashboard's JSON endpoints answer, read from the experiment folders."""

from __future__ import annotations

import math
import os
import threading
import time
from typing import Any

from fasttune import result as R
from fasttune.dashboard._security import confine, confine_key
from fasttune.results import rows as table
from fasttune.results.experiment_view import (
    ExperimentView,
    TrialSummary,
    find_experiments,
    is_experiment,
)
from fasttune.storage.filesystem import FileSystem, get_fs_and_path

REFRESH_S = 0.5  # a view is re-read at most this often (live updates within ~2 s)
LOG_TAIL = 64 * 1024
LOG_NAMES = ("stdout", "stderr")
STATUSES = ("RUNNING", "PENDING", "PAUSED", "TERMINATED", "ERROR")
PBT_GLOBAL_FILE = "pbt_global.txt"  # PopulationBasedTraining's log of exploits (Ray's name)


def clean(value: Any) -> Any:
    """JSON-safe: NaN/inf become None; other odd values their text."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return str(value)


class Experiments:
    """The experiments under the served folder, each read once and refreshed cheaply."""

    def __init__(self, root: str):
        self.fs, self._fs_root = get_fs_and_path(os.path.expanduser(root))
        # A local root is its real path; a storage URL (s3://, memory://) stays a URL.
        self.root = os.path.realpath(self._fs_root) if self.fs.is_local else root.rstrip("/")
        self._views: dict[str, tuple[ExperimentView, float]] = {}
        self._lock = threading.Lock()

    def warm(self) -> None:
        """Read every experiment once (run in the background when the server starts)."""
        for exp in self.ids():
            try:
                self.view(exp)
            except (LookupError, ValueError, OSError):
                continue

    def ids(self) -> list[str]:
        """Experiment ids: paths relative to the root (``"."`` for the root itself)."""
        if self.fs.is_local:
            return [os.path.relpath(p, self.root) for p in find_experiments(self.root)]
        return [p[len(self.root) :].strip("/") or "." for p in find_experiments(self.root)]

    def view(self, exp: str) -> ExperimentView:
        """The (refreshed) view of experiment ``exp``.

        Raises:
            OutsideRootError: ``exp`` is not inside the root.
            LookupError: ``exp`` is not an experiment.
        """
        if self.fs.is_local:
            path = fs_path = self.root if exp == "." else confine(self.root, exp)
        else:
            key = "." if exp == "." else confine_key(exp)
            path = self.root if key == "." else f"{self.root}/{key}"
            fs_path = self._fs_root if key == "." else self.fs.join(self._fs_root, key)
        if not is_experiment(self.fs, fs_path):
            raise LookupError(f"no experiment {exp!r} under the served folder")
        with self._lock:
            cached = self._views.get(path)
            now = time.monotonic()
            if cached is None:
                view = ExperimentView(path)
            else:
                view = cached[0]
                if now - cached[1] >= REFRESH_S:
                    view.refresh()
                else:
                    return view
            self._views[path] = (view, now)
            return view


def experiment_summary(exp: str, view: ExperimentView) -> dict[str, Any]:
    counts = view.status_counts()
    best = view.best_trial()
    return {
        "id": exp,
        "name": view.name if exp != "." else os.path.basename(view.path),
        "total": len(view.trials),
        "counts": {s: counts.get(s, 0) for s in STATUSES},
        "metric": view.metric,
        "mode": view.mode,
        "best": clean(best.last_result.get(view.metric)) if best and view.metric else None,
        "best_trial": best.trial_id if best else None,
        "start_time": view.start_time(),
        "last_update": view.last_update(),
    }


def experiment_detail(exp: str, view: ExperimentView) -> dict[str, Any]:
    summary = experiment_summary(exp, view)
    summary["metrics"] = view.metrics()
    summary["params"] = list(dict.fromkeys(k for t in view.trials for k in t.config))
    # PBT's lineage is drawn where its exploit log is (the scheduler's pickle is not read)
    summary["pbt"] = view.fs.exists(view.fs.join(view.fs_path, PBT_GLOBAL_FILE))
    return summary


def trial_row(trial: TrialSummary, metric: str | None, params: list[str]) -> dict[str, Any]:
    row = {
        "trial_id": trial.trial_id,
        "status": trial.status,
        "iterations": trial.iterations,
        "time_total_s": trial.last_result.get(R.TIME_TOTAL_S),
        "node": trial.last_result.get("hostname"),
        "metric": trial.last_result.get(metric) if metric else None,
    }
    row.update({f"config/{p}": trial.config.get(p) for p in params})
    return row


def trials_page(
    view: ExperimentView,
    *,
    offset: int,
    limit: int,
    sort: str | None,
    desc: bool,
    query: str,
    status: str,
    metric: str | None,
) -> dict[str, Any]:
    """One page of the trials table, sorted and filtered on the server.

    ``query``: a ``"column op value"`` filter (``"metric < 0.5"``) or text to look
    for in the trial id and config.
    """
    metric = metric or view.metric
    params = list(dict.fromkeys(k for t in view.trials for k in t.config))[:8]
    rows = [trial_row(t, metric, params) for t in view.trials]
    if status:
        rows = [r for r in rows if r["status"] == status]
    query = query.strip()
    if query:
        if any(op in query for op in "<>=!"):
            rows = table.apply_filter(rows, query)
        else:
            needle = query.lower()
            rows = [r for r in rows if needle in " ".join(map(str, r.values())).lower()]
    if sort:
        rows = table.apply_sort(rows, [sort], desc) if rows else rows
    return {
        "summary": clean(experiment_summary(".", view)),
        "total": len(rows),
        "offset": offset,
        "columns": ["trial_id", "status", "iterations", "metric", "time_total_s", "node"]
        + [f"config/{p}" for p in params],
        "metric": metric,
        "rows": clean(rows[offset : offset + limit]),
    }


def curves(view: ExperimentView, ids: list[str], metric: str, x: str) -> dict[str, Any]:
    traces = []
    for trial_id in ids:
        xs, ys = [], []
        for result in view.history(trial_id):
            xv, yv = result.get(x), result.get(metric)
            if isinstance(xv, (int, float)) and isinstance(yv, (int, float)):
                xs.append(xv)
                ys.append(yv)
        traces.append({"id": trial_id, "x": clean(xs), "y": clean(ys)})
    return {"metric": metric, "x": x, "traces": traces}


def _tail(fs: FileSystem, path: str) -> str | None:
    """The last ``LOG_TAIL`` bytes of a log file, None if there is none."""
    if fs.is_local:
        if not os.path.isfile(path):
            return None
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - LOG_TAIL))
            return f.read().decode("utf-8", "replace")
    if not fs.exists(path):
        return None
    store = getattr(fs, "fs", None)  # the fsspec filesystem: read only the tail
    size = int(store.size(path)) if store is not None else 0
    if store is not None and size > LOG_TAIL:  # (S3 refuses a range of an empty object)
        data = bytes(store.cat_file(path, start=size - LOG_TAIL))
    else:
        data = fs.read_bytes(path)
    return data[-LOG_TAIL:].decode("utf-8", "replace")


def trial_detail(view: ExperimentView, trial_id: str) -> dict[str, Any]:
    trial = view.trial(trial_id)
    folder = trial.path
    logs = {n: _tail(view.fs, view.fs.join(folder, n)) if folder else None for n in LOG_NAMES}
    return clean(
        {
            "trial_id": trial.trial_id,
            "name": trial.name,
            "status": trial.status,
            "path": trial.path,
            "config": trial.config,
            "last_result": trial.last_result,
            "history": view.history(trial_id),
            "checkpoints": view.checkpoints(trial_id),
            "logs": logs,
            "error": view.error_text(trial_id),
            "metric": view.metric,
            "metrics": sorted(
                k for k, v in trial.last_result.items() if isinstance(v, (int, float))
            ),
            "pbt": pbt_history(view, trial_id),
        }
    )


def pbt_history(view: ExperimentView, trial_id: str) -> list[dict[str, Any]]:
    """PBT's exploits this trial took part in (as the one that took weights, or the
    donor), oldest first; empty without PBT's log."""
    if not view.fs.exists(view.fs.join(view.fs_path, PBT_GLOBAL_FILE)):
        return []
    from fasttune.visualization import pbt_exploits

    return [e for e in pbt_exploits(view) if trial_id in (e["target"], e["donor"])]
