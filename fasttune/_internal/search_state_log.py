"""``search_state.pkl`` as an append-only log: one checksummed record per save.

The search state is saved before every new trial may start, up to hundreds of times
a second. Replacing the file each time (a temporary file and a rename) costs ~0.3-1 ms
of file-system metadata on a journaling file system; appending one record to an open
file costs a few microseconds. The last intact record is the state; the log is
rewritten (atomically) with only that record when it grows past a bound and at every
snapshot, so its size stays bounded and storage uploads stay small.

Format: ``fasttune-search-log v1\\n``, then per record
``<length: 8 bytes LE><crc32 of the length: 4 bytes LE><crc32 of the payload: 4 bytes
LE><payload>``. The length has a checksum of its own so that a record cut by a crash
(its payload shorter than its intact length says: the previous record is the state, as
a trial only starts once its record is whole) is told apart from a damaged one (the
file is then reported damaged).
"""

from __future__ import annotations

import zlib
from typing import Any

from fasttune._internal.state_framing import DamagedStateError
from fasttune.storage.filesystem import atomic_write_bytes

SEARCH_LOG_HEADER = b"fasttune-search-log v1\n"
_HEAD = 16
# Rewrite the log once it holds more than this, or more than 8 records of the last size.
_MAX_BYTES = 1 << 20


def frame_search_record(payload: bytes) -> bytes:
    """One record of the log: checksummed length, checksummed payload."""
    length = len(payload).to_bytes(8, "little")
    return (
        length
        + zlib.crc32(length).to_bytes(4, "little")
        + zlib.crc32(payload).to_bytes(4, "little")
        + payload
    )


def is_search_log(data: bytes) -> bool:
    """Whether ``data`` is a search state log (else a sealed or bare pickle)."""
    return data.startswith(SEARCH_LOG_HEADER)


def last_search_record(data: bytes) -> bytes | None:
    """The payload of the log's last whole record (None if it holds none).

    A record cut short at the end of the file is a save a crash interrupted: the one
    before it is the state.

    Raises:
        DamagedStateError: A record's length or payload fails its checksum.
    """
    offset, last = len(SEARCH_LOG_HEADER), None
    while offset + _HEAD <= len(data):
        length = data[offset : offset + 8]
        if zlib.crc32(length) != int.from_bytes(data[offset + 8 : offset + 12], "little"):
            raise DamagedStateError(f"the length of the record at byte {offset} fails its checksum")
        end = offset + _HEAD + int.from_bytes(length, "little")
        if end > len(data):
            break  # cut by a crash
        payload = data[offset + _HEAD : end]
        if zlib.crc32(payload) != int.from_bytes(data[offset + 12 : offset + 16], "little"):
            raise DamagedStateError(f"the record at byte {offset} fails its checksum")
        last, offset = payload, end
    return last


class SearchStateLog:
    """Appends search state records to ``path``, rewriting it when due.

    Args:
        path: The log's path (``search_state.pkl`` of the experiment).
    """

    def __init__(self, path: str):
        self.path = path
        self._file: Any = None  # open for appending once the log is ours
        self._size = 0

    def save(self, payload: bytes, *, compact: bool = False) -> None:
        """Add ``payload`` as the newest state; ``compact`` rewrites the log with it alone."""
        record = frame_search_record(payload)
        if (
            compact
            or self._file is None
            or self._size + len(record) > max(_MAX_BYTES, 8 * len(record))
        ):
            self._rewrite(record)
            return
        self._file.write(record)
        self._size += len(record)

    def _rewrite(self, record: bytes) -> None:
        # A log written by an earlier run (or an old single-pickle file) is replaced
        # the same way: atomically, never appended to.
        self.close()
        data = SEARCH_LOG_HEADER + record
        atomic_write_bytes(self.path, data, durable=False)
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115
        self._size = len(data)

    def close(self) -> None:
        """Close the file (a later save rewrites it first)."""
        if self._file is not None:
            self._file.close()
            self._file = None
