"""read_last_result: the last whole line of result.json, the data frame's default row."""

from __future__ import annotations

import json
import os

from fasttune.results import _trial_files as files
from fasttune.storage.filesystem import local_filesystem


def write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def test_last_line_is_read(tmp_path):
    lines = b"".join(json.dumps({"i": i}).encode() + b"\n" for i in range(5))
    write(os.path.join(tmp_path, "result.json"), lines + b"\n")  # a blank line at the end
    assert files.read_last_result(local_filesystem(), str(tmp_path)) == {"i": 4}


def test_a_torn_last_line_gives_the_one_before(tmp_path):
    write(os.path.join(tmp_path, "result.json"), b'{"i": 1}\n{"i": 2}\n{"i": ')
    assert files.read_last_result(local_filesystem(), str(tmp_path)) == {"i": 2}


def test_only_a_torn_line_gives_none(tmp_path):
    write(os.path.join(tmp_path, "result.json"), b'{"i": ')
    assert files.read_last_result(local_filesystem(), str(tmp_path)) is None


def test_progress_csv_when_there_is_no_json(tmp_path):
    write(os.path.join(tmp_path, "progress.csv"), b"i,loss\n1,0.5\n2,0.25\n")
    assert files.read_last_result(local_filesystem(), str(tmp_path)) == {"i": 2, "loss": 0.25}


def test_no_files_gives_none(tmp_path):
    assert files.read_last_result(local_filesystem(), str(tmp_path)) is None
