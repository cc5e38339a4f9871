"""CSVLogger: progress.csv header, growth, resume and crash safety."""

from __future__ import annotations

import csv
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from fasttune.logger import CSVLogger
from fasttune.logger.csv import CSVResultWriter
from fasttune.result import EXPR_PROGRESS_FILE


def read_csv(logdir: Any) -> tuple[list[str], list[dict[str, str]]]:
    with open(os.path.join(logdir, EXPR_PROGRESS_FILE), newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        return list(reader.fieldnames or []), rows


def test_header_from_first_result_without_config(
    tmp_path: Any, make_result: Callable[..., dict]
) -> None:
    log = CSVLogger({}, str(tmp_path))
    assert not (tmp_path / EXPR_PROGRESS_FILE).exists()  # opened at the first result
    log.on_result(make_result(1, metrics={"acc": 0.5, "deep": {"x": 1}}))
    log.on_result(make_result(2, metrics={"acc": 0.75, "deep": {"x": 2}}))
    log.close()
    header, rows = read_csv(tmp_path)
    assert header == [
        "training_iteration",
        "loss",
        "done",
        "time_total_s",
        "metrics/acc",
        "metrics/deep/x",
    ]
    assert [r["metrics/deep/x"] for r in rows] == ["1", "2"]
    assert rows[1]["loss"] == "0.5" and rows[1]["done"] == "False"


def test_new_keys_grow_the_header_and_keep_old_rows_aligned(tmp_path: Any) -> None:
    writer = CSVResultWriter(str(tmp_path))
    writer.write_result({"a": 1, "b": 2})
    writer.write_result({"a": 3, "b": 4})
    assert read_csv(tmp_path) == (["a", "b"], [{"a": "1", "b": "2"}, {"a": "3", "b": "4"}])

    writer.write_result({"a": 5, "c": {"d": 6}})  # new nested key, "b" missing
    assert read_csv(tmp_path) == (
        ["a", "b", "c/d"],
        [
            {"a": "1", "b": "2", "c/d": ""},
            {"a": "3", "b": "4", "c/d": ""},
            {"a": "5", "b": "", "c/d": "6"},
        ],
    )

    writer.write_result({"e": 7, "a": 8, "b": 9, "c": {"d": 10}})  # new key first
    writer.write_result({"a": 11})
    writer.close()
    header, rows = read_csv(tmp_path)
    assert header == ["a", "b", "c/d", "e"]
    assert [list(r.values()) for r in rows] == [
        ["1", "2", "", ""],
        ["3", "4", "", ""],
        ["5", "", "6", ""],
        ["8", "9", "10", "7"],
        ["11", "", "", ""],
    ]
    assert writer.fieldnames == header
    assert [n for n in os.listdir(tmp_path) if n != EXPR_PROGRESS_FILE] == []  # no temp files


def test_file_always_parses_while_written(tmp_path: Any) -> None:
    writer = CSVResultWriter(str(tmp_path))
    for i in range(30):
        result = {"i": i, f"k{i % 7}": i, "nested": {f"n{i % 4}": i}}
        writer.write_result(result)
        header, rows = read_csv(tmp_path)
        assert len(rows) == i + 1
        assert all(None not in row for row in rows)  # no row longer than the header
        assert all(row["i"] == str(n) for n, row in enumerate(rows))
    writer.close()
    assert len(header) == 1 + 7 + 4


def test_awkward_values_round_trip(tmp_path: Any) -> None:
    writer = CSVResultWriter(str(tmp_path))
    writer.write_result(
        {
            "text": 'a, "quoted"\nline',
            "lst": [1, 2],
            "none": None,
            "np_f": np.float64(0.5),
            "np_i": np.int64(3),
            "np_f32": np.float32(1.25),
            "nan": float("nan"),
            "uni": "é",
        }
    )
    writer.close()
    _, (row,) = read_csv(tmp_path)
    assert row == {
        "text": 'a, "quoted"\nline',
        "lst": "[1, 2]",
        "none": "",
        "np_f": "0.5",
        "np_i": "3",
        "np_f32": "1.25",
        "nan": "nan",
        "uni": "é",
    }


def test_resume_appends_under_the_existing_header(tmp_path: Any) -> None:
    first = CSVLogger({}, str(tmp_path))
    first.on_result({"training_iteration": 1, "b": 1, "a": 1})
    first.close()

    resumed = CSVLogger({}, str(tmp_path))
    resumed.on_result({"a": 2, "training_iteration": 2, "b": 2})  # other key order
    resumed.on_result({"training_iteration": 3, "a": 3, "b": 3, "new": "x"})
    resumed.close()
    header, rows = read_csv(tmp_path)
    assert header == ["training_iteration", "b", "a", "new"]
    assert [list(r.values()) for r in rows] == [
        ["1", "1", "1", ""],
        ["2", "2", "2", ""],
        ["3", "3", "3", "x"],
    ]


def test_resume_drops_a_torn_last_row(tmp_path: Any) -> None:
    (tmp_path / EXPR_PROGRESS_FILE).write_text("a,b\n1,2\n3,")
    writer = CSVResultWriter(str(tmp_path))
    writer.write_result({"a": 5, "b": 6})
    writer.close()
    assert read_csv(tmp_path) == (["a", "b"], [{"a": "1", "b": "2"}, {"a": "5", "b": "6"}])


def test_resume_from_a_torn_header_starts_over(tmp_path: Any) -> None:
    (tmp_path / EXPR_PROGRESS_FILE).write_text("a,")
    writer = CSVResultWriter(str(tmp_path))
    writer.write_result({"x": 1})
    writer.close()
    assert read_csv(tmp_path) == (["x"], [{"x": "1"}])


def test_writing_after_close_raises(tmp_path: Any) -> None:
    log = CSVLogger({}, str(tmp_path))
    log.close()
    log.close()
    with pytest.raises(ValueError, match="closed"):
        log.on_result({"a": 1})
