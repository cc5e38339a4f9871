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


def test_a_last_line_longer_than_the_tail_read_is_read_whole(tmp_path):
    long = {"i": 2, "text": "x" * (3 * files._TAIL_BYTES)}
    data = json.dumps({"i": 1}).encode() + b"\n" + json.dumps(long).encode() + b"\n"
    write(os.path.join(tmp_path, "result.json"), data)
    assert files.read_last_result(local_filesystem(), str(tmp_path)) == long


def test_a_long_history_is_read_from_its_end(tmp_path):
    """Only the tail of a long result.json is read, and its last whole line parsed (a
    torn last line after it, written at a crash, is passed over)."""
    lines = b"".join(json.dumps({"i": i, "pad": "p" * 100}).encode() + b"\n" for i in range(5000))
    assert len(lines) > 20 * files._TAIL_BYTES
    write(os.path.join(tmp_path, "result.json"), lines + b'{"i": 50')
    tails = local_filesystem().read_tails([os.path.join(tmp_path, "result.json")], 1000)
    assert len(next(iter(tails.values()))) == 1000
    assert files.read_last_result(local_filesystem(), str(tmp_path))["i"] == 4999


def test_last_results_of_many_trials_at_once(tmp_path):
    paths = []
    for n in range(5):
        folder = tmp_path / f"t{n}"
        folder.mkdir()
        paths.append(str(folder))
        if n == 3:
            write(os.path.join(folder, "progress.csv"), b"i\n1\n7\n")
        elif n != 4:
            write(os.path.join(folder, "result.json"), json.dumps({"i": n}).encode() + b"\n")
    assert files.read_last_results(local_filesystem(), paths) == {
        paths[0]: {"i": 0},
        paths[1]: {"i": 1},
        paths[2]: {"i": 2},
        paths[3]: {"i": 7},
        paths[4]: None,
    }
