"""A synchronous TensorBoard event-file writer (TFRecord framing of ``Event`` protos).

tensorboardX's own writer hands every event to a background process queue, which
costs ~50 us per scalar; here one result becomes one ``Event`` holding all its
scalars, framed and appended to a buffered file in the calling thread. The
checksums use ``google-crc32c`` (C) when installed, else tensorboardX's own.
"""

from __future__ import annotations

import itertools
import os
import socket
import struct
import time
from typing import Any

_counter = itertools.count()


def _crc32c_function() -> Any:
    try:
        import google_crc32c

        return google_crc32c.value
    except ImportError:  # pragma: no cover - depends on the environment
        from tensorboardX.crc32c import crc32c

        return crc32c


def _masked(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class EventFileWriter:
    """Appends events to a new ``events.out.tfevents.*`` file in ``logdir``.

    Args:
        logdir: Directory of the event file (created if missing).
        flush_secs: Flush buffered events to the file at least this often.
    """

    def __init__(self, logdir: str, flush_secs: float = 30.0):
        from tensorboardX.proto import event_pb2

        os.makedirs(logdir, exist_ok=True)
        name = (
            f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}."
            f"{os.getpid()}.{next(_counter)}"
        )
        self.path = os.path.join(logdir, name)
        self._file = open(self.path, "ab", buffering=1 << 16)  # noqa: SIM115
        self._crc = _crc32c_function()
        self._event_cls = event_pb2.Event
        self._flush_secs = flush_secs
        self._last_flush = time.monotonic()
        self.write_event(self._event_cls(wall_time=time.time(), file_version="brain.Event:2"))

    def write_event(self, event: Any) -> None:
        data = event.SerializeToString()
        header = struct.pack("<Q", len(data))
        crc = self._crc
        self._file.write(
            header
            + struct.pack("<I", _masked(crc(header)))
            + data
            + struct.pack("<I", _masked(crc(data)))
        )
        now = time.monotonic()
        if now - self._last_flush >= self._flush_secs:
            self.flush()
            self._last_flush = now

    def write_summary(self, summary: Any, step: int | None = None) -> None:
        """Wrap a ``Summary`` proto in an ``Event`` and write it."""
        event = self._event_cls(wall_time=time.time(), summary=summary)
        if step is not None:
            event.step = int(step)
        self.write_event(event)

    def flush(self) -> None:
        if not self._file.closed:
            self._file.flush()

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()
