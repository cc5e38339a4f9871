"""The hand-written TensorBoard encoder against the real protobuf classes and tensorboardX.

Every message is decoded with tensorboardX's generated ``_pb2`` classes and compared
with what tensorboardX builds for the same inputs: byte for byte where protobuf's
output is deterministic, field by field for the hparams map (whose order protobuf
does not fix).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from fasttune.logger import _tb_proto
from fasttune.logger.tensorboardx import _histogram_value

pytest.importorskip("tensorboardX")
from tensorboardX import summary as tbx_summary
from tensorboardX.proto.event_pb2 import Event
from tensorboardX.proto.plugin_hparams_pb2 import HParamsPluginData
from tensorboardX.proto.summary_pb2 import Summary

ODD_FLOATS = [
    0.0,
    -0.0,
    1.0,
    -2.5,
    1e-50,  # below float32: rounds to 0
    3.4028235e38,  # float32 max
    3.4028236e38,  # rounds past float32 max: inf
    1e300,
    -1e300,
    math.inf,
    -math.inf,
    float(2**64),
    0.1,
]


@pytest.mark.parametrize("wall_time", [0.0, -0.0, 1.5, 1_700_000_000.123456])
def test_file_version_event_is_byte_equal(wall_time: float) -> None:
    ours = _tb_proto.event(wall_time, file_version=_tb_proto.FILE_VERSION)
    theirs = Event(wall_time=wall_time, file_version="brain.Event:2").SerializeToString()
    assert ours == theirs


@pytest.mark.parametrize("value", ODD_FLOATS)
@pytest.mark.parametrize("tag", ["ray/tune/loss", "ray/tune/ünï/こんにちは", "t" * 200, ""])
def test_scalar_summary_is_byte_equal(tag: str, value: float) -> None:
    ours = _tb_proto.scalar_entry_prefix(tag) + _tb_proto.float32(value)
    theirs = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
    assert ours == theirs.SerializeToString()
    decoded = Summary.FromString(ours).value[0]
    assert decoded.tag == tag and decoded.WhichOneof("value") == "simple_value"


@pytest.mark.parametrize(
    "step", [0, 1, 127, 128, 300, -1, -5, 2**31, 2**63 - 1, -(2**63), np.int64(7)]
)
def test_event_with_summary_is_byte_equal(step: int) -> None:
    entries = [
        _tb_proto.scalar_entry_prefix(f"ray/tune/m{i}") + _tb_proto.float32(i) for i in range(3)
    ]
    ours = _tb_proto.event(12.5, int(step), summary=b"".join(entries))
    values = [Summary.Value(tag=f"ray/tune/m{i}", simple_value=i) for i in range(3)]
    theirs = Event(wall_time=12.5, step=int(step), summary=Summary(value=values))
    assert ours == theirs.SerializeToString()
    assert Event.FromString(ours).step == step


@pytest.mark.parametrize("step", [2**63, -(2**63) - 1])
def test_steps_beyond_int64_are_refused_like_protobuf(step: int) -> None:
    with pytest.raises(ValueError, match="out of range"):
        Event(step=step)
    with pytest.raises(ValueError, match="out of range"):
        _tb_proto.event(1.0, step)


def test_empty_summary_event_is_byte_equal() -> None:
    assert _tb_proto.event(3.0, 4, summary=b"") == (
        Event(wall_time=3.0, step=4, summary=Summary()).SerializeToString()
    )


HISTOGRAM_INPUTS = [
    [0.1, 0.2, 0.3],
    [5],
    [2.0, 2.0, 2.0],  # one value: numpy widens the range
    [True, False, True],
    np.arange(6.0).reshape(2, 3),
    np.array([1, 1000, 10**6], dtype=np.int64),
    np.random.default_rng(0).normal(size=10_000).astype(np.float32),
    np.random.default_rng(1).exponential(size=(50, 40)),
    np.array([-0.0, 0.0]),
    np.array(3.5),  # 0-d
]


@pytest.mark.parametrize("values", HISTOGRAM_INPUTS, ids=range(len(HISTOGRAM_INPUTS)))
@pytest.mark.parametrize("tag", ["ray/tune/w", "ray/tune/a b+c", "ray/tune/ünï"])
def test_histogram_value_is_byte_equal(values: Any, tag: str) -> None:
    ours = _histogram_value(np, tag, np.asarray(values))
    theirs = tbx_summary.histogram(tag, np.asarray(values), bins="auto").value[0]
    assert ours == theirs.SerializeToString()
    decoded = Summary.Value.FromString(ours)
    assert decoded.histo.num == np.asarray(values).size


@pytest.mark.parametrize("bad", [[1.0, math.nan], [math.inf, 1.0]])
def test_histogram_of_non_finite_values_raises_like_tensorboardx(bad: list[float]) -> None:
    with pytest.raises(ValueError):
        tbx_summary.histogram("t", np.asarray(bad), bins="auto")
    with pytest.raises(ValueError):
        _histogram_value(np, "t", np.asarray(bad))


def _plugin_data(summary: bytes) -> tuple[str, str, Any]:
    value = Summary.FromString(summary).value[0]
    plugin = value.metadata.plugin_data
    return value.tag, plugin.plugin_name, HParamsPluginData.FromString(plugin.content)


HPARAMS = [
    {"lr": 0.01},
    {"name": "adam"},
    {"flag": False},
    {"n": 0},
    {"": True},
    {
        "lr": 0.01,
        "opt/name": "adam",
        "opt/nesterov": True,
        "layers": 3,
        "big": 2**62 + 1,
        "neg": -1e-300,
        "ünï/こ": "ü",
        "empty": "",
        "inf": math.inf,
        "zero": -0.0,
    },
]


@pytest.mark.parametrize("hparams", HPARAMS, ids=range(len(HPARAMS)))
@pytest.mark.parametrize("metrics", [{"ray/tune/loss": 1.0}, {"a": 1, "ü": 2, "": 3}])
def test_hparams_match_tensorboardx(hparams: dict[str, Any], metrics: dict[str, float]) -> None:
    ours = _tb_proto.hparams_summaries(hparams, metrics)
    theirs = [s.SerializeToString() for s in tbx_summary.hparams(hparams, metrics)]
    assert ours[0] == theirs[0]  # experiment: repeated fields, fixed order
    assert ours[2] == theirs[2]  # session end
    if len(hparams) == 1:
        assert ours[1] == theirs[1]
    # The session start holds a map, which protobuf writes in no fixed order.
    assert [_plugin_data(s) for s in ours] == [_plugin_data(s) for s in theirs]
    tag, plugin, start = _plugin_data(ours[1])
    assert (tag, plugin) == ("_hparams_/session_start_info", "hparams")
    assert set(start.session_start_info.hparams) == set(hparams)


def test_hparams_decode_to_the_expected_fields() -> None:
    experiment, start, end = (
        _plugin_data(s)[2] for s in _tb_proto.hparams_summaries({"a": "x", "b": 2}, ["m"])
    )
    assert [(h.name, h.type) for h in experiment.experiment.hparam_infos] == [("a", 1), ("b", 3)]
    assert [m.name.tag for m in experiment.experiment.metric_infos] == ["m"]
    assert start.session_start_info.hparams["a"].string_value == "x"
    assert start.session_start_info.hparams["b"].number_value == 2.0
    assert end.session_end_info.status == 1  # STATUS_SUCCESS


@pytest.mark.parametrize("n", [0, 1, 127, 128, 16_383, 16_384, 2**35, 2**64 - 1])
def test_varint_round_trips(n: int) -> None:
    data = _tb_proto.varint(n)
    assert all(b & 0x80 for b in data[:-1]) and not data[-1] & 0x80
    assert sum((b & 0x7F) << (7 * i) for i, b in enumerate(data)) == n
