"""SafeFallbackEncoder, JSON lines and configs, the fast flatten, and lazy imports."""

from __future__ import annotations

import datetime
import json
import math
import subprocess
import sys
from collections import OrderedDict
from decimal import Decimal
from types import MappingProxyType

import numpy as np
import pytest

from fasttune._support.encoding import encode_config, encode_result_line, to_builtin
from fasttune._support.flatten import flatten_result
from fasttune.logger import SafeFallbackEncoder
from fasttune.utils.util import flatten_dict


def dumps(obj: object) -> str:
    return json.dumps(obj, cls=SafeFallbackEncoder)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (np.int64(3), 3),
        (np.int32(-2), -2),
        (np.float32(1.5), 1.5),
        (np.float64(2.25), 2.25),
        (np.bool_(True), True),
        (np.arange(3), [0, 1, 2]),
        (np.array([[1.5], [2.5]]), [[1.5], [2.5]]),
        (Decimal("1.5"), 1.5),
        ({1, 2}.__class__, "<class 'set'>"),
        (1 + 2j, "(1+2j)"),
        (datetime.date(2024, 1, 2), "2024-01-02"),
    ],
)
def test_encoder_converts_values(value: object, expected: object) -> None:
    assert json.loads(dumps({"v": value})) == {"v": expected}


def test_encoder_numpy_nan_becomes_nan_str_and_builtin_nan_stays_nan() -> None:
    assert dumps([np.float32("nan")]) == '["null"]'
    assert json.dumps([np.float32("nan")], cls=SafeFallbackEncoder, nan_str="NaN?") == '["NaN?"]'
    assert dumps([float("nan"), float("inf"), np.float64("-inf")]) == "[NaN, Infinity, -Infinity]"
    assert dumps([np.float32("inf")]) == "[Infinity]"


def test_encoder_stringifies_unknown_objects() -> None:
    class Thing:
        def __str__(self) -> str:
            return "a thing"

    assert json.loads(dumps({"t": Thing(), "s": {3}})) == {"t": "a thing", "s": "{3}"}


def test_result_line_is_one_ascii_line() -> None:
    line = encode_result_line({"name": "é\nx", "arr": np.ones(2), "n": {"i": np.int8(1)}})
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {"name": "é\nx", "arr": [1.0, 1.0], "n": {"i": 1}}


def test_result_line_with_keys_json_cannot_hold() -> None:
    line = encode_result_line({"ok": 1, "odd": {(1, 2): "tuple key"}})
    assert json.loads(line) == {"ok": 1, "odd": {"(1, 2)": "tuple key"}}


def test_config_is_sorted_and_indented() -> None:
    text = encode_config({"b": 1, "a": {"y": np.float64(0.5), "x": [1]}})
    assert text == json.dumps({"a": {"x": [1], "y": 0.5}, "b": 1}, indent=2)


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"x": 0.5},
        {"lr": 1e-300, "n": 10**30, "on": True, "off": False, "none": None, "s": ""},
        {"nan": math.nan, "inf": math.inf, "-inf": -math.inf},
        {"ü": 'é\n\t"\\', "": "\x00\x1f", "a b": "\U0001d11e", "Z": 1, "_": 2},
        {"flag": np.True_, "f": np.float64(0.1)},  # numpy values: the general path
        {"nested": {"b": 1, "a": [1, 2]}, "x": 1},
    ],
)
def test_a_config_is_written_as_json_dumps_indents_and_sorts_it(config) -> None:
    # Flat configs of plain values take a faster encoder: the same text.
    expected = json.dumps(config, indent=2, sort_keys=True, cls=SafeFallbackEncoder)
    assert encode_config(config) == expected


def test_config_with_mixed_key_types_is_still_written() -> None:
    assert json.loads(encode_config({"a": 1, 2: "b", (3,): "c"})) == {
        "a": 1,
        "2": "b",
        "(3,)": "c",
    }


def test_to_builtin_gives_plain_values() -> None:
    out = to_builtin({"a": np.float32(0.5), "b": [np.int64(1)], "c": math.nan})
    assert out["a"] == 0.5 and out["b"] == [1] and math.isnan(out["c"])
    assert type(out["a"]) is float and type(out["b"][0]) is int


@pytest.mark.parametrize(
    "result",
    [
        {},
        {"a": 1, "b": {"c": 2, "d": {"e": 3}}, "f": [1, {"g": 2}]},
        {"empty": {}, "none": None, 1: "int key", "m": OrderedDict(x=1)},
        {"proxy": MappingProxyType({"p": 1, "q": {}}), "s": "x"},
    ],
)
def test_flatten_result_matches_flatten_dict(result: dict) -> None:
    expected = flatten_dict(result, delimiter="/")
    assert list(flatten_result(result).items()) == list(expected.items())


def test_flatten_orders_and_drops_as_ray_does() -> None:
    # Ray's flatten_dict: plain values keep their places, nested ones follow a level
    # at a time; an empty dict leaves no key (no "empty" column in progress.csv).
    result = {"a": 1, "b": {"d": {"e": 3}, "c": 2}, "empty": {}, "f": 4, "g": {"h": {}}}
    expected = [("a", 1), ("f", 4), ("b/c", 2), ("b/d/e", 3)]
    assert list(flatten_dict(result).items()) == expected
    assert list(flatten_result(result).items()) == expected


def test_flatten_result_excludes_top_level_keys() -> None:
    result = {"config": {"lr": 1}, "a": {"config": 2}}
    assert flatten_result(result, frozenset({"config"})) == {"a/config": 2}


def test_import_does_not_load_heavy_modules() -> None:
    code = (
        "import sys, fasttune.logger\n"
        "heavy = [m for m in ('numpy', 'tensorboardX', 'pandas', 'yaml') if m in sys.modules]\n"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
