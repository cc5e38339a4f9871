"""The files of an experiment's state, and their formats.

Layout of an experiment directory (besides one directory per trial):

- ``trial_states.jsonl``: base records, one JSON line per trial state. The first
  snapshot of a run writes every trial here (atomically); later snapshots append
  the trials that finished (or changed while finished) since the one before, so
  a finished trial is written once, not at every snapshot. A restored run whose base
  file is intact (and not mostly superseded lines) keeps it: its first snapshot
  appends only the finished trials whose record is not their line there;
- ``experiment_state.json``: snapshot of the trials that are not finished (atomic,
  durable), so its cost follows the live trials, not the experiment's size;
- ``experiment_state.journal``: one checksummed JSON line per trial change since the
  snapshot (a trial added, started, checkpointed, failed, finished). Lines carry a sequence
  number; lines at or below the snapshot's number are already in it. A line holds a
  trial's whole state (``{"seq", "trial"}``), or, for a start that changed nothing
  else, the change alone (``{"seq", "change"}``: id, status, start time,
  ``ending_told``), applied to the record before it. Results are
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

from typing import Any

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
# 4: journal lines may hold a start's change alone; 3: checksummed journal, base
# records and configs log (3, 2 and 1 are read too)
FORMAT_VERSION = 4
READABLE_VERSIONS = (1, 2, 3, 4)


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
