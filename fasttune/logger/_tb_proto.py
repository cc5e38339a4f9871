"""Protobuf wire encoding of the few TensorBoard messages fasttune writes.

Hand-written on purpose: building these messages with generated protobuf classes
means importing protobuf and tensorboardX, and ``import tensorboardX`` imports
torch whenever torch is installed (seconds and hundreds of MB in the driver). The
schemas are frozen and small, and encoding them by hand is also faster than
filling protobuf objects. Field numbers are those of tensorboardX's
``event.proto``, ``summary.proto``, ``plugin_hparams.proto`` and ``api.proto``
(copies of TensorFlow's and TensorBoard's); the tests decode these bytes with the
real protobuf classes and compare them with tensorboardX's own.

Wire format: a field is a key ``(number << 3) | wire_type`` as a varint, then a
varint (type 0), 8 little-endian bytes (type 1), a varint length and that many
bytes (type 2) or 4 little-endian bytes (type 5). proto3 leaves out a field equal
to its default unless it is in a ``oneof``, a sub-message, or a map entry.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Iterable, Mapping, Sequence

_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5
_pack_double = struct.Struct("<d").pack
_pack_float = struct.Struct("<f").pack
_ZERO_DOUBLE = bytes(8)
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

FILE_VERSION = "brain.Event:2"
"""The ``file_version`` of the first event of every event file."""

_HPARAMS_PLUGIN = "hparams"
_DATA_TYPE_STRING, _DATA_TYPE_BOOL, _DATA_TYPE_FLOAT64 = 1, 2, 3  # api.proto DataType
_STATUS_SUCCESS = 1  # api.proto Status
_SMALL_VARINTS = [bytes((n,)) for n in range(0x80)]


def varint(n: int) -> bytes:
    """``n`` (>= 0) as a base-128 varint, low groups first."""
    if n < 0x80:
        return _SMALL_VARINTS[n]
    if n < 0x4000:  # steps and lengths of every result: two bytes, no loop
        return bytes((n & 0x7F | 0x80, n >> 7))
    if n < 0x200000:
        return bytes((n & 0x7F | 0x80, (n >> 7) & 0x7F | 0x80, n >> 14))
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def int64(n: int) -> bytes:
    """``n`` as an int64 varint (negative numbers in 10 bytes, two's complement).

    Raises:
        ValueError: ``n`` does not fit in 64 bits (as protobuf itself).
    """
    if not _INT64_MIN <= n <= _INT64_MAX:
        raise ValueError(f"Value out of range: {n}")
    return varint(n & 0xFFFFFFFFFFFFFFFF)


def float32(x: float) -> bytes:
    """``x`` rounded to a little-endian float32; out of range becomes +-inf (as protobuf)."""
    try:
        return _pack_float(x)
    except OverflowError:
        return _pack_float(float("inf") if x > 0 else float("-inf"))


def _key(number: int, wire_type: int) -> bytes:
    return varint(number << 3 | wire_type)


def _bytes(number: int, data: bytes) -> bytes:
    """A length-delimited field (string, bytes, sub-message, packed values), always written."""
    return _key(number, _LEN) + varint(len(data)) + data


def _string(number: int, text: str) -> bytes:
    """A proto3 string field: left out when empty."""
    return _bytes(number, text.encode()) if text else b""


def _double(number: int, x: float) -> bytes:
    """A proto3 double field: left out when +0.0 (protobuf compares the bits)."""
    data = _pack_double(x)
    return b"" if data == _ZERO_DOUBLE else _key(number, _FIXED64) + data


def _enum(number: int, n: int) -> bytes:
    return _key(number, _VARINT) + varint(n) if n else b""


def _packed_doubles(number: int, values: Sequence[float]) -> bytes:
    return _bytes(number, struct.pack(f"<{len(values)}d", *values)) if len(values) else b""


# ------------------------------------------------------------------ event.proto
_STEP_KEY = _key(2, _VARINT)
_SUMMARY_KEY = _key(5, _LEN)


def event(
    wall_time: float,
    step: int = 0,
    *,
    summary: bytes | None = None,
    file_version: str | None = None,
) -> bytes:
    """An ``Event``: wall_time=1 (double), step=2 (int64), and one of
    file_version=3 (string) or summary=5 (``Summary`` message, as from :func:`summary`).
    """
    out = _double(1, wall_time)
    if step:
        out += _STEP_KEY + int64(step)
    if file_version is not None:
        out += _bytes(3, file_version.encode())
    if summary is not None:
        out += _SUMMARY_KEY + varint(len(summary)) + summary
    return out


# ---------------------------------------------------------------- summary.proto
def summary(values: Iterable[bytes]) -> bytes:
    """A ``Summary`` of ``Value`` messages (repeated field 1)."""
    return b"".join(_bytes(1, value) for value in values)


def scalar_entry_prefix(tag: str) -> bytes:
    """The start of a scalar's entry in a ``Summary``; ``+ float32(x)`` completes it.

    The entry is field 1 of ``Summary`` holding ``Value{tag=1, simple_value=2 (float)}``,
    so a ``Summary`` of scalars is the entries joined. Its length does not depend on
    ``x``: callers cache the prefix per tag, and one scalar costs one ``float32`` call.
    """
    tag_field = _string(1, tag)
    return _key(1, _LEN) + varint(len(tag_field) + 5) + tag_field + _key(2, _FIXED32)


def histogram_value(
    tag: str,
    *,
    min: float,
    max: float,
    num: float,
    sum: float,
    sum_squares: float,
    bucket_limit: Sequence[float],
    bucket: Sequence[float],
) -> bytes:
    """A ``Value{tag=1, histo=5}`` with a ``HistogramProto`` (doubles 1-5, packed 6-7)."""
    histo = (
        _double(1, min)
        + _double(2, max)
        + _double(3, num)
        + _double(4, sum)
        + _double(5, sum_squares)
        + _packed_doubles(6, bucket_limit)
        + _packed_doubles(7, bucket)
    )
    return _string(1, tag) + _bytes(5, histo)


# ------------------------------------------------ plugin_hparams.proto, api.proto
def _plugin_value(tag: str, content: bytes) -> bytes:
    """A ``Value{tag=1, metadata=9}``, metadata ``{plugin_data=1: {plugin_name=1, content=2}}``."""
    plugin_data = _string(1, _HPARAMS_PLUGIN) + (_bytes(2, content) if content else b"")
    return _string(1, tag) + _bytes(9, _bytes(1, plugin_data))


def _struct_value(value: str | bool | float) -> tuple[bytes, int]:
    """A ``google.protobuf.Value`` (number=2 double, string=3, bool=4) and its DataType."""
    if isinstance(value, str):
        return _bytes(3, value.encode()), _DATA_TYPE_STRING
    if isinstance(value, bool):
        return _key(4, _VARINT) + varint(int(value)), _DATA_TYPE_BOOL
    return _key(2, _FIXED64) + _pack_double(float(value)), _DATA_TYPE_FLOAT64


def hparams_summaries(
    hparams: Mapping[str, str | bool | float], metric_tags: Iterable[str]
) -> tuple[bytes, bytes, bytes]:
    """The three ``Summary`` messages TensorBoard's HParams plugin reads for one run.

    Each holds one ``Value`` tagged ``_hparams_/...`` whose plugin content is an
    ``HParamsPluginData`` (version=1 is 0, left out) with, in its oneof:
    experiment=2 (``Experiment``: hparam_infos=4 ``{name=1, type=4}``, metric_infos=5
    ``{name=1: MetricName{tag=2}}``), session_start_info=3 (``SessionStartInfo``:
    hparams=1, a map of name to ``google.protobuf.Value``) and session_end_info=4
    (``SessionEndInfo``: status=1 STATUS_SUCCESS).

    Args:
        hparams: Values by name: str, bool, int or float (ints become doubles).
        metric_tags: Tags of the scalar metrics to show beside the hparams.

    Returns:
        The experiment, session start and session end summaries, in writing order.
    """
    types = []
    entries = []
    for name, value in hparams.items():
        encoded, data_type = _struct_value(value)
        types.append((name, data_type))
        # A map entry is a message {key=1, value=2} with both always written.
        entries.append(_bytes(1, _bytes(1, name.encode()) + _bytes(2, encoded)))
    start = _bytes(3, b"".join(entries))
    return (
        _experiment_summary(tuple(types), tuple(metric_tags)),
        summary([_plugin_value("_hparams_/session_start_info", start)]),
        _SESSION_END_SUMMARY,
    )


@functools.lru_cache(maxsize=256)
def _experiment_summary(types: tuple[tuple[str, int], ...], metric_tags: tuple[str, ...]) -> bytes:
    """The experiment summary of :func:`hparams_summaries`: the same for every trial of
    an experiment (hparam names and types, metric tags), so encoded once."""
    infos = [_bytes(4, _string(1, name) + _enum(4, data_type)) for name, data_type in types]
    metrics = [_bytes(5, _bytes(1, _string(2, tag))) for tag in metric_tags]
    experiment = _bytes(2, b"".join(infos + metrics))
    return summary([_plugin_value("_hparams_/experiment", experiment)])


_SESSION_END_SUMMARY = summary(
    [_plugin_value("_hparams_/session_end_info", _bytes(4, _enum(1, _STATUS_SUCCESS)))]
)
