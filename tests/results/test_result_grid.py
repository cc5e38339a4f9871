"""``ResultGrid``: one ``Result`` per trial, best results, data frames, errors."""

from __future__ import annotations

import math
import os

import pytest

from fasttune import Checkpoint
from fasttune.error import TrialError
from fasttune.experiment.trial import Trial
from fasttune.result_grid import ResultGrid as ResultGridAtRayPath
from fasttune.results import ExperimentAnalysis, Result, ResultGrid


def grid_of(experiment_dir, trials, **defaults) -> ResultGrid:
    return ResultGrid(ExperimentAnalysis(experiment_dir, trials=trials, **defaults))


@pytest.fixture
def mixed(make_trial, experiment_dir):
    """Two finished trials (one checkpointed), one failed, one that never started."""
    done = make_trial(0, [1.0, 4.0, 2.0], checkpoint_every=1)
    other = make_trial(1, [3.0, 3.5])
    failed = make_trial(2, [9.0, 9.5, 1.0], fail_at=3)
    pending = Trial(
        "Scripted", config={"index": 3}, trial_id="abcde_00003", experiment_path=experiment_dir
    )
    pending.init_local_path()
    return [done, other, failed, pending]


def test_ray_import_path():
    assert ResultGridAtRayPath is ResultGrid


def test_sequence_protocol(mixed, experiment_dir):
    grid = grid_of(experiment_dir, mixed)
    assert len(grid) == 4
    assert [r.path for r in grid] == [t.local_path for t in mixed]
    assert grid[-1] is grid[3]
    assert grid[1:3] == [grid[1], grid[2]]
    assert all(isinstance(r, Result) for r in grid)


def test_results_are_built_when_first_asked_for_then_kept(mixed, experiment_dir):
    grid = grid_of(experiment_dir, mixed, default_metric="score", default_mode="max")
    built = lambda: [r is not None for r in grid._results]  # noqa: E731
    assert built() == [False] * 4
    assert grid[1] is grid[1] and grid[-3] is grid[1]
    assert built() == [False, True, False, False]
    assert len(grid.errors) == 1  # builds the results of the trials that did not end well
    assert built() == [False, True, True, True]
    assert grid.get_best_result() is grid[2]  # score 9.5, though it failed later
    assert [r.path for r in grid] == [t.path for t in mixed] and all(built())
    assert grid[1:3] == [grid[1], grid[2]]
    with pytest.raises(IndexError, match="index 4 out of range for 4 results"):
        grid[4]
    with pytest.raises(IndexError):
        grid[-5]


def test_results_mirror_the_trials(mixed, experiment_dir):
    done = mixed[0]
    result = grid_of(experiment_dir, mixed)[0]
    assert result.metrics == done.last_result and result.metrics is not done.last_result
    assert result.checkpoint == done.checkpoint
    assert os.path.basename(result.checkpoint.path) == "checkpoint_000003"
    assert [m["score"] for _, m in result.best_checkpoints] == [1.0, 4.0, 2.0]
    assert result.config == done.config
    assert result.error is None
    assert result.filesystem.type_name == "local"


def test_data_frame_columns_are_in_the_order_of_ray_s_rows(make_trial, experiment_dir):
    # Ray's rows are result lines through pandas.json_normalize(sep="/"): plain values
    # in place, then each nested key depth first (config among them), no empty dicts.
    import json

    pd = pytest.importorskip("pandas")
    trial = make_trial(0, [1.0, 2.0], extra={"deep": {"b": {"c": 1}, "a": 2}, "none": {}})
    frame = grid_of(experiment_dir, [trial]).get_dataframe()
    with open(os.path.join(trial.local_path, "result.json")) as f:
        last = [json.loads(line) for line in f][-1]
    expected = list(pd.json_normalize([last], sep="/").columns)
    assert list(frame.columns) == [*expected, "logdir"]
    assert "config/extra/deep/b/c" in expected and "config/extra/none" not in expected


def test_a_trial_that_never_ran(mixed, experiment_dir):
    result = grid_of(experiment_dir, mixed)[3]
    assert result.metrics == {}
    assert result.checkpoint is None and result.best_checkpoints == []
    assert result.config == {"index": 3}
    assert result.error is None
    assert result.metrics_dataframe.empty  # as in Ray


def test_best_checkpoints_are_ordered_best_last_with_a_score(make_trial, experiment_dir):
    trial = make_trial(
        0,
        [3, 9, 1, 7, 5],
        checkpoint_every=1,
        manager_kwargs={"num_to_keep": 3, "score_attribute": "nested/loss", "score_order": "min"},
    )
    result = grid_of(experiment_dir, [trial])[0]
    assert [m["score"] for _, m in result.best_checkpoints] == [5, 7, 9]  # as Ray orders them
    assert os.path.basename(result.checkpoint.path) == "checkpoint_000005"
    assert os.path.basename(result.get_best_checkpoint("score", "min").path) == "checkpoint_000005"


def test_errors_and_counts(mixed, experiment_dir):
    grid = grid_of(experiment_dir, mixed)
    assert grid.num_terminated == 2
    assert grid.num_errors == 1
    [error] = grid.errors
    assert isinstance(error, TrialError) and error is grid[2].error
    assert "scripted failure at iteration 3" in str(error)
    assert error.exception_type == "ValueError"


def test_a_recovered_trial_has_no_error(make_trial, experiment_dir):
    trial = make_trial(0, [1.0, 2.0])
    with open(os.path.join(trial.local_path, "error.txt"), "w") as f:
        f.write("Failure # 1 ... an earlier attempt failed")
    assert grid_of(experiment_dir, [trial])[0].error is None  # TERMINATED in the end


def test_error_of_a_loaded_failed_trial(mixed, experiment_dir):
    grid = ResultGrid(ExperimentAnalysis(experiment_dir))
    assert (grid.num_errors, grid.num_terminated) == (1, 2)  # the pending trial left no files
    assert "scripted failure" in str(grid.errors[0])


def test_get_best_result(mixed, experiment_dir):
    grid = grid_of(experiment_dir, mixed[:3])  # scores 1, 4, 2 | 3, 3.5 | 9, 9.5 (failed)
    assert grid.get_best_result("score", "max") is grid[2]
    assert grid.get_best_result("score", "min") is grid[0]
    assert grid.get_best_result("score", "min", scope="avg") is grid[0]
    assert grid.get_best_result("score", "min", scope="all") is grid[0]
    assert grid.get_best_result("nested/loss", "min", scope="all") is grid[2]
    assert grid.get_best_result("nested/loss", "max", scope="last-5-avg") is grid[0]


def test_get_best_result_uses_the_defaults(mixed, experiment_dir):
    grid = grid_of(experiment_dir, mixed, default_metric="score", default_mode="min")
    assert grid.get_best_result() is grid[0]
    assert grid.get_best_result(mode="max") is grid[2]


def test_single_trial_without_metric(make_trial, experiment_dir):
    grid = grid_of(experiment_dir, [make_trial(0, [1.0])])
    assert grid.get_best_result() is grid[0]


def test_no_metric_or_mode(mixed, experiment_dir):
    grid = grid_of(experiment_dir, mixed)
    with pytest.raises(ValueError, match=r"No metric given.*TuneConfig\(metric"):
        grid.get_best_result(mode="max")
    with pytest.raises(ValueError, match=r"No mode given.*TuneConfig\(mode"):
        grid.get_best_result("score")


def test_unreported_metric_lists_the_reported_ones(mixed, experiment_dir):
    grid = grid_of(experiment_dir, mixed)
    with pytest.raises(RuntimeError) as info:
        grid.get_best_result("accuracy", "max")
    message = str(info.value)
    assert "'accuracy'" in message and "filter_nan_and_inf=False" in message
    for key in ("'score'", "'nested/loss'", "'nested/info/step'", "'training_iteration'"):
        assert key in message
    assert "config" not in message


def test_only_nan_values(make_trial, experiment_dir):
    grid = grid_of(experiment_dir, [make_trial(0, [math.nan]), make_trial(1, [math.nan])])
    with pytest.raises(RuntimeError, match="NaN or infinite"):
        grid.get_best_result("score", "max")
    assert grid.get_best_result("score", "max", filter_nan_and_inf=False) is grid[0]


def test_get_dataframe(mixed, experiment_dir):
    grid = grid_of(experiment_dir, mixed)
    frame = grid.get_dataframe()
    assert len(frame) == 3  # the trial that never ran has no row, as in Ray
    assert list(frame["score"]) == [2.0, 3.5, 9.5]
    assert list(frame["nested/loss"]) == [-2.0, -3.5, -9.5]
    assert list(frame["config/index"]) == [0, 1, 2]
    assert list(frame["logdir"]) == [t.local_path for t in mixed[:3]]
    best = grid.get_dataframe(filter_metric="score", filter_mode="max")
    assert list(best["score"]) == [4.0, 3.5, 9.5]
    assert list(best["training_iteration"]) == [2, 2, 2]
    worst = grid.get_dataframe(filter_metric="nested/loss", filter_mode="max")
    assert list(worst["score"]) == [1.0, 3.0, 9.0]


def test_metrics_dataframe_is_shared_with_the_analysis(mixed, experiment_dir):
    analysis = ExperimentAnalysis(experiment_dir, trials=mixed)
    grid = ResultGrid(analysis)
    frame = grid[0].metrics_dataframe
    assert list(frame["score"]) == [1.0, 4.0, 2.0]
    assert analysis.trial_dataframes[mixed[0].trial_id] is frame


def test_paths_and_filesystem(mixed, experiment_dir):
    grid = grid_of(experiment_dir, mixed)
    assert grid.experiment_path == experiment_dir
    assert grid.filesystem.type_name == "local"


def test_repr(mixed, experiment_dir):
    grid = grid_of(experiment_dir, mixed[1:3])
    text = repr(grid)
    assert text.startswith("ResultGrid<[\n  Result(\n    metrics={'score': 3.5, ")
    assert "\n  ),\n  Result(\n    error='TrialError',\n    metrics={'score': 9.5, " in text
    assert text.endswith("\n    checkpoint=None\n  )\n]>")


def test_checkpoints_of_a_remote_experiment(mixed, experiment_dir):
    fsspec = pytest.importorskip("fsspec")
    from fasttune.storage.fsspec_filesystem import FsspecFileSystem

    fs = FsspecFileSystem(fsspec.filesystem("memory"))
    fs.upload_dir(experiment_dir, "/grid_test/exp")
    try:
        grid = ResultGrid(ExperimentAnalysis("memory://grid_test/exp"))
        result = grid.get_best_result("score", "max", scope="all")
        assert result.metrics["score"] == 9.5
        first = grid[0]
        assert first.checkpoint == Checkpoint(f"{first.path}/checkpoint_000003", filesystem=fs)
        assert all("memory" in c.filesystem.type_name for c, _ in first.best_checkpoints)
        assert "memory" in grid.filesystem.type_name
        assert (
            grid.filesystem.get_file_info(
                f"{grid.experiment_path}/{first.path.rsplit('/', 1)[-1]}"
            ).type.name
            == "Directory"
        )
    finally:
        fs.delete("/grid_test")


def _validated_every_other_epoch(config):
    import fasttune as tune

    for epoch in range(3):
        metrics = {"loss": 1.0 / (epoch + 1) + config["x"]}
        if epoch == 0:
            metrics.update(phase="warmup", warm=True)  # neither numbers nor in the last
        if epoch % 2 == 1:  # validation every other epoch: not in the last result
            metrics["val_loss"] = 0.5
            metrics["info"] = {"val_acc": 0.9}
        tune.report(metrics)


@pytest.mark.parametrize("csv", [True, False], ids=["progress.csv", "result.json alone"])
@pytest.mark.parametrize("loaded", [False, True], ids=["fit's grid", "loaded from disk"])
def test_a_key_missing_from_the_last_result_is_a_column_of_the_data_frame(
    tmp_path, monkeypatch, loaded, csv
):
    """As on Ray Tune, whose rows come from each trial's whole data frame: a metric
    reported every other epoch is a column, blank in rows that lack it. The keys come
    from the header of progress.csv; without one, from the trial's statistics (numbers
    only: "phase" and "warm" are then left out of a fit's grid) or its whole history."""
    import fasttune as tune
    from fasttune.logger import JsonLoggerCallback

    callbacks = []
    if not csv:
        monkeypatch.setenv("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
        callbacks = [JsonLoggerCallback()]
    grid = tune.Tuner(
        _validated_every_other_epoch,
        param_space={"x": tune.grid_search([0.0, 1.0])},
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0, callbacks=callbacks),
    ).fit()
    if not csv and not loaded:
        frame = grid.get_dataframe()
        assert {"val_loss", "info/val_acc"} <= set(frame.columns)
        assert frame["val_loss"].isna().all()
        return
    analysis = ExperimentAnalysis(grid.experiment_path) if loaded else grid
    last = analysis.get_dataframe() if not loaded else analysis.dataframe()
    worst = (  # each trial's first result: the only one with "phase"
        analysis.get_dataframe(filter_metric="loss", filter_mode="max")
        if not loaded
        else analysis.dataframe(metric="loss", mode="max")
    )
    for frame, blank in ((last, ("phase", "warm")), (worst, ())):
        assert len(frame) == 2
        assert {"val_loss", "info/val_acc", "loss", "phase", "warm"} <= set(frame.columns)
        for key in ("val_loss", "info/val_acc", *blank):
            assert frame[key].isna().all(), key
    assert list(worst["phase"]) == ["warmup", "warmup"]
