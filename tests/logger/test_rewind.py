"""A trial that starts again shows each iteration once in its result files.

Unit tests of the three formats, then a real run: a trial fails after iteration 5,
is retried from its checkpoint of iteration 4 and reports 5 again; before the fix
``result.json`` read ``1 2 3 4 5 5 6 ...``.
"""

from __future__ import annotations

import csv
import json
import os

import fasttune as tune
from fasttune.logger._rewind import rewind_csv, rewind_event_files, rewind_json_lines
from fasttune.logger.csv import CSVResultWriter
from fasttune.logger.json import JsonResultWriter
from fasttune.logger.tensorboardx import TBXResultWriter


def _iterations_json(path):
    with open(path) as f:
        return [json.loads(line)["training_iteration"] for line in f]


def _iterations_csv(path):
    with open(path, newline="") as f:
        return [int(row["training_iteration"]) for row in csv.DictReader(f)]


def test_json_lines_are_cut_back_and_a_torn_last_line_dropped(tmp_path, make_result):
    writer = JsonResultWriter(str(tmp_path))
    for i in range(1, 7):
        writer.write_result(make_result(i))
    writer.close()
    path = str(tmp_path / "result.json")
    with open(path, "a") as f:
        f.write('{"training_iteration": 7, "lo')  # a crash mid-line
    assert rewind_json_lines(path, 4)
    assert _iterations_json(path) == [1, 2, 3, 4]


def test_nothing_past_the_point_leaves_the_file_untouched(tmp_path, make_result):
    writer = JsonResultWriter(str(tmp_path))
    for i in range(1, 4):
        writer.write_result(make_result(i))
    writer.close()
    path = str(tmp_path / "result.json")
    before = os.stat(path)
    assert not rewind_json_lines(path, 3)  # e.g. resuming from a pause at its newest result
    assert os.stat(path).st_ino == before.st_ino and _iterations_json(path) == [1, 2, 3]
    assert not rewind_json_lines(str(tmp_path / "missing.json"), 0)


def test_csv_rows_are_cut_back_under_their_header(tmp_path, make_result):
    writer = CSVResultWriter(str(tmp_path))
    for i in range(1, 7):
        writer.write_result(make_result(i, extra_metric=i) if i > 2 else make_result(i))
    writer.close()
    path = str(tmp_path / "progress.csv")
    assert rewind_csv(path, 3)
    assert _iterations_csv(path) == [1, 2, 3]
    with open(path, newline="") as f:
        assert "extra_metric" in next(csv.reader(f))  # the grown header is kept


def test_tensorboard_events_past_the_step_are_dropped(tmp_path, make_result, read_events):
    writer = TBXResultWriter(str(tmp_path))
    for i in range(1, 7):
        writer.write_result(make_result(i))
    writer.close()
    assert rewind_event_files(str(tmp_path), 2) == 1
    steps = [e.step for e in read_events(str(tmp_path)) if e.HasField("summary")]
    assert steps == [1, 2]
    assert rewind_event_files(str(tmp_path), 2) == 0  # nothing more to cut


def _fails_once_after_five(config):
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d, open(os.path.join(d, "it")) as f:
            start = int(f.read())
    for i in range(start + 1, 9):
        if i % 2 == 0:
            d = os.path.join(config["side"], f"ck{i}")
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "it"), "w") as f:
                f.write(str(i))
            tune.report({"i": i}, checkpoint=tune.Checkpoint.from_directory(d))
        else:
            tune.report({"i": i})
        marker = os.path.join(config["side"], "failed")
        if i == 5 and not os.path.exists(marker):
            open(marker, "w").close()
            raise RuntimeError("the first attempt dies after iteration 5")


def test_a_retried_trial_shows_each_iteration_once(tmp_path, read_events):
    side = tmp_path / "side"
    side.mkdir()
    grid = tune.Tuner(
        _fails_once_after_five,
        param_space={"side": str(side)},
        run_config=tune.RunConfig(
            storage_path=str(tmp_path / "results"),
            verbose=0,
            failure_config=tune.FailureConfig(max_failures=1),
        ),
    ).fit()
    [result] = grid
    assert result.error is None and result.metrics["training_iteration"] == 8
    trial_dir = result.path
    assert _iterations_json(os.path.join(trial_dir, "result.json")) == list(range(1, 9))
    assert _iterations_csv(os.path.join(trial_dir, "progress.csv")) == list(range(1, 9))
    steps = [
        e.step
        for e in read_events(trial_dir)
        if e.HasField("summary") and any(v.tag == "ray/tune/i" for v in e.summary.value)
    ]
    assert sorted(steps) == list(range(1, 9))
