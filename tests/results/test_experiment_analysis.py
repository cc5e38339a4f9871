"""``ExperimentAnalysis`` over live trials and over trials loaded from the directory."""

from __future__ import annotations

import math
import os
from statistics import mean

import pytest

from fasttune.experiment.trial import TrialStatus
from fasttune.results import ExperimentAnalysis
from fasttune.storage.fsspec_filesystem import FsspecFileSystem

# Five trials whose winners differ by scope and mode (checked by ``test_scopes_discriminate``).
SCORES = {
    "A": [50] + [1] * 11,
    "B": [-40] + [5] * 11,
    "C": [10] * 6 + [0] * 5 + [9],
    "D": [0, 0] + [9] * 5 + [3] * 5,
    "E": [-6] * 7 + [10] * 5,
}
SCOPES = ["last", "avg", "last-5-avg", "last-10-avg", "all"]


def reference_best(scope: str, mode: str) -> str:
    """The expected winner, computed directly from the score lists."""

    def value(scores: list[float]) -> float:
        if scope == "all":
            return max(scores) if mode == "max" else min(scores)
        window = {"last": 1, "avg": len(scores), "last-5-avg": 5, "last-10-avg": 10}[scope]
        return mean(scores[-window:])

    pick = max if mode == "max" else min
    return pick(SCORES, key=lambda name: value(SCORES[name]))


@pytest.fixture
def trials(make_trial):
    return [make_trial(i, scores, checkpoint_every=4) for i, scores in enumerate(SCORES.values())]


@pytest.fixture(params=["live", "loaded"])
def analysis(request, trials, experiment_dir):
    if request.param == "live":
        return ExperimentAnalysis(experiment_dir, trials=trials)
    return ExperimentAnalysis(experiment_dir)


def name_of(trial) -> str:
    return list(SCORES)[trial.config["index"]]


def test_scopes_discriminate():
    winners = {reference_best(s, m) for s in SCOPES for m in ("min", "max")}
    assert winners == set(SCORES)


@pytest.mark.parametrize("mode", ["min", "max"])
@pytest.mark.parametrize("scope", SCOPES)
def test_best_trial_for_every_scope_and_mode(analysis, scope, mode):
    best = analysis.get_best_trial("score", mode, scope=scope)
    assert name_of(best) == reference_best(scope, mode)


@pytest.mark.parametrize("mode", ["min", "max"])
@pytest.mark.parametrize("scope", ["last", "avg", "all"])
def test_nested_metric_is_looked_up_with_a_slash(analysis, scope, mode):
    best = analysis.get_best_trial("nested/loss", mode, scope=scope)
    flipped = "min" if mode == "max" else "max"  # nested/loss == -score
    assert name_of(best) == reference_best(scope, flipped)


def test_defaults_are_used(trials, experiment_dir):
    analysis = ExperimentAnalysis(
        experiment_dir, trials=trials, default_metric="score", default_mode="min"
    )
    assert name_of(analysis.get_best_trial()) == reference_best("last", "min")
    assert name_of(analysis.best_trial) == "A"
    assert analysis.best_config == analysis.best_trial.config
    assert analysis.best_result == analysis.best_trial.last_result
    assert analysis.get_best_config(mode="max", scope="all") == trials[0].config


def test_best_properties_need_defaults(analysis):
    for name in ("best_trial", "best_config", "best_result", "best_checkpoint", "best_dataframe"):
        with pytest.raises(ValueError, match=f"`{name}`"):
            getattr(analysis, name)


def test_missing_metric_mode_scope_are_rejected(analysis):
    with pytest.raises(ValueError, match="No `metric`"):
        analysis.get_best_trial(mode="max")
    with pytest.raises(ValueError, match="No `mode`"):
        analysis.get_best_trial("score")
    with pytest.raises(ValueError, match="'best'"):
        analysis.get_best_trial("score", "best")
    with pytest.raises(ValueError, match="'last-3-avg'"):
        analysis.get_best_trial("score", "max", scope="last-3-avg")


def test_default_mode_is_validated_and_alone_implies_the_anonymous_metric(experiment_dir):
    with pytest.raises(ValueError, match="default_mode"):
        ExperimentAnalysis(experiment_dir, trials=[], default_mode="up")
    analysis = ExperimentAnalysis(experiment_dir, trials=[], default_mode="max")
    assert analysis.default_metric == "_metric"


def test_unknown_metric_gives_no_trial(analysis):
    assert analysis.get_best_trial("nope", "max") is None


def test_nan_and_inf_are_filtered(make_trial, experiment_dir):
    trials = [
        make_trial(0, [1.0, math.nan]),
        make_trial(1, [0.5, 1.0]),
        make_trial(2, [2.0, math.inf]),
    ]
    analysis = ExperimentAnalysis(experiment_dir, trials=trials)
    assert analysis.get_best_trial("score", "max").trial_id == trials[1].trial_id
    assert analysis.get_best_trial("score", "max", filter_nan_and_inf=False) is trials[2]
    loaded = ExperimentAnalysis(experiment_dir)
    assert loaded.get_best_trial("score", "max").trial_id == trials[1].trial_id
    assert loaded.get_best_trial("score", "min", scope="all").trial_id == trials[1].trial_id


def test_single_trial_needs_no_metric(make_trial, experiment_dir):
    trial = make_trial(0, [1.0])
    assert ExperimentAnalysis(experiment_dir, trials=[trial]).get_best_trial() is trial


def test_loaded_trials_match_the_live_ones(trials, experiment_dir):
    loaded = ExperimentAnalysis(experiment_dir).trials
    assert [t.trial_id for t in loaded] == [t.trial_id for t in trials]
    for live, found in zip(trials, loaded):
        assert found.local_path == live.local_path
        assert found.status == TrialStatus.TERMINATED
        assert found.trainable_name == "Scripted"
        assert found.config == live.config
        assert found.experiment_tag == ""  # not in results written by a bare Trainable
        assert found.last_result["score"] == live.last_result["score"]
        assert found.checkpoint == live.checkpoint
        assert [
            m["training_iteration"] for _, m in found.checkpoint_manager.best_checkpoints()
        ] == [
            4,
            8,
            12,
        ]


def test_loaded_failed_trial_is_in_error(make_trial, experiment_dir):
    make_trial(0, [1.0, 2.0])
    failed = make_trial(1, [1.0, 2.0, 3.0], fail_at=3)
    loaded = ExperimentAnalysis(experiment_dir).trials
    assert [t.status for t in loaded] == [TrialStatus.TERMINATED, TrialStatus.ERROR]
    assert loaded[1].error_file == failed.error_file


def test_experiment_state_files_are_used_when_present(trials, experiment_dir):
    experiment_state = pytest.importorskip("fasttune._internal.experiment_state")
    trials[1].set_status(TrialStatus.PAUSED)  # a status only the state can tell
    experiment_state.ExperimentStateStore(experiment_dir).snapshot(trials, {})
    analysis = ExperimentAnalysis(experiment_dir)
    assert [t.status for t in analysis.trials][:2] == [TrialStatus.TERMINATED, TrialStatus.PAUSED]
    # The state holds only last results: the averages come from result.json.
    assert name_of(analysis.get_best_trial("score", "min", scope="avg")) == "E"


def test_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        ExperimentAnalysis(str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match="nowhere"):  # what Ray's raises
        ExperimentAnalysis(str(tmp_path / "nowhere"))


def test_directory_without_trials_lists_its_contents(trials, experiment_dir):
    parent = os.path.dirname(experiment_dir)
    with pytest.raises(ValueError, match=r"No trial directories.*'exp'"):
        ExperimentAnalysis(parent)


def test_state_json_path_points_at_its_directory(trials, experiment_dir):
    path = os.path.join(experiment_dir, "experiment_state.json")
    assert ExperimentAnalysis(path, trials=trials).experiment_path == experiment_dir


def test_bad_filesystem_type(experiment_dir):
    with pytest.raises(TypeError, match="storage_filesystem"):
        ExperimentAnalysis(experiment_dir, storage_filesystem="s3", trials=[])


def test_get_all_configs(analysis, trials):
    configs = analysis.get_all_configs()
    assert configs[trials[0].trial_id] == trials[0].config
    prefixed = analysis.get_all_configs(prefix=True)[trials[2].trial_id]
    assert prefixed == {"config/scores": SCORES["C"], "config/index": 2}


def test_results_and_results_df(analysis, trials):
    assert analysis.results[trials[3].trial_id]["score"] == SCORES["D"][-1]
    frame = analysis.results_df
    assert list(frame.index) == [t.trial_id for t in trials]
    assert frame.loc[trials[4].trial_id, "nested/loss"] == -SCORES["E"][-1]
    assert "nested" not in frame.columns


def test_trial_dataframes(analysis, trials):
    frames = analysis.trial_dataframes
    assert list(frames) == [t.trial_id for t in trials]
    frame = frames[trials[1].trial_id]
    assert list(frame["score"]) == SCORES["B"]
    assert list(frame["nested/info/step"]) == list(range(1, 13))
    assert analysis.trial_dataframes[trials[1].trial_id] is frame  # read once


def test_dataframe_last_rows(analysis, trials):
    frame = analysis.dataframe()
    assert len(frame) == len(trials)
    assert list(frame["score"]) == [s[-1] for s in SCORES.values()]
    assert list(frame["logdir"]) == [t.local_path for t in trials]
    assert list(frame["config/index"]) == [0, 1, 2, 3, 4]
    assert {"nested/loss", "nested/info/step", "trial_id", "training_iteration"} <= set(
        frame.columns
    )
    assert "config" not in frame.columns and "nested" not in frame.columns


@pytest.mark.parametrize("mode", ["min", "max"])
def test_dataframe_filtered_rows_are_each_trials_best(analysis, mode):
    frame = analysis.dataframe(metric="score", mode=mode)
    pick = max if mode == "max" else min
    assert list(frame["score"]) == [pick(s) for s in SCORES.values()]
    first_best = [s.index(pick(s)) + 1 for s in SCORES.values()]
    assert list(frame["training_iteration"]) == first_best


def test_dataframe_argument_errors(analysis):
    with pytest.raises(ValueError, match="needs a `metric`"):
        analysis.dataframe(mode="max")
    with pytest.raises(ValueError, match="'top'"):
        analysis.dataframe("score", "top")


def test_best_dataframes_and_checkpoint(trials, experiment_dir):
    analysis = ExperimentAnalysis(
        experiment_dir, trials=trials, default_metric="score", default_mode="max"
    )
    assert name_of(analysis.best_trial) == "E"
    assert list(analysis.best_dataframe["score"]) == SCORES["E"]
    assert list(analysis.best_result_df.index) == [trials[4].trial_id]
    assert analysis.best_result_df["score"].iloc[0] == 10
    # E's checkpoints were taken at iterations 4, 8 and 12 (scores -6, 10, 10): first wins.
    assert os.path.basename(analysis.best_checkpoint.path) == "checkpoint_000008"


def test_get_best_and_last_checkpoint(analysis, trials):
    c_trial = analysis.trials[2]  # scores at iterations 4, 8, 12: 10, 0, 9
    best = analysis.get_best_checkpoint(c_trial, "score", "min")
    assert os.path.basename(best.path) == "checkpoint_000008"
    by_path = analysis.get_best_checkpoint(c_trial.local_path, "score", "max")
    assert os.path.basename(by_path.path) == "checkpoint_000004"
    assert os.path.basename(analysis.get_last_checkpoint(c_trial).path) == "checkpoint_000012"
    # Without a trial: the last checkpoint of the best trial by the given metric.
    last = analysis.get_last_checkpoint(metric="score", mode="min")
    assert os.path.dirname(last.path) == trials[0].local_path
    assert analysis.get_best_checkpoint(c_trial, "no_such_metric", "max") is None
    with pytest.raises(ValueError, match="No trial with path or id"):
        analysis.get_best_checkpoint("elsewhere", "score", "max")


def test_kept_checkpoints_follow_the_checkpoint_config(make_trial, experiment_dir):
    trial = make_trial(
        0,
        [3, 9, 1, 7, 5],
        checkpoint_every=1,
        manager_kwargs={"num_to_keep": 2, "score_attribute": "score", "score_order": "max"},
    )
    analysis = ExperimentAnalysis(experiment_dir, trials=[trial])
    kept = [m["score"] for _, m in analysis._checkpoints(trial)]
    assert kept == [7, 9]  # the two best, best last (as Ray)
    assert os.path.basename(analysis.get_last_checkpoint(trial).path) == "checkpoint_000005"
    on_disk = sorted(n for n in os.listdir(trial.local_path) if n.startswith("checkpoint_"))
    assert on_disk == ["checkpoint_000002", "checkpoint_000004", "checkpoint_000005"]


def test_remote_experiment(trials, experiment_dir):
    fsspec = pytest.importorskip("fsspec")
    fs = FsspecFileSystem(fsspec.filesystem("memory"))
    fs.upload_dir(experiment_dir, "/analysis_test/exp")
    try:
        analysis = ExperimentAnalysis("memory://analysis_test/exp")
        assert analysis.experiment_path == "/analysis_test/exp"
        best = analysis.get_best_trial("score", "max", scope="all")
        assert name_of(best) == "A"
        checkpoint = analysis.get_best_checkpoint(best, "score", "max")
        assert "memory" in checkpoint.filesystem.type_name
        assert checkpoint.path == f"{best.local_path}/checkpoint_000004"
    finally:
        fs.delete("/analysis_test")
