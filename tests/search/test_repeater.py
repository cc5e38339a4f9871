"""Repeater: groups of repeats, the mean reported once per group, errors, state, end to end."""

from __future__ import annotations

import logging
import math

import pytest

import fasttune as tune
from fasttune.search.concurrency_limiter import ConcurrencyLimiter
from fasttune.search.repeater import TRIAL_INDEX, Repeater, warn_num_samples
from fasttune.search.search_generator import SearchGenerator
from fasttune.search.searcher import Searcher


class RecordingSearcher(Searcher):
    """Suggests {"x": 10}, {"x": 20}, ... (then FINISHED after ``limit``); records calls."""

    def __init__(self, metric="loss", mode="min", limit=None):
        super().__init__(metric=metric, mode=mode)
        self.limit = limit
        self.n = 0
        self.suggested: list[str] = []
        self.results: list[tuple[str, dict]] = []
        self.completed: list[tuple[str, dict | None, bool]] = []
        self.points: list[tuple[dict, float]] = []

    def set_search_properties(self, metric, mode, config, **spec):
        self._metric = self._metric or metric
        self._mode = self._mode or mode
        return True

    def suggest(self, trial_id):
        if self.limit is not None and self.n >= self.limit:
            return Searcher.FINISHED
        self.suggested.append(trial_id)
        self.n += 1
        return {"x": 10 * self.n, "nested": {"k": self.n}}

    def on_trial_result(self, trial_id, result):
        self.results.append((trial_id, result))

    def on_trial_complete(self, trial_id, result=None, error=False):
        self.completed.append((trial_id, result, error))

    def add_evaluated_point(
        self, parameters, value, error=False, pruned=False, intermediate_values=None
    ):
        self.points.append((parameters, value))


def _suggest_all(repeater, ids):
    return [repeater.suggest(trial_id) for trial_id in ids]


# ---------------------------------------------------------------------- validation


@pytest.mark.parametrize(("bad", "error"), [(0, ValueError), (-1, ValueError), (2.0, TypeError)])
def test_repeat_must_be_a_positive_int(bad, error):
    with pytest.raises(error, match="`repeat` must be"):
        Repeater(RecordingSearcher(), repeat=bad)


def test_searcher_must_be_a_searcher():
    with pytest.raises(TypeError, match="`searcher` must be a Searcher"):
        Repeater(object(), repeat=2)


# ---------------------------------------------------------------------- grouping


def test_each_suggestion_is_repeated_with_its_index():
    inner = RecordingSearcher()
    repeater = Repeater(inner, repeat=3)
    configs = _suggest_all(repeater, [f"t{i}" for i in range(7)])
    assert [c["x"] for c in configs] == [10, 10, 10, 20, 20, 20, 30]
    assert [c[TRIAL_INDEX] for c in configs] == [0, 1, 2, 0, 1, 2, 0]
    assert TRIAL_INDEX == "__trial_index__"
    # The wrapped searcher was asked once per group, with the group's first trial id.
    assert inner.suggested == ["t0", "t3", "t6"]


def test_repeats_get_independent_copies_of_the_config():
    repeater = Repeater(RecordingSearcher(), repeat=2)
    first, second = _suggest_all(repeater, ["a", "b"])
    first["nested"]["k"] = "changed"
    assert second["nested"]["k"] == 1


def test_set_index_false_leaves_the_config_alone():
    repeater = Repeater(RecordingSearcher(), repeat=2, set_index=False)
    assert _suggest_all(repeater, ["a", "b"]) == [{"x": 10, "nested": {"k": 1}}] * 2


def test_none_and_finished_pass_through_without_a_group():
    class Sometimes(RecordingSearcher):
        def __init__(self):
            super().__init__(limit=2)
            self.calls = 0

        def suggest(self, trial_id):
            self.calls += 1
            return None if self.calls == 1 else super().suggest(trial_id)

    repeater = Repeater(Sometimes(), repeat=2)
    assert repeater.suggest("a") is None
    assert [c["x"] for c in _suggest_all(repeater, ["a", "b", "c", "d"])] == [10, 10, 20, 20]
    assert repeater.suggest("e") == Searcher.FINISHED


def test_a_suggestion_that_is_not_a_dict_is_a_type_error():
    class Bad(RecordingSearcher):
        def suggest(self, trial_id):
            return ["x"]

    with pytest.raises(TypeError, match=r"Bad.suggest\(\) must return a dict"):
        Repeater(Bad(), repeat=2).suggest("a")


# ---------------------------------------------------------------------- averaging


def test_the_mean_is_reported_once_the_whole_group_completed():
    inner = RecordingSearcher()
    repeater = Repeater(inner, repeat=3)
    _suggest_all(repeater, ["a", "b", "c", "d"])
    repeater.on_trial_complete("c", {"loss": 3.0, "other": "c"})
    repeater.on_trial_complete("a", {"loss": 1.0, "other": "a"})
    assert inner.completed == []
    repeater.on_trial_complete("b", {"loss": 8.0, "other": "b"})
    assert inner.completed == [("a", {"loss": 4.0, "other": "a"}, False)]


def test_a_group_is_not_reported_before_all_its_trials_exist():
    inner = RecordingSearcher()
    repeater = Repeater(inner, repeat=2)
    repeater.suggest("a")
    repeater.on_trial_complete("a", {"loss": 1.0})  # "b" not even suggested yet
    assert inner.completed == []
    repeater.suggest("b")
    repeater.on_trial_complete("b", {"loss": 2.0})
    assert inner.completed == [("a", {"loss": 1.5}, False)]


def test_failed_repeats_and_nan_are_left_out_of_the_mean():
    inner = RecordingSearcher()
    repeater = Repeater(inner, repeat=4)
    _suggest_all(repeater, "abcd")
    repeater.on_trial_complete("a", {"loss": 100.0}, error=True)  # a partial value
    repeater.on_trial_complete("b", {"loss": float("nan")})
    repeater.on_trial_complete("c", {"loss": 2.0})
    repeater.on_trial_complete("d", {"loss": 4.0})
    assert len(inner.completed) == 1
    trial_id, result, error = inner.completed[0]
    assert (trial_id, result["loss"], error) == ("a", 3.0, False)


def test_a_missing_metric_is_left_out_of_the_mean():
    inner = RecordingSearcher()
    repeater = Repeater(inner, repeat=2)
    _suggest_all(repeater, "ab")
    repeater.on_trial_complete("a", None)
    repeater.on_trial_complete("b", {"loss": 5.0, "score": 1})
    assert inner.completed == [("a", {"loss": 5.0, "score": 1}, False)]


def test_a_group_without_any_valid_value_is_reported_as_an_error():
    inner = RecordingSearcher()
    repeater = Repeater(inner, repeat=2)
    _suggest_all(repeater, "ab")
    repeater.on_trial_complete("a", {"loss": 1.0}, error=True)
    repeater.on_trial_complete("b", None, error=True)
    assert len(inner.completed) == 1
    trial_id, _, error = inner.completed[0]
    assert (trial_id, error) == ("a", True)


def test_several_metrics_are_averaged_each():
    inner = RecordingSearcher(metric=["loss", "acc"], mode=["min", "max"])
    repeater = Repeater(inner, repeat=2)
    _suggest_all(repeater, "ab")
    repeater.on_trial_complete("a", {"loss": 1.0, "acc": 0.5})
    repeater.on_trial_complete("b", {"loss": 3.0, "acc": 0.7})
    _, result, error = inner.completed[0]
    assert result["loss"] == 2.0 and math.isclose(result["acc"], 0.6) and not error


def test_metric_given_by_the_tuner_is_the_one_averaged():
    inner = RecordingSearcher(metric=None, mode=None)
    repeater = Repeater(inner, repeat=2)
    assert repeater.metric is None
    repeater.set_search_properties("acc", "max", {})
    assert (repeater.metric, repeater.mode) == ("acc", "max")
    _suggest_all(repeater, "ab")
    repeater.on_trial_complete("a", {"acc": 0.2, "loss": 9.0})
    repeater.on_trial_complete("b", {"acc": 0.4, "loss": 1.0})
    assert inner.completed[0][1] == {"acc": pytest.approx(0.3), "loss": 9.0}


def test_repeated_and_unknown_completions_do_not_report_again():
    inner = RecordingSearcher()
    repeater = Repeater(inner, repeat=2)
    _suggest_all(repeater, "ab")
    repeater.on_trial_complete("stranger", {"loss": 0.0})
    repeater.on_trial_complete("a", {"loss": 1.0})
    repeater.on_trial_complete("b", {"loss": 3.0})
    repeater.on_trial_complete("b", {"loss": 5.0})  # e.g. a restarted trial
    assert inner.completed == [("a", {"loss": 2.0}, False)]


def test_intermediate_results_stay_with_the_repeater_and_points_pass_through():
    inner = RecordingSearcher()
    repeater = Repeater(inner, repeat=2)
    repeater.suggest("a")
    repeater.on_trial_result("a", {"loss": 1.0})
    repeater.add_evaluated_point({"x": 1}, 0.5)
    assert inner.results == []  # the searcher only hears group means
    assert inner.points == [({"x": 1}, 0.5)]


def test_warn_num_samples_finds_a_repeater_through_wrappers(caplog):
    repeater = Repeater(RecordingSearcher(), repeat=3)
    wrapped = SearchGenerator(ConcurrencyLimiter(repeater, max_concurrent=2))
    with caplog.at_level(logging.WARNING, logger="fasttune.search.repeater"):
        assert warn_num_samples(wrapped, 7) is True
        assert warn_num_samples(wrapped, 9) is False
        assert warn_num_samples(RecordingSearcher(), 7) is False
    assert len(caplog.records) == 1
    assert "num_samples=7" in caplog.text and "multiple of 3" in caplog.text


def test_num_samples_in_the_search_properties_is_checked(caplog):
    repeater = Repeater(RecordingSearcher(), repeat=2)
    with caplog.at_level(logging.WARNING, logger="fasttune.search.repeater"):
        repeater.set_search_properties("loss", "min", {}, num_samples=4)
        assert not caplog.records
        repeater.set_search_properties("loss", "min", {}, num_samples=5)
    assert "num_samples=5" in caplog.text


# ---------------------------------------------------------------------- state


def test_state_roundtrip_mid_group_continues_like_the_uninterrupted_run():
    def run_rest(repeater):
        repeater.on_trial_complete("b", {"loss": 4.0})
        out = _suggest_all(repeater, ["d", "e", "f"])
        repeater.on_trial_complete("c", {"loss": 6.0})
        repeater.on_trial_complete("d", {"loss": 8.0})
        return out

    def run_start(repeater):
        out = _suggest_all(repeater, ["a", "b", "c"])
        repeater.on_trial_complete("a", {"loss": 2.0})
        return out

    whole = Repeater(RecordingSearcher(), repeat=2)
    expected = run_start(whole) + run_rest(whole)

    first = Repeater(RecordingSearcher(), repeat=2)
    got = run_start(first)
    inner = RecordingSearcher()
    second = Repeater(inner, repeat=2)
    second.set_state(first.get_state())
    got += run_rest(second)
    assert got == expected
    assert inner.completed == whole.searcher.completed
    assert [tid for tid, _, _ in inner.completed] == ["a", "c"]


def test_state_survives_save_to_dir(tmp_path):
    repeater = Repeater(RecordingSearcher(), repeat=2)
    _suggest_all(repeater, "ab")
    repeater.on_trial_complete("a", {"loss": 1.0})
    repeater.save_to_dir(str(tmp_path))
    restored = Repeater(RecordingSearcher(), repeat=2)
    restored.restore_from_dir(str(tmp_path))
    restored.on_trial_complete("b", {"loss": 3.0})
    assert restored.searcher.completed == [("a", {"loss": 2.0}, False)]


def test_state_from_something_else_is_rejected():
    with pytest.raises(ValueError, match="Repeater.get_state"):
        Repeater(RecordingSearcher(), repeat=2).set_state({"groups": []})


# ---------------------------------------------------------------------- end to end


def noisy(config):
    # Each repeat sees different "noise": the mean over indices 0, 1, 2 adds exactly 1.
    tune.report({"loss": config["x"] + config[TRIAL_INDEX]})


@pytest.fixture
def two_cpus():
    tune.init(num_cpus=2, num_gpus=0)
    yield
    tune.shutdown()


@pytest.mark.usefixtures("two_cpus")
def test_tuner_runs_the_repeats_and_the_searcher_learns_the_means(tmp_path):
    inner = RecordingSearcher()
    grid = tune.Tuner(
        noisy,
        tune_config=tune.TuneConfig(search_alg=Repeater(inner, repeat=3), num_samples=6),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="exp", verbose=0),
    ).fit()
    assert grid.num_terminated == 6 and not grid.errors
    seen = sorted((r.config["x"], r.config[TRIAL_INDEX]) for r in grid)
    assert seen == [(10, 0), (10, 1), (10, 2), (20, 0), (20, 1), (20, 2)]
    assert len(inner.suggested) == 2
    assert sorted((r["loss"], e) for _, r, e in inner.completed) == [(11.0, False), (21.0, False)]
    # It heard the ids it suggested, once each.
    assert sorted(tid for tid, _, _ in inner.completed) == sorted(inner.suggested)


@pytest.mark.usefixtures("two_cpus")
def test_tuner_with_a_limiter_around_the_repeater(tmp_path):
    inner = RecordingSearcher()
    search_alg = ConcurrencyLimiter(Repeater(inner, repeat=2), max_concurrent=1)
    grid = tune.Tuner(
        noisy,
        tune_config=tune.TuneConfig(search_alg=search_alg, num_samples=4),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="exp", verbose=0),
    ).fit()
    assert grid.num_terminated == 4
    assert [r["loss"] for _, r, _ in inner.completed] == [10.5, 20.5]
