"""A finished trial keeps less, and reads the same."""

from __future__ import annotations

import numpy as np
import pytest

from fasttune import result as R
from fasttune.experiment.trial import Trial, TrialStatus


def report(trial: Trial, values: list[float]) -> None:
    for i, value in enumerate(values, start=1):
        trial.update_last_result(
            {
                "loss": value,
                R.TRAINING_ITERATION: i,
                R.HOSTNAME: "host-" + "x" * 3,
                R.CONFIG: {"lr": 0.1},
            }
        )


def finish(trial: Trial, status: TrialStatus = TrialStatus.TERMINATED) -> None:
    """As the run ends a trial: its status, then, once the callbacks were told, compaction."""
    trial.set_status(status)
    trial.compact()


def test_statistics_read_the_same_after_the_trial_finishes():
    trial = Trial("f", config={"lr": 0.1})
    report(trial, [5.0, 3.0, 4.0, 1.0, 2.0, 7.0, 6.0, 0.5, 9.0, 8.0, 3.5, 2.5])
    before = trial.metric_analysis
    finish(trial)
    assert trial.metric_analysis == before
    assert before["loss"]["last-5-avg"] == pytest.approx((0.5 + 9 + 8 + 3.5 + 2.5) / 5)
    assert trial.last_flat_result == {}


def test_a_finished_trial_packs_its_last_result_and_reads_it_the_same():
    trial = Trial("f", config={"lr": 0.1})
    report(trial, [1.0, 2.0])
    trial.last_result["nested"] = {"a": [1, 2]}
    before = dict(trial.last_result)
    order = list(before)
    reported = trial.last_result
    trial.set_status(TrialStatus.TERMINATED)
    assert trial.last_result is reported  # as reported, while the callbacks are told
    trial.compact()
    assert trial._last_result is None and trial._stats is None
    assert isinstance(trial._packed, bytes) and len(trial._packed) < 200
    assert trial.last_result == before and list(trial.last_result) == order
    assert trial.last_result[R.CONFIG] is trial.config  # the trial's own, not a copy
    assert trial.last_result is not trial.last_result  # a copy at each read


def test_a_result_value_pickle_refuses_keeps_the_trial_unpacked():
    trial = Trial("f")
    trial.update_last_result({"loss": 1.0, "lock": __import__("threading").Lock()})
    finish(trial)
    assert trial._packed is None
    assert trial.last_result["loss"] == 1.0
    assert trial.metric_analysis["loss"]["last"] == 1.0


def test_a_trial_that_runs_again_is_unpacked_and_changes_in_place():
    trial = Trial("f")
    report(trial, [1.0, 3.0])
    finish(trial, TrialStatus.ERROR)
    trial.set_status(TrialStatus.PENDING)
    assert trial._packed is None
    trial.last_result["mark"] = 1
    assert trial.last_result["mark"] == 1
    finish(trial)
    assert trial.last_result["mark"] == 1


def test_a_result_set_on_a_finished_trial_replaces_the_packed_one():
    trial = Trial("f")
    report(trial, [1.0, 3.0])
    finish(trial)
    trial.last_result = {"loss": 9.0}
    trial.last_result["extra"] = 2
    assert trial.last_result == {"loss": 9.0, "extra": 2}
    assert trial.metric_analysis["loss"]["max"] == 3.0  # statistics kept


def test_a_config_that_does_not_compare_plainly_is_left_alone():
    trial = Trial("f", config={"w": np.arange(3)})
    trial.update_last_result({"loss": 1.0, R.CONFIG: {"w": np.arange(3)}})
    finish(trial)
    assert trial.last_result[R.CONFIG] is not trial.config


def test_reporting_again_after_finishing_keeps_counting():
    trial = Trial("f")
    report(trial, [1.0, 3.0])
    finish(trial)
    trial.set_status(TrialStatus.RUNNING)
    trial.update_last_result({"loss": 5.0})
    analysis = trial.metric_analysis["loss"]
    assert (analysis["max"], analysis["min"], analysis["avg"], analysis["last"]) == (5, 1, 3, 5)


def test_a_restored_finished_trial_is_compacted_and_reads_its_statistics_from_files(tmp_path):
    import fasttune as tune
    from fasttune.results import ExperimentAnalysis

    def trainable(config):
        for i in range(4):
            tune.report({"loss": config["x"] * (4 - i)})

    tune.Tuner(
        trainable,
        param_space={"x": tune.grid_search([1.0, 2.0])},
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="exp", verbose=0),
    ).fit()
    trials = ExperimentAnalysis(str(tmp_path / "exp")).trials
    assert len(trials) == 2
    for trial in trials:
        assert trial.last_flat_result == {}
        assert trial._packed is not None
        assert all(type(entry) is tuple for entry in trial._unpacked()[1].values())
        assert trial.last_result[R.CONFIG] is trial.config
        loss = trial.metric_analysis["loss"]  # every result, from the trial's files
        x = trial.config["x"]
        assert (loss["max"], loss["min"], loss["avg"]) == (4 * x, x, 2.5 * x)


def test_a_trial_keeps_its_attributes_in_slots_and_still_takes_others():
    import copy
    import pickle
    import sys

    trial = Trial("f", config={"lr": 0.1})
    report(trial, [1.0, 2.0])
    assert not hasattr(trial, "__dict__") or not trial.__dict__
    assert sys.getsizeof(trial) < 400  # a dict of its 33 attributes alone took 1.6 KB
    trial.custom_mark = "set by a callback"
    for finished in (False, True):
        if finished:
            finish(trial)
            assert trial._packed is not None
        for copied in (pickle.loads(pickle.dumps(trial)), copy.deepcopy(trial)):
            assert copied.trial_id == trial.trial_id
            assert copied._packed is None  # a blob is valid in its own process only
            assert copied.last_result == trial.last_result
            assert copied.metric_analysis == trial.metric_analysis
            assert copied.custom_mark == "set by a callback"


def test_a_packed_trial_pickled_to_a_fresh_process_reads_the_same(tmp_path):
    import pickle
    import subprocess
    import sys

    trial = Trial("f", config={"lr": 0.1})
    report(trial, [1.0, 2.0])
    finish(trial)
    (tmp_path / "trial.pkl").write_bytes(pickle.dumps(trial))
    code = (
        "import pickle, sys; t = pickle.load(open(sys.argv[1], 'rb'));"
        "print(t.last_result['loss'], t.metric_analysis['loss']['avg'], t.config)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "trial.pkl")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.split() == ["2.0", "1.5", "{'lr':", "0.1}"]


def _three_trials(tmp_path, reports: int, **run_config):
    """A real run of three trials reporting ``loss = x * i`` for i < ``reports``."""
    import fasttune as tune

    def trainable(config):
        for i in range(reports):
            tune.report({"loss": config["x"] * i})

    return tune.Tuner(
        trainable,
        param_space={"x": tune.grid_search([1.0, 2.0, 3.0])},
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0, **run_config),
    ).fit()


def test_a_run_packs_each_trial_after_its_ending_callbacks(tmp_path):
    import fasttune as tune

    seen = []

    class Marks(tune.Callback):
        def on_trial_complete(self, iteration, trials, trial, **info):
            # Still the dict the trial reported: a mark made here is kept.
            seen.append(trial._packed is None)
            trial.last_result["marked"] = trial.trial_id

    grid = _three_trials(tmp_path, reports=3, callbacks=[Marks()])
    assert seen == [True, True, True]
    trials = grid._experiment_analysis.trials
    assert all(t._packed is not None for t in trials)
    assert [t.last_result["marked"] for t in trials] == [t.trial_id for t in trials]
    assert [r.metrics["loss"] for r in grid] == [2.0, 4.0, 6.0]
    assert [t.metric_analysis["loss"]["avg"] for t in trials] == [1.0, 2.0, 3.0]


def test_the_trials_of_a_run_share_what_is_the_same_for_all(tmp_path):
    """What every trial holds alike is one object, not a copy per trial: the driver
    holds every trial to the end of a run."""
    import copy
    import pickle
    import sys

    from fasttune.experiment.trial_results import NO_FLAT_RESULT

    grid = _three_trials(tmp_path, reports=2, stop={"loss": 99})
    first, *others = grid._experiment_analysis.trials
    assert first.stopping_criterion == {"loss": 99}
    assert all(t.stopping_criterion is first.stopping_criterion for t in others)
    assert all(t.last_flat_result is NO_FLAT_RESULT for t in (first, *others))
    for trial in (first, *others):
        manager = trial.checkpoint_manager
        assert not hasattr(manager, "__dict__") and sys.getsizeof(manager) < 120
        assert manager.trial_dir == trial.local_path  # joined from the trial's own name
        assert manager._name is trial.relative_logdir
    # The shared empty mapping survives pickles and copies as itself.
    for copied in (pickle.loads(pickle.dumps(first)), copy.deepcopy(first)):
        assert copied.last_flat_result is NO_FLAT_RESULT
        assert copied.checkpoint_manager.trial_dir == first.local_path
    assert dict(NO_FLAT_RESULT) == {} and repr(NO_FLAT_RESULT) == "{}"
    with pytest.raises(KeyError):
        NO_FLAT_RESULT["loss"]


def test_a_checkpoint_manager_moved_to_another_folder_keeps_its_checkpoints(tmp_path):
    from fasttune._internal.checkpoint_manager import CheckpointManager

    manager = CheckpointManager(str(tmp_path), 2, folder_name="trial_0")
    assert manager.trial_dir == str(tmp_path / "trial_0")
    manager.register("checkpoint_000000", {"loss": 1.0})
    manager.trial_dir = str(tmp_path / "elsewhere")
    assert manager.trial_dir == str(tmp_path / "elsewhere")
    assert [c.path for c in manager.checkpoints] == [
        str(tmp_path / "elsewhere" / "checkpoint_000000")
    ]
