"""Writing the base records file: the state of every trial a snapshot does not list.

The format is in :mod:`fasttune._internal.state_layout`. A run's first snapshot writes
every trial (atomically), or, for a restored run whose file is intact and unchanged
since the restore read it, appends only the finished trials whose line there is not
their state. Later, a trial's record is added when it ends: at once once its
callbacks were told (its last record, as a rule), else at the next snapshot. Lines go
out whole, ~64 KB at a time, and each snapshot makes them durable before it stops
listing those trials.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

from fasttune._internal.state_files import file_stamp
from fasttune._internal.state_framing import frame_line
from fasttune.storage.filesystem import atomic_write_bytes

# Lines are written out once this many bytes of them wait. Held to the snapshot
# instead, ten seconds of trials ending at 1,700/s were ~20 MB, and twice that while
# the snapshot joined them: a high-water mark the driver's RSS kept.
_WRITE_BYTES = 1 << 16

# Trial ids whose line in the file is their state, and the file's stamp as read
# (``state_files.file_stamp``).
KeptLines = tuple[frozenset[str], tuple[int, int, int] | None]


class BaseRecords:
    """The base records file of one run.

    Args:
        path: The file.
        kept: For a restored run: the trials whose line in the file is still their
            state, and the file's stamp when the restore read it.
    """

    def __init__(self, path: str, kept: KeptLines | None = None):
        self._path = path
        self._kept = kept
        self.written = False  # whether the run's first snapshot wrote (or kept) the file
        # Encoded records waiting for a snapshot: before the first, of every trial that
        # ended; after it, of trials that ended before their callbacks were told.
        self._held: dict[str, bytes] = {}
        self._lines: list[bytes] = []  # framed, waiting to be written out
        self._size = 0
        self._fd = -1
        self._unsynced = False

    def ended(self, trial_id: str, record: bytes, told: bool) -> None:
        """``trial_id`` is finished, its state encoded as ``record``."""
        if self.written and told:
            self._held.pop(trial_id, None)
            self._add(record)
        else:
            self._held[trial_id] = record

    def reopened(self, trial_id: str) -> None:
        """``trial_id`` runs again: the snapshots list it."""
        self._held.pop(trial_id, None)

    def write_first(self, trials: list[Any], encode: Callable[[Any], bytes]) -> None:
        """The run's first snapshot: make the file hold every trial (``encode(trial)``
        gives a record), keeping a restored run's intact lines."""
        kept: frozenset[str] = frozenset()
        if self._kept is not None:
            ids, stamp = self._kept
            if ids and file_stamp(self._path) == stamp:
                kept = ids  # else written since the restore read it: written whole
        self._kept = None
        held, self._held = self._held, {}
        self.written = True
        if kept:
            # Later lines win: the finished trials whose line is not their state are
            # appended (each live one is in the snapshot), not all rewritten (2.6 s
            # at 100,000 trials).
            for trial in trials:
                record = held.get(trial.trial_id)
                if record is None and trial.trial_id not in kept and trial.is_finished():
                    record = encode(trial)
                if record is not None:
                    self._add(record)
            self.make_durable()
        else:  # every trial, in creation order (O(trials) once)
            lines = b"".join(frame_line(held.get(t.trial_id) or encode(t)) for t in trials)
            atomic_write_bytes(self._path, lines)

    def make_durable(self) -> None:
        """Write out what waits (the held records too) and sync the file: a snapshot
        that stops listing finished trials comes after."""
        held, self._held = self._held, {}
        for record in held.values():
            self._add(record)
        self._write()
        if self._unsynced and self._fd >= 0:
            os.fsync(self._fd)
            self._unsynced = False

    def close(self) -> None:
        """Write out what waits and close the file. Lines still waiting are a failed
        snapshot's: those trials stay listed by the snapshot before it and in the
        journal, so a failure here loses nothing."""
        with contextlib.suppress(OSError):
            self._write()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            self._unsynced = False

    def _add(self, record: bytes) -> None:
        line = frame_line(record)
        self._lines.append(line)
        self._size += len(line)
        if self._size >= _WRITE_BYTES:
            self._write()

    def _write(self) -> None:
        """Write the waiting lines out. A write the disk cuts short (full) keeps what it
        did not write, to be written first next time: the snapshot that fails with it
        leaves those trials listed, and the next one writes them whole."""
        if not self._lines:
            return
        if self._fd < 0:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
            self._fd = os.open(self._path, flags, 0o644)
        data = memoryview(b"".join(self._lines))
        self._unsynced = True
        try:
            while data:
                data = data[os.write(self._fd, data) :]
        finally:
            self._lines = [bytes(data)] if data else []
            self._size = len(data)
