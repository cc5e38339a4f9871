"""Fixtures for the logger tests: sample results and a TensorBoard event reader."""

from __future__ import annotations

import glob
import os
import struct
from collections.abc import Callable
from typing import Any

import pytest


def _read_records(path: str) -> list[bytes]:
    """Payloads of a TFRecord file: (u64 length, u32 crc, data, u32 crc) per record."""
    records = []
    with open(path, "rb") as f:
        while header := f.read(12):
            (length,) = struct.unpack("<Q", header[:8])
            records.append(f.read(length))
            f.read(4)
    return records


@pytest.fixture
def read_events() -> Callable[[str], list[Any]]:
    """Return a function that reads every event of the event files in a directory."""
    event_pb2 = pytest.importorskip("tensorboardX.proto.event_pb2")

    def read(logdir: str) -> list[Any]:
        events = []
        for path in sorted(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))):
            events.extend(event_pb2.Event.FromString(r) for r in _read_records(path))
        return events

    return read


@pytest.fixture
def make_result() -> Callable[..., dict[str, Any]]:
    """Build a result like the ones a trial reports, with overrides."""

    def make(iteration: int = 1, **extra: Any) -> dict[str, Any]:
        result: dict[str, Any] = {
            "training_iteration": iteration,
            "loss": 1.0 / iteration,
            "done": False,
            "time_total_s": 0.5 * iteration,
            "config": {"lr": 0.01},
        }
        result.update(extra)
        return result

    return make
