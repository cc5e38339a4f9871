"""Writing an experiment's state: base records, a snapshot, an append-only journal.

The files and their formats are described in :mod:`fasttune._internal.state_layout`;
the base records file is written by :mod:`fasttune._internal.base_records`; reading
them back is :mod:`fasttune._internal.state_loading`'s job.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import Any

import cloudpickle

from fasttune._internal.base_records import BaseRecords, KeptLines
from fasttune._internal.search_state_log import SearchStateLog
from fasttune._internal.state_files import load_pickle
from fasttune._internal.state_framing import (
    CONFIGS_HEADER,
    frame_blob,
    frame_line,
    seal_document,
    seal_pickle,
)
from fasttune._internal.state_layout import (
    BASE_FILE,
    CALLBACK_STATE_FILE,
    CONFIGS_FILE,
    FORMAT_VERSION,
    JOURNAL_FILE,
    SCHEDULER_STATE_FILE,
    SCHEDULER_STATE_FORMAT,
    SEARCH_STATE_FILE,
    SNAPSHOT_FILE,
    TUNER_FILE,
    CompletionBitmap,
)
from fasttune._internal.state_loading import LoadedExperiment, load_state
from fasttune._support.encoding import encode_result_line
from fasttune._support.pickling import dumps
from fasttune.storage.filesystem import atomic_write_bytes


def trial_state(trial: Any) -> dict[str, Any]:
    """A trial's state for JSON, including its last result.

    Values JSON cannot hold (numpy scalars and arrays, odd keys) are converted when
    the record is encoded (:func:`encode_record`), in the same pass.
    """
    state = trial.to_json()
    state["last_result"] = {k: v for k, v in trial.last_result.items() if k != "config"}
    state["evaluated_params"] = trial.evaluated_params
    return state


def _unchanging_on_start(trial: Any) -> tuple[Any, ...]:
    """What of a trial's record a start leaves as it was (status, start time and
    ``ending_told`` aside): compared at the start with its value when the trial's
    PENDING record was written."""
    return (
        trial.experiment_tag,
        trial.relative_logdir,
        trial.custom_trial_name,
        trial.custom_dirname,
        trial.num_failures,
        trial.error_file,
        trial.error_msg,
        trial.max_failures,
        trial.checkpoint_frequency,
        trial.checkpoint_at_end,
        trial.results_count,
        id(trial.placement_group_factory),
        id(trial.checkpoint_manager),
        trial.checkpoint_manager.registered if trial.checkpoint_manager else 0,
        id(trial.last_result),
        id(trial.evaluated_params),
    )


def encode_record(record: Any) -> bytes:
    """One JSON line for ``record``, odd values converted (numpy to lists and numbers)."""
    return encode_result_line(record)


class ExperimentStateStore:
    """Reads and writes one experiment's state files."""

    def __init__(
        self,
        experiment_path: str,
        positions: dict[str, int] | None = None,
        before_record: Callable[[], None] | None = None,
        kept_lines: KeptLines | None = None,
    ):
        self.path = experiment_path
        # The base records; for a restored run, the lines there that hold their trials'
        # states (and the file's stamp when read): the first snapshot keeps them.
        self._base = BaseRecords(self._file(BASE_FILE), kept_lines)
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
        self._live: dict[str, Any] = {}  # unfinished trials (listed by each snapshot)
        # What a PENDING trial's whole record held, when this store wrote it: a start
        # that changes nothing else is journaled as a short change line.
        self._pending: dict[str, tuple[Any, ...]] = {}

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
        state = encode_record(self._state(trial))
        # {"seq": ..., "trial": state}, the state's text spliced in: encode_record
        # writes a nested value as it writes it alone.
        self._journal.write(frame_line(b'{"seq": %d, "trial": %s}\n' % (self._seq, state[:-1])))
        trial_id = trial.trial_id
        if trial.is_finished():
            self._live.pop(trial_id, None)
            self._pending.pop(trial_id, None)
            self._base.ended(trial_id, state, told=trial.ending_told)
        else:
            self._live[trial_id] = trial
            self._base.reopened(trial_id)
            if trial.status.value == "PENDING":
                self._pending[trial_id] = _unchanging_on_start(trial)
            else:
                self._pending.pop(trial_id, None)

    def record_start(self, trial: Any) -> None:
        """Journal that a PENDING trial started (now RUNNING).

        When its last record, written by this store, differs from its state now only
        in status, start time and ``ending_told``, the line holds those three alone
        (a fifth of a whole record's cost: most trials start once); else the whole
        state, as :meth:`record_trial`.
        """
        before = self._pending.pop(trial.trial_id, None)
        if before is None or before != _unchanging_on_start(trial):
            self.record_trial(trial)
            return
        if self._before_record is not None:
            self._before_record()
        self._seq += 1
        change = encode_record(
            {
                "trial_id": trial.trial_id,
                "status": trial.status.value,
                "start_time": trial.start_time,
                "ending_told": trial.ending_told,
            }
        )
        self._journal.write(frame_line(b'{"seq": %d, "change": %s}\n' % (self._seq, change[:-1])))
        self._live[trial.trial_id] = trial

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
        first = not self._base.written
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
        elif first:  # the journal of an earlier run (a restore): the snapshot holds its states
            with contextlib.suppress(FileNotFoundError):
                os.truncate(self._file(JOURNAL_FILE), 0)

    def _live_now(self, trials: list[Any]) -> list[Any]:
        """The unfinished trials (O(live) once the run's first snapshot is written)."""
        if not self._base.written:
            return [t for t in trials if not t.is_finished()]
        return list(self._live.values())  # kept by record_trial

    def _write_base(self, trials: list[Any]) -> None:
        """Make the base records hold every trial the snapshot will not list."""
        if self._base.written:
            self._base.make_durable()
        else:
            self._live = {t.trial_id: t for t in trials if not t.is_finished()}
            self._base.write_first(trials, lambda t: encode_record(self._state(t)))

    def save_tuner(self, data: dict[str, Any]) -> None:
        atomic_write_bytes(self._file(TUNER_FILE), seal_pickle(cloudpickle.dumps(data)))

    def close(self) -> None:
        self._base.close()
        for handle in (self._journal, self._configs):
            if handle is not None:
                handle.close()
        self._journal = self._configs = None
        self._search_log.close()

    # ------------------------------------------------------------------ reading
    def load(
        self, *, pickles: bool = True, plugin_states: bool = True, folders_only: bool = False
    ) -> LoadedExperiment:
        """Read the state files back (:func:`~fasttune._internal.state_loading.load_state`,
        whose arguments these are); later records this store writes follow them."""
        loaded, self._seq = load_state(
            self.path, pickles=pickles, plugin_states=plugin_states, folders_only=folders_only
        )
        self._pos = {state["trial_id"]: i for i, state in enumerate(loaded.trials)}
        return loaded

    def load_tuner(self) -> dict[str, Any]:
        data = load_pickle(self._file(TUNER_FILE), damaged_ok=False)
        if data is None:
            raise FileNotFoundError(f"No {TUNER_FILE} in {self.path!r}: not a Tuner experiment.")
        return data


def _state_of(plugin: Any) -> Any:
    get_state = getattr(plugin, "get_state", None)
    return get_state() if callable(get_state) else None


def _plain_blob(blob: bytes) -> bytes:
    """A configs-log record as written before checksums (appending to such a log)."""
    return len(blob).to_bytes(8, "little") + blob
