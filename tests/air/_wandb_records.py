"""Read the records of a W&B run file (``run-<id>.wandb``) that an offline run writes.

The file is wandb's header (7 bytes) then LevelDB-log-style blocks of 32 KiB holding
``wandb_internal_pb2.Record`` messages, each split in chunks with a 7-byte header
(crc32c, length, type: 1 full, 2 first, 3 middle, 4 last).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

_BLOCK = 32768


def read_records(path: str) -> Iterator[Any]:
    from wandb.proto import wandb_internal_pb2

    with open(path, "rb") as f:
        data = f.read()
    assert data[1:4] == b"W&B", data[:7]
    pos, pending = 7, b""
    while pos + 7 <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if length == 0 and kind == 0:  # block padding
            pos += left
            continue
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 2):
            pending = chunk
        else:
            pending += chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            yield record


def summarize(path: str) -> dict[str, Any]:
    """The run's identity, config, logged history rows and exit code."""
    out: dict[str, Any] = {"history": [], "exit_code": None, "kinds": []}
    for record in read_records(path):
        kind = record.WhichOneof("record_type")
        out["kinds"].append(kind)
        if kind == "run":
            run = record.run
            out.update(
                run_id=run.run_id,
                name=run.display_name,
                project=run.project,
                group=run.run_group,
                config={i.key: i.value_json for i in run.config.update},
            )
        elif kind == "history":
            out["history"].append(
                {(i.key or "/".join(i.nested_key)): i.value_json for i in record.history.item}
            )
        elif kind == "exit":
            out["exit_code"] = record.exit.exit_code
    return out
