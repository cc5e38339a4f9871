"""A synchronous TensorBoard event-file writer (TFRecord framing of encoded events).

tensorboardX's own writer hands every event to a background process queue, which
costs ~50 us per scalar; here one result becomes one ``Event`` holding all its
scalars, encoded by :mod:`fasttune.logger._tb_proto`, framed and appended to a
buffer written out in the calling thread. Nothing here imports protobuf or tensorboardX.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import struct
import time
from collections.abc import Callable

from fasttune._support.process_info import hostname
from fasttune.logger import _tb_proto
from fasttune.storage.filesystem import open_creating_dirs

_counter = itertools.count()
_BUFFER_SIZE = 1 << 16  # records are written out past this many bytes, or by time
_pack_length = struct.Struct("<Q").pack
_pack_crc = struct.Struct("<I").pack
_pack_double = struct.Struct("<d").pack
# Field keys of an Event: wall_time (1, fixed64), step (2, varint), summary (5, bytes).
_WALL_TIME_KEY = b"\x09"
_STEP_AND_SUMMARY = [(b"\x10" + bytes((n,)) if n else b"") + b"\x2a" for n in range(0x80)]
_SMALL_LENGTHS = [bytes((n,)) for n in range(0x80)]


_varint = _tb_proto.varint


def _step_and_summary(step: int) -> bytes:
    """The step field (``step`` > 0) and the summary's key of an ``Event``."""
    return b"\x10" + _varint(step) + b"\x2a"


def _crc32c_table() -> list[int]:
    """The byte table of CRC-32C (Castagnoli, reflected polynomial 0x82F63B78)."""
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        table.append(crc)
    return table


_CRC32C_TABLE = _crc32c_table()


def crc32c_python(data: bytes) -> int:
    """CRC-32C of ``data`` in pure Python (~0.1 us per byte).

    The fallback when ``google-crc32c`` (C) is not installed. tensorboardX has one
    too, but importing it imports the ``tensorboardX`` package, and with it torch.
    """
    crc = 0xFFFFFFFF
    table = _CRC32C_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _crc32c_function() -> Callable[[bytes], int]:
    try:
        import google_crc32c

        return google_crc32c.value
    except ImportError:  # pragma: no cover - depends on the environment
        return crc32c_python


_U32 = 0xFFFFFFFF


def _masked(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & _U32


class EventFileWriter:
    """Appends events to a new ``events.out.tfevents.*`` file in ``logdir``.

    Args:
        logdir: Directory of the event file (created if missing).
        flush_secs: Flush buffered events to the file at least this often.
    """

    def __init__(self, logdir: str, flush_secs: float = 30.0):
        name = (
            f"events.out.tfevents.{int(time.time()):010d}.{hostname()}."
            f"{os.getpid()}.{next(_counter)}"
        )
        self.path = os.path.join(logdir, name)
        # A descriptor and a list of records, not a buffered file object: one is
        # opened per trial, and the object's set-up (fstat, seek, a 64 KiB buffer)
        # was a third of the writer's cost.
        self._fd = open_creating_dirs(
            self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
        )
        self._pending: list[bytes] = []
        self._pending_size = 0
        self._crc = _crc32c_function()
        self._headers: dict[int, bytes] = {}  # framed length headers by event length
        self._flush_secs = flush_secs
        self._last_flush = time.monotonic()
        self.write_event(_tb_proto.event(time.time(), file_version=_tb_proto.FILE_VERSION))

    def write_event(self, data: bytes) -> None:
        """Append one encoded ``Event`` as a TFRecord: length, crc, data, crc."""
        framed: list[bytes] = []
        self._frame(data, framed)
        self._append(b"".join(framed))

    def write_summary(self, summary: bytes, step: int | None = None) -> None:
        """Wrap an encoded ``Summary`` in an ``Event`` stamped now, and write it."""
        self.write_summaries([(summary, 0 if step is None else int(step))])

    def write_summaries(self, summaries: list[tuple[bytes, int]]) -> None:
        """Wrap each encoded ``Summary`` in an ``Event`` at its step (an int), all
        stamped now, and write them at once."""
        now_s = time.time()
        wall_time = _WALL_TIME_KEY + _pack_double(now_s)
        framed: list[bytes] = []
        for summary, step in summaries:
            if step >= 0:
                # The common case (a result's scalars) encoded inline: the same bytes
                # as _tb_proto.event, a third of its cost.
                size = len(summary)
                data = b"".join(
                    (
                        wall_time,
                        _STEP_AND_SUMMARY[step] if step < 0x80 else _step_and_summary(step),
                        _SMALL_LENGTHS[size] if size < 0x80 else _varint(size),
                        summary,
                    )
                )
            else:
                data = _tb_proto.event(now_s, step, summary=summary)
            self._frame(data, framed)
        self._append(b"".join(framed))

    def _frame(self, data: bytes, framed: list[bytes]) -> None:
        """Add the TFRecord of ``data`` to ``framed``: length, crc, data, crc."""
        size = len(data)
        framed_header = self._headers.get(size)
        if framed_header is None:  # events of one result shape share their length
            header = _pack_length(size)
            framed_header = self._headers[size] = header + _pack_crc(_masked(self._crc(header)))
        crc = self._crc(data)
        framed.append(framed_header)
        framed.append(data)
        framed.append(_pack_crc((((crc >> 15) | (crc << 17)) + 0xA282EAD8) & _U32))

    def _append(self, records: bytes) -> None:
        self._pending.append(records)
        self._pending_size += len(records)
        now = time.monotonic()
        if self._pending_size >= _BUFFER_SIZE or now - self._last_flush >= self._flush_secs:
            self.flush()
            self._last_flush = now

    def flush(self) -> None:
        """Write the buffered records to the file."""
        if self._fd < 0 or not self._pending:
            return
        data = b"".join(self._pending)
        self._pending = []
        self._pending_size = 0
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def close(self) -> None:
        """Flush and close (idempotent)."""
        if self._fd < 0:
            return
        try:
            self.flush()
        finally:
            os.close(self._fd)
            self._fd = -1

    def __del__(self) -> None:
        # Dropped without close(): what it buffered still reaches the file, as a
        # buffered file object's would.
        with contextlib.suppress(Exception):
            self.close()
