"""The default loggers' files written by the workers are the files the driver writes.

With no driver-side decision per result (no stopper, a scheduler that ignores
intermediate results) the workers write ``params.json``, ``params.pkl``,
``result.json``, ``progress.csv`` and the TensorBoard events themselves
(logger/trial_result_files.py); ``FASTTUNE_DRIVER_WRITES_RESULTS=1`` keeps them on the
driver. Each test runs a real experiment both ways and compares the files.
"""

from __future__ import annotations

import csv
import glob
import json
import os
import pickle

import pytest

import fasttune as tune
from fasttune._internal.spec_builder import _results_written_as_reported
from fasttune.executors.inline import InlineExecutor
from fasttune.schedulers import ASHAScheduler, FIFOScheduler

from .test_tbx_logger import scalars

# Values that differ from run to run (ids, clocks, processes).
_VOLATILE = {
    "trial_id", "date", "timestamp", "time_this_iter_s", "time_total_s", "pid",
    "time_since_restore", "experiment_id", "warmup_time",
}  # fmt: skip


def _start():
    """The iteration to start from: 0, or the one after the checkpoint restored."""
    checkpoint = tune.get_checkpoint()
    if checkpoint is None:
        return 0
    with checkpoint.as_directory() as d:
        return json.load(open(os.path.join(d, "state.json")))["i"]


def _report_with_checkpoint(metrics, i):
    d = os.path.join(os.getcwd(), f"ck_{i}")
    os.makedirs(d, exist_ok=True)
    json.dump({"i": i + 1}, open(os.path.join(d, "state.json"), "w"))
    tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(d))


def _reports(config):
    for i in range(_start(), 6):
        metrics = {"score": config["x"] * i, "nested": {"a": i, "b": "text"}, "flag": i % 2 == 0}
        if i == 3:
            _report_with_checkpoint(metrics, i)
        else:
            tune.report(metrics)


def _run(tmp_path, monkeypatch, driver_writes: str, name: str, **run_config):
    monkeypatch.setenv("FASTTUNE_DRIVER_WRITES_RESULTS", driver_writes)
    grid = tune.Tuner(
        _reports,
        param_space={"x": tune.grid_search([0.5, 2.0])},
        tune_config=tune.TuneConfig(metric="score", mode="max"),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name=name, verbose=0, **run_config),
    ).fit()
    assert not grid.errors
    return sorted(glob.glob(os.path.join(str(tmp_path), name, "_reports_*")))


def _json_lines(trial_dir):
    lines = [json.loads(line) for line in open(os.path.join(trial_dir, "result.json"))]
    return [{k: v for k, v in line.items() if k not in _VOLATILE} for line in lines]


def _csv_rows(trial_dir):
    with open(os.path.join(trial_dir, "progress.csv"), newline="") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    keep = [i for i, key in enumerate(header) if key not in _VOLATILE]
    return [[row[i] for i in keep] for row in rows]


def _files_of(trial_dir, read_events):
    events = read_events(trial_dir)
    return {
        "names": sorted(n for n in os.listdir(trial_dir) if not n.startswith("events.")),
        "params.json": json.load(open(os.path.join(trial_dir, "params.json"))),
        "params.pkl": pickle.load(open(os.path.join(trial_dir, "params.pkl"), "rb")),
        "result.json": _json_lines(trial_dir),
        "progress.csv": _csv_rows(trial_dir),
        "scalars": {
            tag: values
            for tag, values in scalars(events).items()
            if tag.rsplit("/", 1)[-1] not in _VOLATILE
        },
        "events": len(events),  # the file header, one per result, the hparams
        "event files": len(glob.glob(os.path.join(trial_dir, "events.out.tfevents.*"))),
    }


def test_the_workers_write_the_files_the_driver_writes(tmp_path, monkeypatch, read_events):
    by_worker = _run(tmp_path, monkeypatch, "0", "by_worker")
    by_driver = _run(tmp_path, monkeypatch, "1", "by_driver")
    assert len(by_worker) == len(by_driver) == 2
    for ours, theirs in zip(by_worker, by_driver):
        files = _files_of(ours, read_events)
        assert files == _files_of(theirs, read_events)
        assert [line["training_iteration"] for line in files["result.json"]] == [1, 2, 3, 4, 5, 6]
        assert files["result.json"][3]["checkpoint_dir_name"] == "checkpoint_000000"
        assert files["result.json"][-1]["experiment_tag"].startswith(("0_x=", "1_x="))
        assert "ray/tune/nested/a" in files["scalars"] and "ray/tune/score" in files["scalars"]


def _long_runs(config):
    """Many results of one shape, the runs a line template encodes, broken by a new
    key, a value beyond float32 (TensorBoard's general path) and negative steps."""
    for i in range(60):
        metrics = {"score": config["x"] * i, "big": 1e300 if i == 25 else float(i)}
        if i >= 20:  # a new shape, stepped by timesteps_total
            metrics["late"] = i
            metrics["timesteps_total"] = -i if 40 <= i < 45 else i
        tune.report(metrics)


def test_runs_of_templated_results_are_written_as_the_driver_writes_them(
    tmp_path, monkeypatch, read_events
):
    trial_dirs = {}
    for driver_writes in ("0", "1"):
        monkeypatch.setenv("FASTTUNE_DRIVER_WRITES_RESULTS", driver_writes)
        grid = tune.Tuner(
            _long_runs,
            param_space={"x": tune.grid_search([0.5, 2.0])},
            run_config=tune.RunConfig(storage_path=str(tmp_path), name=driver_writes, verbose=0),
        ).fit()
        assert not grid.errors
        trial_dirs[driver_writes] = sorted(r.path for r in grid)
    for ours, theirs in zip(trial_dirs["0"], trial_dirs["1"]):
        files = _files_of(ours, read_events)
        assert files == _files_of(theirs, read_events)
        assert len(files["result.json"]) == 60
        steps = [step for step, _ in files["scalars"]["ray/tune/score"]]
        assert steps[:3] == [1, 2, 3] and steps[38:46] == [38, 39, -40, -41, -42, -43, -44, 45]
        assert files["scalars"]["ray/tune/big"][25][1] == float("inf")


def test_a_stop_criterion_marks_the_last_line_done_as_the_driver_does(tmp_path, monkeypatch):
    stop = {"training_iteration": 4}
    by_worker = _run(tmp_path, monkeypatch, "0", "stop_w", stop=stop)
    by_driver = _run(tmp_path, monkeypatch, "1", "stop_d", stop=stop)
    for ours, theirs in zip(by_worker, by_driver):
        lines = _json_lines(ours)
        assert lines == _json_lines(theirs)
        assert [line["done"] for line in lines] == [False, False, False, True]
        assert _csv_rows(ours) == _csv_rows(theirs)


def test_a_resumed_trial_continues_its_files_once(tmp_path, monkeypatch):
    """A trial that fails after its checkpoint resumes from it: the worker cuts the
    files back to the checkpoint's iteration before writing, so each iteration is once."""

    def flaky(config):
        for i in range(_start(), 6):
            if i == 4 and not os.path.exists(config["marker"]):
                open(config["marker"], "w").close()
                raise RuntimeError("once")
            if i == 2:
                _report_with_checkpoint({"i": i}, i)
            else:
                tune.report({"i": i})

    grid = tune.Tuner(
        flaky,
        param_space={"marker": str(tmp_path / "failed_once")},
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), name="resume", verbose=0,
            failure_config=tune.FailureConfig(max_failures=1),
        ),
    ).fit()  # fmt: skip
    assert not grid.errors
    (trial_dir,) = glob.glob(str(tmp_path / "resume" / "flaky_*"))
    assert [line["training_iteration"] for line in _json_lines(trial_dir)] == [1, 2, 3, 4, 5, 6]
    rows = _csv_rows(trial_dir)
    column = rows[0].index("training_iteration")
    assert [row[column] for row in rows[1:]] == ["1", "2", "3", "4", "5", "6"]


@pytest.mark.parametrize(
    "scheduler, stop, expected",
    [
        (FIFOScheduler(), None, True),
        (ASHAScheduler(metric="score", mode="max"), None, False),  # decides per result
        (FIFOScheduler(), lambda trial_id, result: False, False),  # a callable stopper
        (FIFOScheduler(), {"score": lambda v: v > 1}, False),  # a callable criterion
        (FIFOScheduler(), {"score": 1}, True),  # checked on the worker
    ],
)
def test_when_the_workers_write(scheduler, stop, expected, monkeypatch):
    from fasttune.stopper import make_stopper

    monkeypatch.delenv("FASTTUNE_DRIVER_WRITES_RESULTS", raising=False)
    stopper, criterion = make_stopper(stop)
    assert _results_written_as_reported(InlineExecutor(), scheduler, stopper, criterion) is expected
    monkeypatch.setenv("FASTTUNE_DRIVER_WRITES_RESULTS", "1")
    assert not _results_written_as_reported(InlineExecutor(), scheduler, stopper, criterion)


def test_the_driver_keeps_the_same_statistics_from_summarized_batches(tmp_path, monkeypatch):
    """With the files written by the workers and nothing on the driver looking at every
    result, workers send each batch's last result and the others' statistics: the
    trials' statistics, counts and last results are those of a driver that saw all."""

    def many(config):
        for i in range(300):
            tune.report({"score": (i * config["x"]) % 7, "int": i, "maybe": None if i % 3 else i})

    analyses = {}
    for driver_writes in ("0", "1"):
        monkeypatch.setenv("FASTTUNE_DRIVER_WRITES_RESULTS", driver_writes)
        analyses[driver_writes] = tune.run(
            many,
            config={"x": tune.grid_search([0.5, 1.5])},
            storage_path=str(tmp_path),
            name=f"stats_{driver_writes}",
            verbose=0,
        )
    ours, theirs = (sorted(a.trials, key=lambda t: t.config["x"]) for a in analyses.values())
    for mine, reference in zip(ours, theirs):
        assert mine.results_count == reference.results_count == 300
        assert mine.last_result["training_iteration"] == 300
        for key in ("score", "int", "maybe", "training_iteration"):
            got, want = mine.metric_analysis[key], reference.metric_analysis[key]
            assert got == pytest.approx(want, rel=1e-12), key
        assert "trial_id" not in mine.metric_analysis and "done" not in mine.metric_analysis


def test_statistics_of_a_batch_merge_as_if_recorded_one_by_one():
    import numpy as np

    from fasttune._support.flatten import flatten_result
    from fasttune.experiment.metric_stats import stats_of
    from fasttune.experiment.trial import Trial

    results = [
        {"a": i * 1.5, "b": {"c": i}, "s": "text", "n": np.float32(i / 2), "t": True}
        for i in range(25)
    ]
    results[7]["odd"] = 3  # a key only some results have
    flats = [flatten_result(r) for r in results]
    one_by_one, merged = Trial("f"), Trial("f")
    for result, flat in zip(results, flats):
        one_by_one.update_last_result(result, flat)
    merged.update_last_result(results[0], flats[0])
    merged.add_unseen_results(23, stats_of(flats[1:24]))
    merged.update_last_result(results[24], flats[24])
    assert merged.results_count == one_by_one.results_count == 25
    assert (
        set(merged.metric_analysis) == set(one_by_one.metric_analysis) == {"a", "b/c", "n", "odd"}
    )
    for key, figures in one_by_one.metric_analysis.items():
        assert merged.metric_analysis[key] == pytest.approx(figures), key


def test_searchers_that_ignore_intermediate_results_let_workers_send_the_last_one():
    """Wrappers (the search generator, a concurrency limiter) forward on_trial_result:
    they listen exactly when the searcher they wrap does."""
    from fasttune._support.noop_hooks import is_noop_hook
    from fasttune.search import ConcurrencyLimiter, Searcher
    from fasttune.search.hyperopt import HyperOptSearch
    from fasttune.search.optuna import OptunaSearch
    from fasttune.search.search_generator import SearchGenerator

    class Listening(Searcher):
        def suggest(self, trial_id):
            return {}

        def on_trial_result(self, trial_id, result):
            pass

    def listens(searcher):
        return not is_noop_hook(SearchGenerator(searcher), "on_trial_result")

    assert not listens(HyperOptSearch())
    assert not listens(ConcurrencyLimiter(HyperOptSearch(), 2))
    assert listens(OptunaSearch())  # intermediate values, for its pruners
    assert listens(ConcurrencyLimiter(Listening(), 2))
