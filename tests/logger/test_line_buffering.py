"""Buffered result lines: whole lines only, out at flush/close, never behind the state."""

from __future__ import annotations

import json
import os

import fasttune as tune
from fasttune.logger._appender import _MAX_PENDING, LineAppender


def test_buffered_appender_writes_at_flush_and_close(tmp_path):
    path = str(tmp_path / "f.txt")
    out = LineAppender(path, buffered=True)
    out.append(b"a\n")
    out.append(b"b\n")
    assert os.path.getsize(path) == 0 and out.has_pending
    out.flush()
    assert open(path, "rb").read() == b"a\nb\n" and not out.has_pending
    out.append(b"c\n")
    out.close()
    assert open(path, "rb").read() == b"a\nb\nc\n"


def test_an_appender_opens_in_missing_directories_and_after_a_partial_line(tmp_path):
    path = tmp_path / "new" / "dirs" / "f.txt"
    out = LineAppender(str(path))
    assert out.size_at_open == 0
    out.append(b"a\n")
    out.close()
    with open(path, "ab") as f:
        f.write(b"half a li")  # a writer killed mid-line
    again = LineAppender(str(path))
    assert again.size_at_open == 2
    again.append(b"b\n")
    again.close()
    assert path.read_bytes() == b"a\nb\n"


def test_a_progress_csv_reopened_after_a_partial_row_keeps_its_header(tmp_path):
    from fasttune.logger.csv import CSVResultWriter

    (tmp_path / "progress.csv").write_text("score,iteration\n0.5,1\n0.7,")
    writer = CSVResultWriter(str(tmp_path))
    writer.write_result({"iteration": 2, "score": 0.9})
    writer.close()
    assert (tmp_path / "progress.csv").read_text() == "score,iteration\n0.5,1\n0.9,2\n"


def test_buffered_appender_writes_every_mebibyte(tmp_path):
    path = str(tmp_path / "f.txt")
    out = LineAppender(path, buffered=True)
    line = b"x" * 1023 + b"\n"
    for _ in range(_MAX_PENDING // len(line)):
        out.append(line)
    assert os.path.getsize(path) == _MAX_PENDING  # flushed on reaching the bound
    out.close()


def test_unbuffered_appender_writes_at_once(tmp_path):
    path = str(tmp_path / "f.txt")
    out = LineAppender(path)
    out.append(b"a\n")
    assert open(path, "rb").read() == b"a\n"
    out.close()


def _count_lines(path: str) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


class FileWatcher(tune.Callback):
    """Reads the trial's files when the state records a checkpoint or an end."""

    def __init__(self):
        self.seen: list[tuple[str, int, int]] = []

    def on_checkpoint(self, iteration, trials, trial, checkpoint, **info):
        lines = _count_lines(os.path.join(trial.local_path, "result.json"))
        self.seen.append(("checkpoint", trial.last_result["training_iteration"], lines))

    def on_trial_complete(self, iteration, trials, trial, **info):
        lines = _count_lines(os.path.join(trial.local_path, "result.json"))
        self.seen.append(("complete", trial.last_result["training_iteration"], lines))


def checkpointing(config):
    import tempfile

    for i in range(30):
        if i % 10 == 9:
            d = tempfile.mkdtemp()
            with open(os.path.join(d, "it"), "w") as f:
                f.write(str(i))
            tune.report({"i": i}, checkpoint=tune.Checkpoint.from_directory(d))
        else:
            tune.report({"i": i})


def test_result_files_hold_every_line_before_the_state_records_a_checkpoint_or_end(tmp_path):
    watcher = FileWatcher()
    grid = tune.Tuner(
        checkpointing,
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), name="exp", verbose=0, callbacks=[watcher]
        ),
    ).fit()
    assert not grid.errors
    assert [kind for kind, _, _ in watcher.seen] == ["checkpoint"] * 3 + ["complete"]
    for _, iteration, lines in watcher.seen:
        assert lines >= iteration
    path = os.path.join(grid[0].path, "result.json")
    with open(path) as f:
        assert [json.loads(line)["i"] for line in f] == list(range(30))


def test_buffered_csv_rows_survive_new_missing_and_reordered_keys(tmp_path):
    import csv

    from fasttune.logger.csv import CSVResultWriter

    writer = CSVResultWriter(str(tmp_path), buffered=True)
    writer.write_result({"a": 1, "b": 2})
    writer.write_result({"b": 3, "a": 4})  # same columns, another order
    writer.write_result({"a": 5, "b": 6, "c": 7})  # a new column: header rewritten
    writer.flush()
    writer.write_result({"a": 8})  # a missing column
    writer.close()
    with open(tmp_path / "progress.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows == [
        {"a": "1", "b": "2", "c": ""},
        {"a": "4", "b": "3", "c": ""},
        {"a": "5", "b": "6", "c": "7"},
        {"a": "8", "b": "", "c": ""},
    ]
