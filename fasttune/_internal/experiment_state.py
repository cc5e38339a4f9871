"""The experiment's state on disk: a snapshot plus an append-only journal.

Layout of an experiment directory (besides one directory per trial):

- ``trial_states.jsonl``: base records, one JSON line per trial state. The first
  snapshot of a run writes every trial here (atomically); later snapshots append
  the trials that finished (or changed while finished) since the one before, so
  a finished trial is written once, not at every snapshot;
- ``experiment_state.json``: snapshot of the trials that are not finished (atomic,
  durable), so its cost follows the live trials, not the experiment's size;
- ``experiment_state.journal``: one checksummed JSON line per trial change since the
  snapshot (a trial added, started, checkpointed, failed, finished). Lines carry a sequence
  number; lines at or below the snapshot's number are already in it. Results are
  never journaled (they live in each trial's ``result.json``), so the cost of the
  state does not grow with the number of results;

  Reading applies base records, then the snapshot, then the journal, later ones
  winning; each record carries the trial's creation position (``pos``), which
  orders the trials;
- ``trial_configs.pkl``: append-only, length-prefixed and checksummed pickles of
  ``(trial_id, config)``, written when a trial is created or (re)started; the last one
  wins;
- ``search_state.pkl``: the search algorithm's state (an append-only log whose last
  whole record counts, ``search_state_log.py``), stamped with the number of
  trials it has produced and a bitmap (by creation position) of the trials whose
  completion it was told. It is written *before* a new trial may start, so a trial
  found on disk beyond that stamp never ran and is dropped on restore (the
  searcher suggests it again);
- ``scheduler_state.pkl``, ``callback_state.pkl``: saved with each snapshot;
- ``tuner.pkl``: what ``Tuner.restore`` needs to rebuild the run (pickled values
  live in pickle files, never inside the JSON).

The journal and base records are line-framed with a CRC-32 each, the configs log
length-framed with one (``state_framing.py``): a damaged record is found, skipped (or,
length-framed, ends the reading) and said, naming the file and what was read.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import cloudpickle

from fasttune._internal.search_state_log import SearchStateLog
from fasttune._internal.state_files import (
    load_pickle,
    load_search_state,
    read_configs,
    read_json_lines,
)
from fasttune._internal.state_framing import (
    CONFIGS_HEADER,
    frame_blob,
    frame_line,
    read_document,
    seal_document,
    seal_pickle,
)
from fasttune._internal.state_recovery import pending_records, records_from_folders
from fasttune._support.encoding import encode_result_line
from fasttune._support.pickling import dumps
from fasttune.storage.filesystem import atomic_write_bytes

logger = logging.getLogger(__name__)

SNAPSHOT_FILE = "experiment_state.json"
JOURNAL_FILE = "experiment_state.journal"
BASE_FILE = "trial_states.jsonl"
CONFIGS_FILE = "trial_configs.pkl"
SEARCH_STATE_FILE = "search_state.pkl"
SCHEDULER_STATE_FILE = "scheduler_state.pkl"
CALLBACK_STATE_FILE = "callback_state.pkl"
TUNER_FILE = "tuner.pkl"
SCHEDULER_STATE_FORMAT = 2  # {"format", "state", "seen", "num_trials"}; 1 was the state alone
# Every state file, in no particular order: remote storage receives them together
# (storage/state_commit.py), never one without the others.
STATE_FILES = (
    SNAPSHOT_FILE,
    JOURNAL_FILE,
    BASE_FILE,
    CONFIGS_FILE,
    SEARCH_STATE_FILE,
    SCHEDULER_STATE_FILE,
    CALLBACK_STATE_FILE,
    TUNER_FILE,
)
# 3: checksummed journal, base records and configs log (2 and 1 are read too)
FORMAT_VERSION = 3
_READABLE_VERSIONS = (1, 2, 3)


def trial_state(trial: Any) -> dict[str, Any]:
    """A trial's state for JSON, including its last result.

    Values JSON cannot hold (numpy scalars and arrays, odd keys) are converted when
    the record is encoded (:func:`encode_record`), in the same pass.
    """
    state = trial.to_json()
    state["last_result"] = {k: v for k, v in trial.last_result.items() if k != "config"}
    state["evaluated_params"] = trial.evaluated_params
    return state


def encode_record(record: Any) -> bytes:
    """One JSON line for ``record``, odd values converted (numpy to lists and numbers)."""
    return encode_result_line(record)


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
    # What the scheduler had seen when its state was saved: each then-unfinished
    # trial's last training_iteration, and how many trials existed (None: unknown).
    scheduler_seen: dict[str, int] | None = None
    scheduler_num_trials: int = 0
    callback_state: Any = None


class CompletionBitmap:
    """Trial ids the search algorithm was told finished, one bit per creation position.

    Saved with the search state: a copy of n/8 bytes, where a sorted id list cost
    O(n log n) per save.
    """

    def __init__(self, position: dict[str, int], bits: bytes = b""):
        self._position = position
        self._bits = bytearray(bits)

    def add(self, trial_id: str) -> None:
        pos = self._position[trial_id]
        byte = pos >> 3
        if byte >= len(self._bits):
            self._bits.extend(bytes(byte + 1 - len(self._bits) + 64))
        self._bits[byte] |= 1 << (pos & 7)

    def update(self, trial_ids: Any) -> None:
        for trial_id in trial_ids:
            self.add(trial_id)

    def __contains__(self, trial_id: object) -> bool:
        pos = self._position.get(trial_id)  # type: ignore[call-overload]
        if pos is None or pos >> 3 >= len(self._bits):
            return False
        return bool(self._bits[pos >> 3] & (1 << (pos & 7)))

    def to_bytes(self) -> bytes:
        return bytes(self._bits)


def positions_in_bitmap(bits: bytes) -> list[int]:
    """The creation positions whose bit is set."""
    return [i * 8 + b for i, byte in enumerate(bits) if byte for b in range(8) if byte >> b & 1]


class ExperimentStateStore:
    """Reads and writes one experiment's state files."""

    def __init__(
        self,
        experiment_path: str,
        positions: dict[str, int] | None = None,
        before_record: Callable[[], None] | None = None,
    ):
        self.path = experiment_path
        # Called before each journal line: buffered result lines go out first, so the
        # state never records more (a checkpoint, an end) than the result files hold.
        self._before_record = before_record
        self._seq = 0
        self._journal: Any = None
        self._configs: Any = None
        self._search_log = SearchStateLog(os.path.join(experiment_path, SEARCH_STATE_FILE))
        self._configs_checked = True
        # Creation position of each trial id: the controller's own map when it gives
        # one, else the order in which this store first sees the trials.
        self._pos: dict[str, int] = positions if positions is not None else {}
        # Unfinished trials (listed by each snapshot) and trials journaled since the
        # last snapshot (finished ones among them become base records).
        self._live: dict[str, Any] = {}
        self._changed: dict[str, Any] = {}
        self._based = False  # whether this run wrote the full base file yet

    def _file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def _state(self, trial: Any) -> dict[str, Any]:
        state = trial_state(trial)
        pos = self._pos.get(trial.trial_id)
        if pos is None:
            pos = self._pos[trial.trial_id] = len(self._pos)
        state["pos"] = pos
        return state

    # ------------------------------------------------------------------ writing
    def record_trial(self, trial: Any) -> None:
        """Append the trial's current state to the journal (one whole line)."""
        if self._before_record is not None:
            self._before_record()
        if self._journal is None:
            os.makedirs(self.path, exist_ok=True)
            self._journal = open(self._file(JOURNAL_FILE), "ab", buffering=0)  # noqa: SIM115
        self._seq += 1
        self._journal.write(
            frame_line(encode_record({"seq": self._seq, "trial": self._state(trial)}))
        )
        trial_id = trial.trial_id
        self._changed[trial_id] = trial
        if trial.is_finished():
            self._live.pop(trial_id, None)
        else:
            self._live[trial_id] = trial

    def record_config(self, trial_id: str, config: dict[str, Any]) -> None:
        """Append a trial's config (pickled, length-prefixed) to the configs log."""
        if self._configs is None:
            self._open_configs()
        blob = dumps((trial_id, config))
        self._configs.write(frame_blob(blob) if self._configs_checked else _plain_blob(blob))

    def _open_configs(self) -> None:
        """Open the configs log for appending: a new one with checksums; one written
        before them (a restored experiment) goes on in its own format."""
        os.makedirs(self.path, exist_ok=True)
        self._configs = open(self._file(CONFIGS_FILE), "ab", buffering=0)  # noqa: SIM115
        if self._configs.tell() == 0:
            self._configs.write(CONFIGS_HEADER)
            self._configs_checked = True
        else:
            with open(self._file(CONFIGS_FILE), "rb") as f:
                head = f.read(len(CONFIGS_HEADER))
            self._configs_checked = head == CONFIGS_HEADER
            if not self._configs_checked and CONFIGS_HEADER.startswith(head):
                # Only a cut header (a crash at the first write): start it again.
                self._configs.truncate(0)
                self._configs.write(CONFIGS_HEADER)
                self._configs_checked = True

    def save_search_state(
        self,
        search_alg: Any,
        num_trials: int,
        completed: CompletionBitmap | None = None,
        *,
        compact: bool = False,
    ) -> None:
        """Save the search state, stamped with the trials it produced and the trials
        whose completion it was told (a restore tells it those that finished after).

        Appended to the log (``compact``: the log is rewritten with it alone)."""
        blob = dumps(
            {
                "num_trials": num_trials,
                "completed_bits": completed.to_bytes() if completed is not None else b"",
                "state": search_alg.get_state(),
            }
        )
        self._search_log.save(blob, compact=compact)

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
            # With what the scheduler had seen of each unfinished trial, so that a restore
            # can show it the results that came after (restore.replay_to_scheduler).
            seen = {
                t.trial_id: t.last_result.get("training_iteration", 0)
                for t in self._live_now(trials)
            }
            document_of_scheduler = {
                "format": SCHEDULER_STATE_FORMAT,
                "state": _state_of(scheduler),
                "seen": seen,
                "num_trials": len(trials),
            }
            # The directory's fsync is the snapshot's, below: a power loss may leave the
            # previous plugin states beside the new snapshot, which a restore replays from.
            atomic_write_bytes(
                self._file(SCHEDULER_STATE_FILE),
                seal_pickle(cloudpickle.dumps(document_of_scheduler)),
                sync_dir=False,
            )
        if callbacks is not None:
            atomic_write_bytes(
                self._file(CALLBACK_STATE_FILE),
                seal_pickle(cloudpickle.dumps(callbacks.get_state())),
                sync_dir=False,
            )
        self._write_base(trials)
        document = {
            "version": FORMAT_VERSION,
            "timestamp": time.time(),
            "journal_seq": self._seq,
            "meta": meta,
            "trials": [self._state(t) for t in self._live.values()],
        }
        atomic_write_bytes(self._file(SNAPSHOT_FILE), seal_document(encode_record(document)))
        if self._journal is not None:
            self._journal.truncate(0)

    def _live_now(self, trials: list[Any]) -> list[Any]:
        """The unfinished trials (O(live) once the run's first snapshot is written)."""
        if not self._based:
            return [t for t in trials if not t.is_finished()]
        return list(self._live.values())  # kept by record_trial

    def _write_base(self, trials: list[Any]) -> None:
        """Make the base records hold every trial the snapshot will not list."""
        if not self._based:
            # First snapshot of this run: every trial, in creation order (O(trials) once).
            self._live = {t.trial_id: t for t in trials if not t.is_finished()}
            lines = b"".join(frame_line(encode_record(self._state(t))) for t in trials)
            atomic_write_bytes(self._file(BASE_FILE), lines)
            self._based = True
        else:
            finished = [t for t in self._changed.values() if t.is_finished()]
            if finished:
                lines = b"".join(frame_line(encode_record(self._state(t))) for t in finished)
                with open(self._file(BASE_FILE), "ab") as f:
                    f.write(lines)
                    f.flush()
                    os.fsync(f.fileno())  # before the snapshot stops listing them
        self._changed = {}

    def save_tuner(self, data: dict[str, Any]) -> None:
        atomic_write_bytes(self._file(TUNER_FILE), seal_pickle(cloudpickle.dumps(data)))

    def close(self) -> None:
        for handle in (self._journal, self._configs):
            if handle is not None:
                handle.close()
        self._journal = self._configs = None
        self._search_log.close()

    # ------------------------------------------------------------------ reading
    def load(
        self, *, pickles: bool = True, plugin_states: bool = True, folders_only: bool = False
    ) -> LoadedExperiment:
        """Read the snapshot, replay the journal, and load the pickled states.

        Args:
            pickles: Unpickle the configs log (and the plugins' states). Readers that
                only show the experiment pass False: the records are JSON, and nothing
                is unpickled (configs are left to the trial folders' ``params.json``).
            plugin_states: Unpickle the search, scheduler and callback states (a
                restore needs them; readers of results do not).
            folders_only: Accept a folder whose state files are all gone (the trials
                are rebuilt from their folders alone).

        Raises:
            FileNotFoundError: There is no experiment state at this path.
        """
        snapshot_path = self._file(SNAPSHOT_FILE)
        present = {
            name
            for name in (SNAPSHOT_FILE, JOURNAL_FILE, BASE_FILE, TUNER_FILE, CONFIGS_FILE)
            if os.path.exists(self._file(name))
        }
        if not present and not folders_only:
            raise FileNotFoundError(
                f"No fasttune experiment state at {self.path!r} (expected {SNAPSHOT_FILE}). "
                "Pass the experiment directory, i.e. <storage_path>/<name>."
            )
        try:
            if not os.path.exists(snapshot_path):
                raise ValueError("it is missing")
            with open(snapshot_path, "rb") as f:
                document = read_document(f.read(), sealed_since=3)
        except ValueError as e:  # JSONDecodeError, UnicodeDecodeError: damaged
            if present & {SNAPSHOT_FILE, JOURNAL_FILE, BASE_FILE}:
                logger.warning(
                    "%s is damaged or missing (%s): the experiment is rebuilt from its "
                    "journal, its base records and its trial folders instead.",
                    snapshot_path,
                    e,
                )
            else:  # stopped before its first snapshot, or only trial folders are left
                logger.info("%s has no trial state files; reading its trial folders.", self.path)
            document = {"version": FORMAT_VERSION, "trials": [], "journal_seq": 0, "meta": {}}
        if document.get("version") not in _READABLE_VERSIONS:
            raise ValueError(
                f"{snapshot_path} has state format version {document.get('version')}, but this "
                f"fasttune reads versions {_READABLE_VERSIONS}."
            )
        # Base records, then the snapshot, then the journal: later records win.
        trials: dict[str, dict[str, Any]] = {}
        for state in read_json_lines(self._file(BASE_FILE)):
            trials[state["trial_id"]] = state
        for state in document["trials"]:
            trials[state["trial_id"]] = state
        snapshot_seq = int(document.get("journal_seq", 0))
        last_seq = snapshot_seq
        for entry in read_json_lines(self._file(JOURNAL_FILE)):
            if entry["seq"] <= snapshot_seq:
                continue
            trials[entry["trial"]["trial_id"]] = entry["trial"]
            last_seq = max(last_seq, entry["seq"])
        self._seq = last_seq
        configs = read_configs(self._file(CONFIGS_FILE)) if pickles else {}
        rebuilt = records_from_folders(self.path, set(trials))
        known = set(trials) | {r["trial_id"] for r in rebuilt}
        name = _any_trainable_name(trials, rebuilt, document)
        if pickles:
            rebuilt += pending_records(configs, known, trainable_name=name)
        if rebuilt:
            names = [r["trial_id"] for r in rebuilt]
            logger.warning(
                "%d trials of %s were missing from its state files (a damaged or deleted "
                "journal or snapshot) and were rebuilt from their folders (or, never "
                "started, from the configs log): %s",
                len(rebuilt),
                self.path,
                ", ".join(names[:10]) + (" ..." if len(names) > 10 else ""),
            )
            for record in rebuilt:
                trials[record["trial_id"]] = record
        # Version 1 records carry no position: their order of first sight is creation order.
        first_seen = {trial_id: i for i, trial_id in enumerate(trials)}
        ordered = sorted(trials.values(), key=lambda t: t.get("pos", first_seen[t["trial_id"]]))
        self._pos = {state["trial_id"]: i for i, state in enumerate(ordered)}
        loaded = LoadedExperiment(meta=document.get("meta", {}), trials=ordered, configs=configs)
        if pickles and plugin_states:
            self._load_plugin_states(loaded)
        return loaded

    def _load_plugin_states(self, loaded: LoadedExperiment) -> None:
        ordered = loaded.trials
        search = load_search_state(self._file(SEARCH_STATE_FILE))
        if search is not None:
            loaded.search_state = search["state"]
            loaded.search_num_trials = int(search["num_trials"])
            if "completed_bits" in search:
                loaded.search_completed = frozenset(
                    ordered[pos]["trial_id"]
                    for pos in positions_in_bitmap(search["completed_bits"])
                    if pos < len(ordered)
                )
            else:  # version 1: a list of ids
                loaded.search_completed = frozenset(search.get("completed", ()))
        scheduler = load_pickle(self._file(SCHEDULER_STATE_FILE))
        if isinstance(scheduler, dict) and scheduler.get("format") == SCHEDULER_STATE_FORMAT:
            loaded.scheduler_state = scheduler["state"]
            loaded.scheduler_seen = dict(scheduler["seen"])
            loaded.scheduler_num_trials = int(scheduler["num_trials"])
        else:  # saved before format 2: the state alone
            loaded.scheduler_state = scheduler
        loaded.callback_state = load_pickle(self._file(CALLBACK_STATE_FILE))

    def load_tuner(self) -> dict[str, Any]:
        data = load_pickle(self._file(TUNER_FILE), damaged_ok=False)
        if data is None:
            raise FileNotFoundError(f"No {TUNER_FILE} in {self.path!r}: not a Tuner experiment.")
        return data


def _any_trainable_name(
    trials: dict[str, dict[str, Any]], rebuilt: list[dict[str, Any]], document: dict[str, Any]
) -> str:
    for record in (*trials.values(), *rebuilt):
        return str(record["trainable_name"])
    return str(document.get("meta", {}).get("trainable_name") or "trainable")


def _state_of(plugin: Any) -> Any:
    get_state = getattr(plugin, "get_state", None)
    return get_state() if callable(get_state) else None


def _plain_blob(blob: bytes) -> bytes:
    """A configs-log record as written before checksums (appending to such a log)."""
    return len(blob).to_bytes(8, "little") + blob


def load_trials(
    experiment_path: str,
    *,
    trials_path: str | None = None,
    read_config: Callable[[str], dict[str, Any]] | None = None,
) -> list[Any]:
    """Rebuild the ``Trial`` records of an experiment from its state files.

    The plugins' pickled states are never read here.

    Args:
        experiment_path: The local directory holding the state files.
        trials_path: The experiment directory the trials live in, when it is not
            ``experiment_path`` (remote state downloaded to a local directory).
        read_config: Reads a trial's config from its folder name (e.g. its
            ``params.json``): given, nothing is unpickled; else the configs log (or
            each trial's ``params.pkl``) gives the exact configs.
    """
    from fasttune._internal.trial_state import trial_from_state

    pickles = read_config is None
    loaded = ExperimentStateStore(experiment_path).load(pickles=pickles, plugin_states=False)
    home = trials_path or experiment_path
    trials = []
    for state in loaded.trials:
        if read_config is None:
            config = loaded.configs.get(state["trial_id"])
        else:
            folder = state.get("relative_logdir")
            config = read_config(folder) if folder else {}
        trials.append(trial_from_state(state, home, config=config))
    return trials
