"""Event files written by TBXResultWriter, decoded with the real protobuf classes.

Each event is compared with the one tensorboardX would build for the same input:
the ``Summary`` byte for byte, the step exactly (wall times differ).
"""

from __future__ import annotations

import glob
import math
import os
import struct
import sys
from typing import Any

import numpy as np
import pytest

from fasttune.logger._tfevents import EventFileWriter, _crc32c_function, crc32c_python
from fasttune.logger.tensorboardx import TBXResultWriter

pytest.importorskip("tensorboardX")
google_crc32c = pytest.importorskip("google_crc32c")
from tensorboardX import summary as tbx_summary  # noqa: E402
from tensorboardX.proto.event_pb2 import Event  # noqa: E402
from tensorboardX.proto.plugin_hparams_pb2 import HParamsPluginData  # noqa: E402
from tensorboardX.proto.summary_pb2 import Summary  # noqa: E402


def _masked(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_checked_events(logdir: str) -> list[Any]:
    """Every event in ``logdir``, checking each record's two masked CRC-32C."""
    (path,) = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    events = []
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        header = data[pos : pos + 8]
        (length,) = struct.unpack("<Q", header)
        (header_crc,) = struct.unpack("<I", data[pos + 8 : pos + 12])
        payload = data[pos + 12 : pos + 12 + length]
        (payload_crc,) = struct.unpack("<I", data[pos + 12 + length : pos + 16 + length])
        assert header_crc == _masked(google_crc32c.value(header))
        assert payload_crc == _masked(google_crc32c.value(payload))
        events.append(Event.FromString(payload))
        pos += 16 + length
    return events


def tbx_scalars(values: dict[str, float]) -> bytes:
    """The ``Summary`` tensorboardX's classes build for these scalars."""
    entries = [Summary.Value(tag=tag, simple_value=v) for tag, v in values.items()]
    return Summary(value=entries).SerializeToString()


def test_crc32c_fallback_matches_google_crc32c() -> None:
    assert crc32c_python(b"123456789") == 0xE3069283  # the standard check value
    rng = np.random.default_rng(0)
    for size in (0, 1, 7, 100, 4096):
        data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        assert crc32c_python(data) == google_crc32c.value(data)


@pytest.mark.parametrize("with_google_crc32c", [True, False])
def test_event_file_records_are_framed_and_checksummed(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, with_google_crc32c: bool
) -> None:
    if not with_google_crc32c:
        monkeypatch.setitem(sys.modules, "google_crc32c", None)
        assert _crc32c_function() is crc32c_python
    writer = EventFileWriter(str(tmp_path))
    writer.write_summary(b"", step=3)
    writer.close()
    first, second = read_checked_events(str(tmp_path))
    assert first.file_version == "brain.Event:2" and first.wall_time > 0
    assert second.HasField("summary") and second.step == 3


def test_odd_scalars_match_tensorboardx(tmp_path: Any) -> None:
    writer = TBXResultWriter(str(tmp_path))
    result = {
        "training_iteration": 1,
        "f": 0.1,
        "f32": np.float32(0.3),
        "f16": np.float16(1.5),
        "i64": np.int64(-7),
        "u8": np.uint8(200),
        "big": 2**64,
        "huge": 10**400,  # beyond a double: +inf
        "neg_huge": -(10**400),
        "inf": math.inf,
        "ninf": -math.inf,
        "over": 1e300,  # beyond a float32: inf, as protobuf
        "zero": -0.0,
        "ünïcödé/キー": 1.0,
        "with space": 2.0,  # scalar tags are not cleaned (as before)
        "nan": math.nan,  # skipped
        "np_nan": np.float64("nan"),  # skipped
        "flag": True,  # 1.0, as Ray logs a bool (an int to isinstance)
        "np_flag": np.bool_(True),  # skipped, as by Ray
        "text": "x",  # skipped
        "none": None,  # skipped
    }
    writer.write_result(result)
    writer.close()
    _, event = read_checked_events(str(tmp_path))
    expected = {
        "f": 0.1,
        "f32": float(np.float32(0.3)),
        "f16": 1.5,
        "i64": -7.0,
        "u8": 200.0,
        "big": float(2**64),
        "huge": math.inf,
        "neg_huge": -math.inf,
        "inf": math.inf,
        "ninf": -math.inf,
        "over": 1e300,
        "zero": -0.0,
        "ünïcödé/キー": 1.0,
        "with space": 2.0,
        "flag": 1.0,
    }
    assert event.step == 1
    assert event.summary.SerializeToString() == tbx_scalars(
        {"ray/tune/" + k: v for k, v in expected.items()}
    )


@pytest.mark.parametrize(
    ("result", "step"),
    [
        ({"training_iteration": 3}, 3),
        ({"training_iteration": 3, "timesteps_total": 10**12}, 10**12),
        ({"training_iteration": 3, "timesteps_total": np.int64(-4)}, -4),
        ({"training_iteration": 3, "timesteps_total": 7.9}, 7),
        ({"training_iteration": 0}, 1),  # falsy: the count of results
    ],
)
def test_steps(tmp_path: Any, result: dict[str, Any], step: int) -> None:
    writer = TBXResultWriter(str(tmp_path))
    writer.write_result({**result, "m": 1.0})
    writer.close()
    assert read_checked_events(str(tmp_path))[1].step == step


@pytest.mark.parametrize("step", [0, 1, 127, 128, 300, 2**40, -3])
@pytest.mark.parametrize("scalars", [1, 5, 40])  # summaries of ~25 to ~1,000 bytes
def test_events_framed_inline_decode_at_any_step_and_size(
    tmp_path: Any, step: int, scalars: int
) -> None:
    """write_summary frames most events itself (not through _tb_proto.event): the
    step and the summary must decode the same whatever their sizes."""
    summary = tbx_scalars({f"ray/tune/metric_{i}": float(i) for i in range(scalars)})
    writer = EventFileWriter(str(tmp_path))
    writer.write_summary(summary, step)
    writer.close()
    event = read_checked_events(str(tmp_path))[1]
    assert event.step == step
    assert event.summary.SerializeToString() == summary
    assert event.wall_time > 0


def test_histograms_match_tensorboardx(tmp_path: Any) -> None:
    rng = np.random.default_rng(3)
    arrays = {
        "w": [0.5, 0.25, 2.0],
        "ints": np.arange(100),
        "normal": rng.normal(size=(30, 30)).astype(np.float32),
        "a b": [1.0, 2.0],  # tensorboardX cleans histogram tags: "ray/tune/a_b"
    }
    writer = TBXResultWriter(str(tmp_path))
    # a tuple is left out, as Ray leaves it out (only lists and arrays are histograms)
    writer.write_result({"training_iteration": 2, **arrays, "pair": (1.0, 2.0)})
    writer.close()
    events = read_checked_events(str(tmp_path))[1:]
    assert [e.step for e in events] == [2] * len(arrays)
    for event, (key, value) in zip(events, arrays.items()):
        expected = tbx_summary.histogram("ray/tune/" + key, np.asarray(value), bins="auto")
        assert event.summary.SerializeToString() == expected.SerializeToString()


def hparams_fields(summary: Any) -> tuple[str, str, Any]:
    """Tag, plugin name and decoded plugin content of an hparams ``Summary``."""
    (value,) = summary.value
    plugin = value.metadata.plugin_data
    return value.tag, plugin.plugin_name, HParamsPluginData.FromString(plugin.content)


def test_hparams_match_tensorboardx(tmp_path: Any) -> None:
    params = {"lr": np.float32(0.5), "opt": {"name": "sgd", "nesterov": False}, "n": 3}
    writer = TBXResultWriter(str(tmp_path))
    writer.write_result({"training_iteration": 1, "loss": 0.25, "acc": np.float64(0.75)})
    assert writer.write_hparams(params)
    writer.close()
    events = read_checked_events(str(tmp_path))[2:]
    # in the order Ray's flatten_dict gives: plain values first, then the nested ones
    flat = {"lr": 0.5, "n": 3, "opt/name": "sgd", "opt/nesterov": False}
    expected = tbx_summary.hparams(flat, {"ray/tune/loss": 0.25, "ray/tune/acc": 0.75})
    # Field by field: the session start holds a map, written in no fixed order.
    assert [hparams_fields(e.summary) for e in events] == [hparams_fields(s) for s in expected]
    assert all(e.step == 0 for e in events)


def test_hparams_leave_out_ints_beyond_a_double(tmp_path: Any) -> None:
    writer = TBXResultWriter(str(tmp_path))
    assert writer.write_hparams({"huge": 10**400, "ok": 1}, metrics={"m": 1.0})
    writer.close()
    expected = tbx_summary.hparams({"ok": 1}, {"m": 1.0})
    events = read_checked_events(str(tmp_path))[1:]
    assert [hparams_fields(e.summary) for e in events] == [hparams_fields(s) for s in expected]


def test_a_writer_dropped_without_close_keeps_what_it_buffered(tmp_path: Any) -> None:
    writer = EventFileWriter(str(tmp_path))
    writer.write_summary(b"", step=7)
    del writer  # never closed: its buffered records are written when it goes
    first, second = read_checked_events(str(tmp_path))
    assert first.file_version == "brain.Event:2" and second.step == 7
