"""Cut a trial's result files back to the point it resumes from.

A trial that restarts from a checkpoint (after a failure, a driver crash, a pause)
reports again the iterations that came after that checkpoint. Its files must show
each iteration once: before it starts again, ``result.json`` and ``progress.csv``
keep only the rows up to the resumed iteration, and the TensorBoard event files only
the events up to its step. Each file is rewritten atomically, and only when it has
something past that point (found by reading its last line first), so a trial that
resumes from its newest result (a pause, PBT's exploit) costs a stat and a short read.
"""

from __future__ import annotations

import csv
import io
import json
import os
import struct
from collections.abc import Callable, Iterator

from fasttune.result import TRAINING_ITERATION
from fasttune.storage.filesystem import atomic_write_bytes

_TAIL_BYTES = 1 << 16
_RECORD_HEADER = struct.Struct("<QI")  # length, masked crc of the length
_EVENT_STEP_KEY = 0x10  # Event.step: field 2, varint
_EVENT_FILES = "events.out.tfevents.*"


def rewind_json_lines(path: str, iteration: int) -> bool:
    """Keep the lines of a ``result.json`` up to ``iteration``; True if any were cut."""
    return _rewind_lines(path, iteration, _json_iteration, header_lines=0)


def rewind_csv(path: str, iteration: int) -> bool:
    """Keep the header and the rows of a ``progress.csv`` up to ``iteration``."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            header = next(csv.reader(f), None)
    except FileNotFoundError:
        return False
    if not header or TRAINING_ITERATION not in header:
        return False
    column = header.index(TRAINING_ITERATION)

    def row_iteration(line: bytes) -> int | None:
        row = next(csv.reader(io.StringIO(line.decode("utf-8"))), None)
        return _as_int(row[column]) if row and len(row) > column else None

    return _rewind_lines(path, iteration, row_iteration, header_lines=1)


def rewind_event_files(trial_dir: str, step: int) -> int:
    """Drop the events past ``step`` from the trial's TensorBoard files.

    Returns:
        The number of files rewritten.
    """
    import glob  # here: only a resumed trial's files are rewound

    rewritten = 0
    for path in glob.glob(os.path.join(glob.escape(trial_dir), _EVENT_FILES)):
        with open(path, "rb") as f:
            data = f.read()
        kept = [record for record, event_step in _records(data) if event_step <= step]
        joined = b"".join(kept)
        if len(joined) != len(data):
            atomic_write_bytes(path, joined)
            rewritten += 1
    return rewritten


# ---------------------------------------------------------------------- internals
def _rewind_lines(
    path: str,
    iteration: int,
    iteration_of: Callable[[bytes], int | None],
    header_lines: int,
) -> bool:
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        return False
    if size == 0:
        return False
    with open(path, "rb") as f:
        f.seek(max(0, size - _TAIL_BYTES))
        tail = f.read().split(b"\n")
    complete = [line for line in tail[:-1] if line.strip()]
    last = iteration_of(complete[-1]) if complete else None
    if tail[-1] == b"" and last is not None and last <= iteration:
        return False  # nothing past the point, and no torn last line
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    lines.pop()  # after the last newline: empty, or a torn line
    kept = lines[:header_lines]
    for line in lines[header_lines:]:
        found = iteration_of(line)
        if found is None or found <= iteration:
            kept.append(line)
    atomic_write_bytes(path, b"".join(line + b"\n" for line in kept))
    return True


def _json_iteration(line: bytes) -> int | None:
    try:
        value = json.loads(line).get(TRAINING_ITERATION)
    except (ValueError, AttributeError):
        return None
    return _as_int(value)


def _as_int(value: object) -> int | None:
    try:
        return int(float(value))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _records(data: bytes) -> Iterator[tuple[bytes, int]]:
    """Each whole TFRecord of an event file (framing included) and its event's step.

    A torn record at the end (a crash mid-write) is left out.
    """
    offset = 0
    while offset + _RECORD_HEADER.size <= len(data):
        (length, _) = _RECORD_HEADER.unpack_from(data, offset)
        end = offset + _RECORD_HEADER.size + length + 4
        if end > len(data):
            return
        body = data[offset + _RECORD_HEADER.size : end - 4]
        yield data[offset:end], _event_step(body)
        offset = end


def _event_step(event: bytes) -> int:
    """``Event.step`` (0 when absent), read from the encoded message."""
    i = 0
    while i < len(event):
        key, i = _varint(event, i)
        wire_type = key & 7
        if key == _EVENT_STEP_KEY:
            value, _ = _varint(event, i)
            return value - (1 << 64) if value >= 1 << 63 else value
        if wire_type == 0:
            _, i = _varint(event, i)
        elif wire_type == 1:
            i += 8
        elif wire_type == 2:
            length, i = _varint(event, i)
            i += length
        elif wire_type == 5:
            i += 4
        else:
            return 0
    return 0


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while i < len(data):
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
    return value, i
