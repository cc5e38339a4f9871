"""The experiment's state on disk: a snapshot plus an append-only journal.

Layout of an experiment directory (besides one directory per trial):

- ``experiment_state.json``: snapshot of every trial's state (atomic, durable);
- ``experiment_state.journal``: one JSON line per trial change since the snapshot
  (a trial added, started, checkpointed, failed, finished). Lines carry a sequence
  number; lines at or below the snapshot's number are already in it. Results are
  never journaled (they live in each trial's ``result.json``), so the cost of the
  state does not grow with the number of results;
- ``trial_configs.pkl``: append-only, length-prefixed pickles of ``(trial_id,
  config)``, written when a trial is created or (re)started; the last one wins;
- ``search_state.pkl``: the search algorithm's state, stamped with the number of
  trials it has produced. It is written *before* a new trial may start, so a trial
  found on disk beyond that stamp never ran and is dropped on restore (the
  searcher suggests it again);
- ``scheduler_state.pkl``, ``callback_state.pkl``: saved with each snapshot;
- ``tuner.pkl``: what ``Tuner.restore`` needs to rebuild the run (pickled values
  live in pickle files, never inside the JSON).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

import cloudpickle

from fasttune.logger._encoding import to_builtin
from fasttune.storage.filesystem import atomic_write_bytes, atomic_write_text

SNAPSHOT_FILE = "experiment_state.json"
JOURNAL_FILE = "experiment_state.journal"
CONFIGS_FILE = "trial_configs.pkl"
SEARCH_STATE_FILE = "search_state.pkl"
SCHEDULER_STATE_FILE = "scheduler_state.pkl"
CALLBACK_STATE_FILE = "callback_state.pkl"
TUNER_FILE = "tuner.pkl"
FORMAT_VERSION = 1


def trial_state(trial: Any) -> dict[str, Any]:
    """A trial's JSON state, including its last result (made JSON-safe)."""
    state = trial.to_json()
    state["last_result"] = to_builtin({k: v for k, v in trial.last_result.items() if k != "config"})
    state["evaluated_params"] = to_builtin(trial.evaluated_params)
    return state


@dataclass
class LoadedExperiment:
    """What :meth:`ExperimentStateStore.load` found on disk."""

    meta: dict[str, Any] = field(default_factory=dict)
    trials: list[dict[str, Any]] = field(default_factory=list)
    configs: dict[str, Any] = field(default_factory=dict)
    search_state: Any = None
    search_num_trials: int = 0
    search_completed: frozenset[str] = frozenset()
    scheduler_state: Any = None
    callback_state: Any = None


class ExperimentStateStore:
    """Reads and writes one experiment's state files."""

    def __init__(self, experiment_path: str):
        self.path = experiment_path
        self._seq = 0
        self._journal: Any = None
        self._configs: Any = None

    def _file(self, name: str) -> str:
        return os.path.join(self.path, name)

    # ------------------------------------------------------------------ writing
    def record_trial(self, trial: Any) -> None:
        """Append the trial's current state to the journal (one whole line)."""
        if self._journal is None:
            os.makedirs(self.path, exist_ok=True)
            self._journal = open(self._file(JOURNAL_FILE), "ab", buffering=0)  # noqa: SIM115
        self._seq += 1
        line = json.dumps({"seq": self._seq, "trial": trial_state(trial)}) + "\n"
        self._journal.write(line.encode("utf-8"))

    def record_config(self, trial_id: str, config: dict[str, Any]) -> None:
        """Append a trial's config (pickled, length-prefixed) to the configs log."""
        if self._configs is None:
            os.makedirs(self.path, exist_ok=True)
            self._configs = open(self._file(CONFIGS_FILE), "ab", buffering=0)  # noqa: SIM115
        blob = cloudpickle.dumps((trial_id, config))
        self._configs.write(len(blob).to_bytes(8, "little") + blob)

    def save_search_state(
        self, search_alg: Any, num_trials: int, completed: Any = frozenset()
    ) -> None:
        """Save the search state, stamped with the trials it produced and the ids whose
        completion it was told (a restore tells it those that finished after)."""
        blob = cloudpickle.dumps(
            {
                "num_trials": num_trials,
                "completed": sorted(completed),
                "state": search_alg.get_state(),
            }
        )
        atomic_write_bytes(self._file(SEARCH_STATE_FILE), blob, durable=False)

    def snapshot(
        self,
        trials: list[Any],
        meta: dict[str, Any],
        *,
        scheduler: Any = None,
        callbacks: Any = None,
    ) -> None:
        """Write a full snapshot (atomically) and start a fresh journal."""
        if scheduler is not None:
            atomic_write_bytes(
                self._file(SCHEDULER_STATE_FILE), cloudpickle.dumps(_state_of(scheduler))
            )
        if callbacks is not None:
            atomic_write_bytes(
                self._file(CALLBACK_STATE_FILE), cloudpickle.dumps(callbacks.get_state())
            )
        document = {
            "version": FORMAT_VERSION,
            "timestamp": time.time(),
            "journal_seq": self._seq,
            "meta": to_builtin(meta),
            "trials": [trial_state(t) for t in trials],
        }
        atomic_write_text(self._file(SNAPSHOT_FILE), json.dumps(document))
        if self._journal is not None:
            self._journal.truncate(0)

    def save_tuner(self, data: dict[str, Any]) -> None:
        atomic_write_bytes(self._file(TUNER_FILE), cloudpickle.dumps(data))

    def close(self) -> None:
        for handle in (self._journal, self._configs):
            if handle is not None:
                handle.close()
        self._journal = self._configs = None

    # ------------------------------------------------------------------ reading
    def load(self) -> LoadedExperiment:
        """Read the snapshot, replay the journal, and load the pickled states.

        Raises:
            FileNotFoundError: There is no experiment state at this path.
        """
        snapshot_path = self._file(SNAPSHOT_FILE)
        if not os.path.exists(snapshot_path):
            raise FileNotFoundError(
                f"No fasttune experiment state at {self.path!r} (expected {SNAPSHOT_FILE}). "
                "Pass the experiment directory, i.e. <storage_path>/<name>."
            )
        with open(snapshot_path, encoding="utf-8") as f:
            document = json.load(f)
        if document.get("version") != FORMAT_VERSION:
            raise ValueError(
                f"{snapshot_path} has state format version {document.get('version')}, but this "
                f"fasttune reads version {FORMAT_VERSION}."
            )
        trials = {t["trial_id"]: t for t in document["trials"]}
        order = [t["trial_id"] for t in document["trials"]]
        last_seq = int(document.get("journal_seq", 0))
        for entry in _read_journal(self._file(JOURNAL_FILE)):
            if entry["seq"] <= int(document.get("journal_seq", 0)):
                continue
            state = entry["trial"]
            if state["trial_id"] not in trials:
                order.append(state["trial_id"])
            trials[state["trial_id"]] = state
            last_seq = max(last_seq, entry["seq"])
        self._seq = last_seq
        loaded = LoadedExperiment(
            meta=document.get("meta", {}),
            trials=[trials[i] for i in order],
            configs=_read_configs(self._file(CONFIGS_FILE)),
        )
        search = _load_pickle(self._file(SEARCH_STATE_FILE))
        if search is not None:
            loaded.search_state = search["state"]
            loaded.search_num_trials = int(search["num_trials"])
            loaded.search_completed = frozenset(search.get("completed", ()))
        loaded.scheduler_state = _load_pickle(self._file(SCHEDULER_STATE_FILE))
        loaded.callback_state = _load_pickle(self._file(CALLBACK_STATE_FILE))
        return loaded

    def load_tuner(self) -> dict[str, Any]:
        data = _load_pickle(self._file(TUNER_FILE))
        if data is None:
            raise FileNotFoundError(f"No {TUNER_FILE} in {self.path!r}: not a Tuner experiment.")
        return data


def _state_of(plugin: Any) -> Any:
    get_state = getattr(plugin, "get_state", None)
    return get_state() if callable(get_state) else None


def _read_journal(path: str) -> list[dict[str, Any]]:
    if not os.path.exists(path):
        return []
    entries = []
    with open(path, "rb") as f:
        for raw in f:
            if not raw.endswith(b"\n"):
                break  # a torn last line: the write never completed
            try:
                entries.append(json.loads(raw))
            except ValueError:
                break
    return entries


def _read_configs(path: str) -> dict[str, Any]:
    configs: dict[str, Any] = {}
    if not os.path.exists(path):
        return configs
    with open(path, "rb") as f:
        data = f.read()
    offset = 0
    while offset + 8 <= len(data):
        size = int.from_bytes(data[offset : offset + 8], "little")
        if offset + 8 + size > len(data):
            break  # a torn last record
        trial_id, config = cloudpickle.loads(data[offset + 8 : offset + 8 + size])
        configs[trial_id] = config
        offset += 8 + size
    return configs


def _load_pickle(path: str) -> Any:
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        return cloudpickle.load(f)


def load_trials(experiment_path: str) -> list[Any]:
    """Rebuild the ``Trial`` records of an experiment from its state files."""
    from fasttune._internal.trial_state import trial_from_state

    loaded = ExperimentStateStore(experiment_path).load()
    return [
        trial_from_state(state, experiment_path, config=loaded.configs.get(state["trial_id"]))
        for state in loaded.trials
    ]
