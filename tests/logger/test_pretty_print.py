"""pretty_print: a readable YAML-like rendering of results."""

from __future__ import annotations

import numpy as np

from fasttune.logger import pretty_print


def test_renders_sorted_nested_and_skips_config_and_none() -> None:
    result = {
        "training_iteration": 3,
        "loss": np.float32(0.25),
        "config": {"lr": 0.1},
        "hist_stats": {"x": [1]},
        "skipped": None,
        "info": {"learner": {"lr": 0.001, "steps": np.int64(10)}, "empty": {}},
        "done": False,
    }
    assert pretty_print(result) == (
        "done: false\n"
        "info:\n"
        "  empty: {}\n"
        "  learner:\n"
        "    lr: 0.001\n"
        "    steps: 10\n"
        "loss: 0.25\n"
        "training_iteration: 3\n"
    )


def test_lists_short_as_blocks_long_on_one_line() -> None:
    result = {
        "short": [1, 2],
        "long": np.arange(5),
        "empty": [],
        "dicts": [{"b": 1, "a": {"c": 2}}],
        "nested": [[1, 2], [3]],
    }
    assert pretty_print(result) == (
        "dicts:\n"
        "- a:\n"
        "    c: 2\n"
        "  b: 1\n"
        "empty: []\n"
        "long: [0, 1, 2, 3, 4]\n"
        "nested:\n"
        "- - 1\n"
        "  - 2\n"
        "- - 3\n"
        "short:\n"
        "- 1\n"
        "- 2\n"
    )


def test_special_values_and_strings() -> None:
    result = {
        "nan": float("nan"),
        "inf": float("-inf"),
        "date": "2024-01-01_00-00-00",
        "looks_numeric": "1.0",
        "looks_bool": "true",
        "blank": "",
        "colon": "a: b",
        "quote": "it's",
        "lines": "a\nb",
        "spaced": "x y",
        "obj": object,
    }
    assert pretty_print(result) == (
        "blank: ''\n"
        "colon: 'a: b'\n"
        "date: 2024-01-01_00-00-00\n"
        "inf: -.inf\n"
        'lines: "a\\nb"\n'
        "looks_bool: 'true'\n"
        "looks_numeric: '1.0'\n"
        "nan: .nan\n"
        "obj: '<class ''object''>'\n"
        "quote: 'it''s'\n"
        "spaced: x y\n"
    )


def test_exclude_and_empty_result() -> None:
    assert pretty_print({"a": 1, "b": 2}, exclude={"b"}) == "a: 1\n"
    assert pretty_print({"config": {}}) == "{}\n"
