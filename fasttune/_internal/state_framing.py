"""Checksummed framing of the experiment's append-only state logs.

Line-framed logs (the journal, the base records): each record is one line,
``<crc32 as 8 hex digits> <JSON>\\n``, the checksum taken over the JSON and its
newline. A line that fails its checksum is skipped and counted: each record is a
whole trial state, so the intact lines after it are valid on their own. A last line
without its newline is a write the crash cut. Lines written before checksums (plain
``{...}\\n``) are still read, checked by JSON parsing alone.

The snapshot (one JSON object) ends with its own checksum, ``, "crc32": "<8 hex>"}``,
taken over the object as it was before that key was added: JSON readers see one key
more, and a changed byte anywhere is found. A snapshot written before checksums has
no such ending and is checked by parsing alone.

Pickled state files (``tuner.pkl`` and the plugins' states): a header, the crc32 of
the pickle (4 bytes LE), then the pickle. A changed byte is found before anything is
unpickled, and the file is treated as damaged. Files written before checksums (a bare
pickle) are still read.

Length-framed logs (the configs log): a header, then ``<length: 8 bytes LE>
<crc32: 4 bytes LE><payload>`` per record. A record that fails its checksum ends the
reading there (its length cannot be trusted to find the next one). Files written
before checksums (no header: ``<length><payload>`` records) are still read.
"""

from __future__ import annotations

import json
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

CONFIGS_HEADER = b"fasttune-configs-log v2\n"
_TRIAL_ID = re.compile(rb'"trial_id": ?"([0-9A-Za-z_]{1,64})"')


PICKLE_HEADER = b"fasttune-state v1\n"


class DamagedStateError(ValueError):
    """A state file failed its checksum."""


def seal_pickle(payload: bytes) -> bytes:
    """A pickled state file's bytes: header, checksum, ``payload``."""
    return PICKLE_HEADER + zlib.crc32(payload).to_bytes(4, "little") + payload


def open_pickle(data: bytes) -> bytes:
    """The pickle inside a state file written by :func:`seal_pickle` (or a bare one).

    Raises:
        DamagedStateError: The checksum does not match (or the file is cut short).
    """
    if not data.startswith(PICKLE_HEADER):
        return data  # written before checksums
    start = len(PICKLE_HEADER) + 4
    payload = data[start:]
    if len(data) < start or zlib.crc32(payload) != int.from_bytes(
        data[start - 4 : start], "little"
    ):
        raise DamagedStateError("its checksum does not match its contents")
    return payload


def frame_line(line: bytes) -> bytes:
    """``line`` (JSON ending with a newline) with its checksum in front."""
    return b"%08x %s" % (zlib.crc32(line), line)


@dataclass
class LogRead:
    """What reading one state log found: its records and what was lost."""

    records: list[Any] = field(default_factory=list)
    damaged: list[int] = field(default_factory=list)  # 1-based line (record) numbers
    damaged_trials: set[str] = field(default_factory=set)  # ids legible in damaged records
    torn_bytes: int = 0  # the size of a last record the crash cut
    unread_bytes: int = 0  # length-framed logs: bytes after a damaged record

    def loss(self, path: str) -> str | None:
        """A sentence saying what was lost in ``path``, or None when nothing was."""
        parts = []
        if self.damaged:
            shown = ", ".join(map(str, self.damaged[:10])) + (
                " ..." if len(self.damaged) > 10 else ""
            )
            parts.append(f"{len(self.damaged)} damaged record(s) skipped (record {shown})")
        if self.damaged_trials:
            parts.append(f"they held states of trial(s) {', '.join(sorted(self.damaged_trials))}")
        if self.unread_bytes:
            parts.append(
                f"record {len(self.records) + 1} is damaged: it and all after it "
                f"({self.unread_bytes} bytes) were not read"
            )
        if self.torn_bytes:
            parts.append(
                f"its last {self.torn_bytes} bytes are not a whole record (a write the crash "
                "cut) and were dropped"
            )
        if not parts:
            return None
        return f"{path}: {'; '.join(parts)}; {len(self.records)} intact record(s) read."


def read_lines(data: bytes) -> LogRead:
    """The JSON objects of a line-framed log (checksummed or plain lines)."""
    read = LogRead()
    chunk: list[tuple[int, bytes, bytes]] = []  # lines that passed their checksums
    for number, raw in enumerate(_lines(data, read), start=1):
        payload = _checked(raw)
        if payload is None:
            _damaged(read, number, raw)
        elif payload is raw:  # a plain line: checked by parsing it alone
            _decode_together(chunk, read)
            chunk = []
            _decode_one(number, raw, read)
        else:
            chunk.append((number, raw, payload))
            if len(chunk) == _DECODED_TOGETHER:
                _decode_together(chunk, read)
                chunk = []
    _decode_together(chunk, read)
    read.damaged.sort()  # a chunk's are found when it is decoded
    return read


# Lines that passed their checksums (each one JSON object, as written) are decoded many
# at a time, as one JSON array: the decoder shares key strings within one call, so the
# records of a 100,000-trial experiment held 300 MB instead of 550 MB (a set of keys
# per call, not per record), and the decoding is faster. ~1 KB of text per line.
_DECODED_TOGETHER = 4096


def _decode_together(chunk: list[tuple[int, bytes, bytes]], read: LogRead) -> None:
    """Add the records of checked lines to ``read``, in order."""
    if not chunk:
        return
    try:
        entries = json.loads(b"[%s]" % b",".join(payload for _, _, payload in chunk))
    except ValueError:  # a checksum that matched damage by chance: line by line
        entries = None
    if (
        entries is not None
        and len(entries) == len(chunk)  # no line held two values (``{...}, {...}``)
        and all(type(entry) is dict for entry in entries)
    ):
        read.records.extend(entries)
        return
    for number, raw, _ in chunk:
        _decode_one(number, raw, read)


def _decode_one(number: int, raw: bytes, read: LogRead) -> None:
    payload = _checked(raw)
    entry: Any = None
    if payload is not None:
        try:
            entry = json.loads(payload)
        except ValueError:
            entry = None
    if isinstance(entry, dict):
        read.records.append(entry)
    else:
        _damaged(read, number, raw)


def _damaged(read: LogRead, number: int, raw: bytes) -> None:
    read.damaged.append(number)
    legible = _TRIAL_ID.search(raw)
    if legible is not None:
        read.damaged_trials.add(legible.group(1).decode("ascii", "replace"))


def _lines(data: bytes, read: LogRead) -> Iterator[bytes]:
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        if end < 0:
            read.torn_bytes = len(data) - start  # the write never completed
            return
        yield data[start : end + 1]
        start = end + 1


def _checked(raw: bytes) -> bytes | None:
    """The JSON of one line if its checksum holds (plain JSON lines: as they are)."""
    if raw[:1] == b"{":
        return raw  # written before checksums
    if len(raw) < 10 or raw[8:9] != b" ":
        return None
    payload = raw[9:]
    # Compared as written (lowercase hex): a flipped letter case is damage too.
    return payload if b"%08x" % zlib.crc32(payload) == raw[:8] else None


_SEAL = re.compile(rb', "crc32": "([0-9a-f]{8})"\}\n\Z')


def seal_document(document: bytes) -> bytes:
    """``document`` (a JSON object and a newline) with its checksum as its last key."""
    if not document.endswith(b"}\n") or document.startswith(b"{}"):
        raise ValueError("seal_document takes a non-empty JSON object ending with a newline")
    return document[:-2] + b', "crc32": "%08x"}\n' % zlib.crc32(document)


def read_document(data: bytes, *, sealed_since: int) -> dict[str, Any]:
    """The JSON object of a (sealed) document.

    Args:
        data: The file's bytes.
        sealed_since: The format ``version`` from which documents carry a seal: one
            of that version or later without a (recognisable) seal is damaged.

    Raises:
        ValueError: It is damaged: a failed checksum, a missing seal, not JSON, not
            an object (UnicodeDecodeError and JSONDecodeError are ValueErrors).
    """
    match = _SEAL.search(data)
    body = data if match is None else data[: match.start()] + b"}\n"
    if match is not None and b"%08x" % zlib.crc32(body) != match.group(1):
        raise ValueError("its checksum does not match: a byte in it changed")
    document = json.loads(body)
    if not isinstance(document, dict):
        raise ValueError(f"a {type(document).__name__}, not an object")
    version = document.get("version")
    if match is None and isinstance(version, int) and version >= sealed_since:
        raise ValueError("its checksum is missing or damaged")
    return document


def frame_blob(blob: bytes) -> bytes:
    """One length-framed, checksummed record of the configs log."""
    return len(blob).to_bytes(8, "little") + zlib.crc32(blob).to_bytes(4, "little") + blob


def read_blobs(data: bytes) -> LogRead:
    """The payloads of a length-framed log (with or without checksums)."""
    read = LogRead()
    checked = data.startswith(CONFIGS_HEADER)
    if not checked and CONFIGS_HEADER.startswith(data) and data:
        read.torn_bytes = len(data)  # the header itself was cut
        return read
    offset = len(CONFIGS_HEADER) if checked else 0
    head = 12 if checked else 8
    while offset < len(data):
        if offset + head > len(data):
            read.torn_bytes = len(data) - offset
            break
        size = int.from_bytes(data[offset : offset + 8], "little")
        end = offset + head + size
        if end > len(data):
            # Cut by a crash, or a damaged length pointing past the end: either way
            # the rest is unreadable.
            read.torn_bytes = len(data) - offset
            break
        blob = data[offset + head : end]
        if checked and zlib.crc32(blob) != int.from_bytes(data[offset + 8 : offset + 12], "little"):
            read.unread_bytes = len(data) - offset
            break
        read.records.append(blob)
        offset = end
    return read
