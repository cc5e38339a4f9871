"""A read-only view of experiment folders for people: the CLI, plots and dashboard.

Everything is read from the experiment's files (state files, then each trial's
``result.json``/``progress.csv``, ``params``, ``error.txt`` and checkpoint folders),
never from a live driver, so a running, finished or crashed experiment reads alike.
Only JSON is read (configs from ``params.json``): nothing is unpickled, so looking at
an experiment runs none of its code.
Trials come from the same loader as :class:`ExperimentAnalysis`; each trial's last
result is read from its own result file, which runs ahead of the state files while
the experiment is running.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from fasttune import result as R
from fasttune.results import _trial_files as files
from fasttune.results.experiment_analysis import ExperimentAnalysis
from fasttune.storage.filesystem import FileSystem, get_fs_and_path
from fasttune.utils.util import flatten_dict

STATE_FILE = "experiment_state.json"
MANIFEST_FILE = "experiment_state.manifest.json"  # a remote experiment's committed state
FINISHED = frozenset({"TERMINATED", "ERROR"})
LOAD_SPACING = 5  # a full re-read waits at least this many times its own duration
_NOT_METRICS = frozenset({R.CONFIG, "hostname", "node_ip", "date", R.TRIAL_ID, "experiment_tag"})


class _DisplayAnalysis(ExperimentAnalysis):
    """Trials for display: read from JSON only (state records, ``params.json``,
    results); nothing is unpickled, so looking at an experiment runs none of its code."""

    _unpickle_configs = False


class NotAnExperimentError(ValueError):
    """A path that holds no fasttune (or Ray Tune) experiment."""


@dataclass(frozen=True)
class TrialSummary:
    """One trial as a person sees it: status, config, last result, files.

    ``config`` and ``last_result`` are flattened with ``/`` (``{"a": {"b": 1}}`` is
    ``{"a/b": 1}``).
    """

    trial_id: str
    status: str
    path: str | None
    name: str
    config: dict[str, Any]
    last_result: dict[str, Any]
    start_time: float | None = None
    last_update: float | None = None
    num_failures: int = 0
    error_file: str | None = None

    @property
    def iterations(self) -> int:
        value = self.last_result.get(R.TRAINING_ITERATION)
        return int(value) if isinstance(value, (int, float)) else 0

    def value(self, key: str) -> Any:
        """A column: ``trial_id``/``status``/..., ``config/<key>`` or a result key."""
        if key in _FIELDS:
            return _FIELDS[key](self)
        if key.startswith("config/"):
            return self.config.get(key[len("config/") :])
        return self.last_result.get(key)

    def row(self) -> dict[str, Any]:
        """Every column of this trial (fields, ``config/...``, result keys)."""
        out = {name: get(self) for name, get in _FIELDS.items()}
        out.update({f"config/{k}": v for k, v in self.config.items()})
        for key, value in self.last_result.items():
            out.setdefault(key, value)
        return out


_FIELDS: dict[str, Any] = {
    "trial_id": lambda t: t.trial_id,
    "status": lambda t: t.status,
    "trial_name": lambda t: t.name,
    "logdir": lambda t: t.path,
    "start_time": lambda t: t.start_time,
    "last_update_time": lambda t: t.last_update,
    "num_failures": lambda t: t.num_failures,
}


@dataclass
class ExperimentView:
    """The trials of one experiment folder, read once from its files.

    Args:
        path: The experiment folder (``<storage_path>/<name>``), local or a URL.
        metric: Metric ranking the trials; default the experiment's ``TuneConfig``.
        mode: ``"min"`` or ``"max"``; default the experiment's ``TuneConfig``.

    Raises:
        NotAnExperimentError: ``path`` does not exist or holds no experiment.
        ValueError: ``mode`` is not ``"min"``/``"max"``.
    """

    path: str
    metric: str | None = None
    mode: str | None = None
    trials: list[TrialSummary] = field(default_factory=list)
    fs: FileSystem = field(init=False, repr=False)
    _records: list[Any] = field(init=False, repr=False, default_factory=list)
    _stamp: Any = field(init=False, repr=False, default=None)
    _index: dict[str, int] | None = field(init=False, repr=False, default=None)
    _loaded_at: float = field(init=False, repr=False, default=0.0)
    _load_seconds: float = field(init=False, repr=False, default=0.0)

    def __post_init__(self) -> None:
        if self.mode not in (None, "min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {self.mode!r}.")
        self.path = os.fspath(self.path)
        self.fs, self._fs_path = get_fs_and_path(self.path)
        if not self.fs.isdir(self._fs_path):
            raise NotAnExperimentError(
                f"{self.path!r} does not exist or is not a folder. Pass an experiment folder, "
                "<storage_path>/<name> (list them with `fasttune lsx <storage_path>`)."
            )
        meta = self._meta()
        self.metric = self.metric or meta.get("metric")
        self.mode = self.mode or meta.get("mode")
        self._load()

    def _load(self) -> None:
        started = time.monotonic()
        self._stamp = self._state_stamp()
        try:
            analysis = _DisplayAnalysis(self.path)
        except (FileNotFoundError, ValueError) as e:
            raise NotAnExperimentError(
                f"{self.path!r} is not a fasttune experiment: {e} "
                "Pass an experiment folder, <storage_path>/<name>."
            ) from None
        self._records = list(analysis.trials)
        self.trials = [self._summary(t) for t in self._records]
        self._index = None
        self._loaded_at = time.monotonic()
        self._load_seconds = self._loaded_at - started

    def refresh(self) -> None:
        """Read what changed since the last read.

        When the state files changed (a trial added, started, finished), everything is
        read again, but at most once per ``LOAD_SPACING`` times the last full read took
        (a running experiment of 10,000 trials is not re-read back to back, which would
        take a core from the run); in between, and when the state did not change, only
        the unfinished trials' results are read.
        """
        stamp = self._state_stamp()
        due = time.monotonic() - self._loaded_at >= LOAD_SPACING * self._load_seconds
        if (stamp is None or stamp != self._stamp) and due:
            self._load()
            return
        for i, trial in enumerate(self.trials):
            if trial.status not in FINISHED:
                self.trials[i] = self._summary(self._records[i])

    def _state_stamp(self) -> tuple[Any, ...] | None:
        """Size and mtime of the local state files; for a remote experiment its
        manifest (one small object, new at each state commit), None without one."""
        if not self.fs.is_local:
            try:
                return (self.fs.read_bytes(self.fs.join(self._fs_path, MANIFEST_FILE)),)
            except OSError:
                return None
        stamp: list[tuple[int, int] | None] = []
        for name in (STATE_FILE, "experiment_state.journal", "trial_states.jsonl"):
            try:
                info = os.stat(os.path.join(self._fs_path, name))
            except OSError:
                stamp.append(None)
            else:
                stamp.append((info.st_mtime_ns, info.st_size))
        return tuple(stamp)

    # ------------------------------------------------------------------ reading
    def _meta(self) -> dict[str, Any]:
        """The run's settings (name, metric, mode) from the state snapshot."""
        try:
            if self.fs.is_local:
                document = self.fs.read_json(self.fs.join(self._fs_path, STATE_FILE))
            else:  # the committed state of a remote experiment
                from fasttune.storage.state_commit import download_state

                with tempfile.TemporaryDirectory(prefix="fasttune_view_") as local:
                    if download_state(self.fs, self._fs_path, local) is None:
                        return {}
                    with open(os.path.join(local, STATE_FILE), encoding="utf-8") as f:
                        document = json.load(f)
        except (OSError, ValueError):
            return {}
        meta = document.get("meta") if isinstance(document, dict) else None
        return meta if isinstance(meta, dict) else {}

    def _summary(self, trial: Any) -> TrialSummary:
        status = getattr(trial.status, "value", str(trial.status))
        path = trial.local_path
        last = None
        if path and (status not in FINISHED or not trial.last_result):
            # A trial still running has results beyond its state record; a finished
            # one's record holds its last result (one file read less per trial).
            try:
                last = files.read_last_result(self.fs, path)
            except ValueError:
                last = None
        if last is None:
            last = trial.last_result or {}
        flat = flatten_dict({k: v for k, v in last.items() if k != R.CONFIG})
        stamp = files.as_number(flat.get(R.TIMESTAMP))
        error_file = trial.error_file
        if error_file is None and status == "ERROR":
            error_file = _existing(self.fs, path, R.EXPR_ERROR_FILE)
        return TrialSummary(
            trial_id=trial.trial_id,
            status=status,
            path=path,
            name=str(trial),
            config=flatten_dict(dict(trial.config or {})),
            last_result=flat,
            start_time=trial.start_time,
            last_update=float(stamp) if stamp is not None else None,
            num_failures=trial.num_failures,
            error_file=error_file,
        )

    def checkpoints(self, trial_id: str) -> list[str]:
        """The trial's checkpoint folders (full paths), oldest first."""
        path = self.trial(trial_id).path
        if not path:
            return []
        return [self.fs.join(path, name) for name in files.checkpoint_dir_names(self.fs, path)]

    # ------------------------------------------------------------------ queries
    @property
    def fs_path(self) -> str:
        """The experiment folder's path within :attr:`fs`."""
        return self._fs_path

    @property
    def name(self) -> str:
        return os.path.basename(self._fs_path.rstrip("/"))

    def trial(self, trial_id: str) -> TrialSummary:
        """The trial with this id.

        Raises:
            KeyError: No such trial (the message names the experiment).
        """
        if self._index is None or len(self._index) != len(self.trials):
            self._index = {t.trial_id: i for i, t in enumerate(self.trials)}
        position = self._index.get(trial_id)
        if position is not None:
            return self.trials[position]
        raise KeyError(f"No trial {trial_id!r} in experiment {self.path!r}.")

    def status_counts(self) -> dict[str, int]:
        return dict(Counter(t.status for t in self.trials))

    def metrics(self) -> list[str]:
        """Numeric result keys some trial reported, sorted."""
        keys = {
            k
            for t in self.trials
            for k, v in t.last_result.items()
            if k not in _NOT_METRICS and files.as_number(v) is not None
        }
        return sorted(keys)

    def history(self, trial_id: str) -> list[dict[str, Any]]:
        """Every result of the trial, oldest first, flattened with ``/``."""
        trial = self.trial(trial_id)
        if not trial.path:
            return []
        results, _ = files.read_results(self.fs, trial.path)
        return [flatten_dict({k: v for k, v in r.items() if k != R.CONFIG}) for r in results]

    def error_text(self, trial_id: str) -> str | None:
        trial = self.trial(trial_id)
        if trial.error_file and self.fs.exists(trial.error_file):
            return self.fs.read_text(trial.error_file)
        return None

    def best_trial(self) -> TrialSummary | None:
        """The trial with the best last value of :attr:`metric` (NaN/inf left out).

        None without a metric and mode, or when no trial reported a usable value.
        """
        if not self.metric or not self.mode:
            return None
        best: tuple[float, TrialSummary] | None = None
        for trial in self.trials:
            value = files.as_number(trial.last_result.get(self.metric))
            if value is None or math.isnan(value) or math.isinf(value):
                continue
            key = -value if self.mode == "max" else value
            if best is None or key < best[0]:
                best = (key, trial)
        return best[1] if best else None

    def last_update(self) -> float | None:
        times = [t.last_update for t in self.trials if t.last_update is not None]
        return max(times) if times else None

    def start_time(self) -> float | None:
        times = [t.start_time for t in self.trials if t.start_time is not None]
        return min(times) if times else None


def _existing(fs: FileSystem, folder: str | None, name: str) -> str | None:
    if not folder:
        return None
    path = fs.join(folder, name)
    return path if fs.exists(path) else None


def is_experiment(fs: FileSystem, path: str) -> bool:
    """True if ``path`` holds experiment state (local, or committed remotely) or trial folders."""
    if fs.exists(fs.join(path, STATE_FILE)) or fs.exists(fs.join(path, MANIFEST_FILE)):
        return True
    try:
        names = fs.listdir(path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    return any(
        fs.exists(fs.join(path, n, R.EXPR_RESULT_FILE))
        or fs.exists(fs.join(path, n, R.EXPR_PARAM_FILE))
        for n in names
        if not n.startswith(".")
    )


def find_experiments(root: str | os.PathLike[str], depth: int = 2) -> list[str]:
    """The experiment folders under ``root`` (or ``root`` itself), sorted.

    Looks ``depth`` levels down: ``<root>/<name>`` and ``<root>/<folder>/<name>``.

    Raises:
        NotAnExperimentError: ``root`` is not a folder.
    """
    root = os.fspath(root)
    fs, path = get_fs_and_path(root)
    if not fs.isdir(path):
        raise NotAnExperimentError(
            f"{root!r} does not exist or is not a folder. Pass the folder holding your "
            "experiments (a storage_path such as ~/ray_results)."
        )
    if fs.exists(fs.join(path, STATE_FILE)) or fs.exists(fs.join(path, MANIFEST_FILE)):
        return [root]
    found = []
    for name in sorted(fs.listdir(path)):
        child = fs.join(path, name)
        shown = os.path.join(root, name) if fs.is_local else f"{root.rstrip('/')}/{name}"
        if name.startswith(".") or not fs.isdir(child):
            continue
        if is_experiment(fs, child):
            found.append(shown)
        elif depth > 1:
            found.extend(find_experiments(shown, depth - 1))
    return found


def iter_views(root: str | os.PathLike[str]) -> Iterator[ExperimentView]:
    """An :class:`ExperimentView` per experiment under ``root`` (unreadable ones skipped)."""
    for path in find_experiments(root):
        try:
            yield ExperimentView(path)
        except NotAnExperimentError:
            continue


def format_time(stamp: float | None) -> str:
    """``stamp`` (seconds since the epoch) as local ``YYYY-mm-dd HH:MM:SS``, or ``""``."""
    if stamp is None:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))
