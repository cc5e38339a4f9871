"""Tests for Searcher, SearchAlgorithm, SearchGenerator and ensure_search_algorithm."""

from __future__ import annotations

import logging
import pickle

import cloudpickle
import numpy as np
import pytest

from fasttune.experiment.trial import Trial, TrialStatus
from fasttune.search import (
    BasicVariantGenerator,
    SearchAlgorithm,
    Searcher,
    SearchGenerator,
    Suggestion,
)
from fasttune.search.sample import Domain, grid_search, randint, sample_from, uniform
from fasttune.search.search_generator import ensure_search_algorithm


class ListSearcher(Searcher):
    """Suggests the given values of ``x`` in order, then FINISHED; keeps its own space."""

    def __init__(self, values, metric="loss", mode="min"):
        super().__init__(metric=metric, mode=mode)
        self.values = list(values)
        self.position = 0
        self.results: list[tuple[str, dict]] = []
        self.completed: list[tuple[str, dict | None, bool]] = []

    def suggest(self, trial_id):
        if self.position >= len(self.values):
            return Searcher.FINISHED
        self.position += 1
        return {"x": self.values[self.position - 1]}

    def on_trial_result(self, trial_id, result):
        self.results.append((trial_id, result))

    def on_trial_complete(self, trial_id, result=None, error=False):
        self.completed.append((trial_id, result, error))


class RandomSearcher(Searcher):
    """Takes the Tuner's space and samples its domains from a seeded generator."""

    def __init__(self, seed=0, metric=None, mode=None):
        super().__init__(metric=metric, mode=mode)
        self.rng = np.random.default_rng(seed)
        self.space: dict | None = None
        self.best: tuple[float, dict] | None = None
        self.configs: dict[str, dict] = {}

    def set_search_properties(self, metric, mode, config, **spec):
        if self.space is not None:
            return False
        self._metric = metric or self._metric
        self._mode = mode or self._mode
        self.space = {k: v for k, v in config.items() if isinstance(v, Domain)}
        return True

    def suggest(self, trial_id):
        config = {k: d.sample(random_state=self.rng) for k, d in sorted(self.space.items())}
        self.configs[trial_id] = config
        return config

    def on_trial_complete(self, trial_id, result=None, error=False):
        if result and self.metric in result:
            value = result[self.metric]
            if self.best is None or value < self.best[0]:
                self.best = (value, self.configs[trial_id])


class PointsSearcher(Searcher):
    def __init__(self):
        super().__init__(metric="loss", mode="min")
        self.points: list[dict] = []

    def suggest(self, trial_id):
        return {}

    def add_evaluated_point(
        self, parameters, value, error=False, pruned=False, intermediate_values=None
    ):
        self.points.append(
            {"parameters": parameters, "value": value, "error": error, "pruned": pruned}
        )


def configured(searcher, space=None, num_samples=1, metric=None, mode=None):
    gen = SearchGenerator(searcher)
    space = {} if space is None else space
    gen.set_search_properties(metric, mode, space)
    gen.add_configurations(space, num_samples)
    return gen


def drain(gen, limit=1000, prefix="t"):
    out = []
    for index in range(limit):
        if gen.is_finished():
            break
        suggestion = gen.next_suggestion(f"{prefix}{index}")
        if suggestion is None:
            break
        out.append(suggestion)
    return out


# ---------------------------------------------------------------------- Searcher


def test_searcher_metric_mode_and_defaults():
    searcher = Searcher(metric="loss", mode="max")
    assert (searcher.metric, searcher.mode) == ("loss", "max")
    assert (Searcher.FINISHED, Searcher.CKPT_FILE_TMPL) == ("FINISHED", "searcher-state-{}.pkl")
    assert searcher.set_search_properties("a", "min", {}) is False
    assert searcher.set_max_concurrency(4) is False
    with pytest.raises(NotImplementedError, match="suggest"):
        searcher.suggest("t1")


@pytest.mark.parametrize(
    ("metric", "mode", "name"),
    [
        ("loss", "minimize", "`mode`"),
        ("loss", ["min", "max"], "`metric`"),
        (["a", "b"], "min", "`metric`"),
        (["a", "b"], ["min", "best"], "`mode`"),
        (3, "min", "`metric`"),
    ],
)
def test_searcher_rejects_bad_metric_mode(metric, mode, name):
    with pytest.raises(ValueError, match=name):
        Searcher(metric=metric, mode=mode)


def test_multi_objective_metric_mode_accepted():
    searcher = Searcher(metric=["a", "b"], mode=["min", "obs"])
    assert searcher.mode == ["min", "obs"]


def test_subclass_without_super_init_still_has_properties():
    class Bare(Searcher):
        def __init__(self):
            pass

    assert (Bare().metric, Bare().mode) == (None, None)


def test_add_evaluated_point_not_supported_names_the_class():
    with pytest.raises(NotImplementedError, match="ListSearcher does not support"):
        ListSearcher([1]).add_evaluated_point({"x": 1}, 0.5)
    with pytest.raises(NotImplementedError, match="ListSearcher does not support"):
        ListSearcher([1]).add_evaluated_trials([], "loss")


def test_add_evaluated_trials_feeds_points():
    def trial(status, last_result, x):
        t = Trial("f", config={"x": x})
        t.status = status
        t.last_result = last_result
        return t

    searcher = PointsSearcher()
    searcher.add_evaluated_trials(
        [
            trial(TrialStatus.TERMINATED, {"loss": 1.0, "done": True}, 1),
            trial(TrialStatus.TERMINATED, {"loss": 2.0}, 2),
            trial(TrialStatus.ERROR, {"loss": 3.0}, 3),
            trial(TrialStatus.TERMINATED, {"acc": 1.0, "done": True}, 4),
        ],
        "loss",
    )
    assert searcher.points == [
        {"parameters": {"x": 1}, "value": 1.0, "error": False, "pruned": False},
        {"parameters": {"x": 2}, "value": 2.0, "error": False, "pruned": True},
        {"parameters": {"x": 3}, "value": 3.0, "error": True, "pruned": False},
    ]
    with pytest.raises(TypeError, match="trials_or_analysis"):
        searcher.add_evaluated_trials("trials", "loss")
    with pytest.warns(UserWarning, match="no finished trial reported 'acc'"):
        searcher.add_evaluated_trials(trial(TrialStatus.TERMINATED, {"loss": 1}, 5), "acc")


def test_searcher_save_and_restore(tmp_path):
    searcher = RandomSearcher(seed=3)
    searcher.set_search_properties("loss", "min", {"a": uniform(0, 1)})
    searcher.suggest("t0")
    path = tmp_path / "s.pkl"
    searcher.save(str(path))
    expected = searcher.suggest("t1")
    restored = RandomSearcher(seed=99)
    restored.restore(str(path))
    assert restored.suggest("t1") == expected
    assert (restored.metric, restored.mode) == ("loss", "min")


def test_save_to_dir_picks_newest_and_restores(tmp_path):
    ListSearcher([1, 2, 3]).save_to_dir(str(tmp_path), "a")
    newer = ListSearcher([1, 2, 3])
    newer.suggest("t0")
    assert newer.save_to_dir(str(tmp_path), "b") is True
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "searcher-state-a.pkl",
        "searcher-state-b.pkl",
    ]
    restored = ListSearcher([1, 2, 3])
    restored.restore_from_dir(str(tmp_path))
    assert restored.suggest("t1") == {"x": 2}


def test_save_to_dir_without_save_support(tmp_path, caplog):
    class NoSave(ListSearcher):
        def save(self, checkpoint_path):
            raise NotImplementedError

    with caplog.at_level(logging.WARNING):
        assert NoSave([1]).save_to_dir(str(tmp_path)) is False
    assert list(tmp_path.iterdir()) == []
    assert "does not implement save" in caplog.text


def test_restore_from_dir_without_state(tmp_path):
    with pytest.raises(RuntimeError, match="searcher-state"):
        ListSearcher([1]).restore_from_dir(str(tmp_path))


# ---------------------------------------------------------------------- SearchGenerator


def test_generator_end_to_end_with_own_space():
    searcher = ListSearcher([0.5, 1.5, 2.5])
    gen = configured(searcher, {"epochs": 3, "nested": {"keep": True}}, num_samples=10)
    assert gen.total_samples == 10
    assert (gen.metric, gen.mode) == ("loss", "min")
    suggestions = drain(gen)
    assert [s.config for s in suggestions] == [
        {"epochs": 3, "nested": {"keep": True}, "x": x} for x in (0.5, 1.5, 2.5)
    ]
    assert suggestions[0].tag == "epochs=3,keep=True,x=0.5000"
    assert suggestions[0].evaluated_params == {"x": 0.5}
    assert gen.is_finished()  # FINISHED before num_samples was reached
    gen.on_trial_result("t0", {"loss": 1.0})
    gen.on_trial_complete("t0", {"loss": 0.5})
    gen.on_trial_complete("t1", None, error=True)
    assert searcher.results == [("t0", {"loss": 1.0})]
    assert searcher.completed == [("t0", {"loss": 0.5}, False), ("t1", None, True)]


def test_generator_stops_at_num_samples():
    gen = configured(ListSearcher(range(10)), num_samples=4)
    assert [s.config["x"] for s in drain(gen)] == [0, 1, 2, 3]
    assert gen.is_finished()
    assert gen.next_suggestion("t9") is None


def test_generator_passes_space_to_searcher_and_merges():
    searcher = RandomSearcher(seed=1)
    space = {"lr": uniform(0, 1), "n": randint(1, 5), "opt": {"name": "adam"}}
    gen = configured(searcher, space, num_samples=5, metric="loss", mode="min")
    assert (gen.metric, gen.mode) == ("loss", "min")
    suggestions = drain(gen)
    assert len(suggestions) == 5
    for suggestion in suggestions:
        assert set(suggestion.config) == {"lr", "n", "opt"}
        assert suggestion.config["opt"] == {"name": "adam"}
        assert 0 <= suggestion.config["lr"] < 1 and 1 <= suggestion.config["n"] < 5
        assert set(suggestion.evaluated_params) == {"lr", "n"}
    for index, suggestion in enumerate(suggestions):
        gen.on_trial_complete(f"t{index}", {"loss": suggestion.config["lr"]})
    assert searcher.best[1]["lr"] == min(s.config["lr"] for s in suggestions)


def _sample_from_space():
    return {
        "x": uniform(0, 1),
        "k": 3,
        "s": sample_from(lambda spec: spec.config.x + spec.config.k),
        "t": sample_from(lambda config: config["s"] * 2),  # reads another sample_from
        "n": randint(0, 10),
    }


def test_sample_from_is_computed_from_each_suggestion_in_space_order():
    # As Ray: the searcher never sees sample_from values (a model-based searcher would
    # refuse them); each is computed from the suggested config, and the config keeps
    # param_space's key order.
    searcher = RandomSearcher(seed=2)
    gen = configured(searcher, _sample_from_space(), num_samples=3, metric="loss", mode="min")
    assert set(searcher.space) == {"x", "n"}
    for suggestion in drain(gen):
        config = suggestion.config
        assert list(config) == ["x", "k", "s", "t", "n"]
        assert config["s"] == config["x"] + 3 and config["t"] == 2 * config["s"]
        assert set(suggestion.evaluated_params) == {"x", "n"}
    restored = resumed(configured(RandomSearcher(seed=2), _sample_from_space()), RandomSearcher())
    config = restored.next_suggestion("r0").config
    assert config["s"] == config["x"] + 3


def test_a_sample_from_that_cannot_be_computed_names_its_key():
    space = {"x": uniform(0, 1), "s": sample_from(lambda spec: spec.config.missing)}
    gen = configured(RandomSearcher(), space, num_samples=1, metric="loss", mode="min")
    with pytest.raises(ValueError, match="`s` = Function.*could not be computed"):
        gen.next_suggestion("t0")


def test_a_searcher_hears_each_end_as_ray_tells_it(tmp_path):
    """Through the Tuner: a finished trial's last result flattened ("val/loss"), a
    failed trial's end with no result and error=True, as Ray's controller calls it."""
    import fasttune as tune

    searcher = ListSearcher([1, 2], metric="val/loss")

    def trainable(config):
        tune.report({"val": {"loss": config["x"] * 1.5}})
        if config["x"] == 2:
            raise RuntimeError("boom")

    tune.Tuner(
        trainable,
        tune_config=tune.TuneConfig(search_alg=searcher, num_samples=2),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit()
    ended = {trial_id: (result, error) for trial_id, result, error in searcher.completed}
    (finished, _), (failed, failed_error) = sorted(ended.values(), key=lambda e: e[1])
    assert finished["val/loss"] == 1.5 and "val" not in finished
    assert failed is None and failed_error is True


def test_nested_suggestions_merge_deeply_and_flatten_with_slashes():
    class Nested(Searcher):
        def suggest(self, trial_id):
            return {"opt": {"lr": 0.1}}

    gen = configured(Nested(), {"opt": {"name": "sgd"}, "epochs": 2}, num_samples=1)
    suggestion = gen.next_suggestion("t0")
    assert suggestion.config == {"opt": {"name": "sgd", "lr": 0.1}, "epochs": 2}
    assert suggestion.evaluated_params == {"opt/lr": 0.1}


def test_suggest_none_means_not_now():
    class Waiting(ListSearcher):
        ready = False

        def suggest(self, trial_id):
            return super().suggest(trial_id) if self.ready else None

    searcher = Waiting([1, 2])
    gen = configured(searcher, num_samples=2)
    assert gen.next_suggestion("t0") is None
    assert not gen.is_finished()
    searcher.ready = True
    assert [s.config["x"] for s in drain(gen)] == [1, 2]


def test_suggest_returning_garbage_is_a_type_error():
    class Bad(Searcher):
        def suggest(self, trial_id):
            return [1, 2]

    with pytest.raises(TypeError, match=r"Bad.suggest\(\) must return a dict"):
        configured(Bad()).next_suggestion("t0")


def test_infinite_num_samples_runs_until_finished():
    gen = configured(ListSearcher(range(250)), num_samples=-1)
    assert gen.total_samples == -1
    assert len(drain(gen)) == 250
    assert gen.is_finished()


def test_domains_with_a_searcher_that_keeps_its_own_space():
    with pytest.raises(ValueError, match=r"`param_space` has search-space definitions \(`lr`\)"):
        configured(ListSearcher([1]), {"lr": uniform(0, 1), "epochs": 3})
    # A RandomSearcher that already has a space refuses the new one the same way.
    searcher = RandomSearcher()
    searcher.set_search_properties(None, None, {"a": uniform(0, 1)})
    with pytest.raises(ValueError, match="RandomSearcher did not take them"):
        configured(searcher, {"lr": uniform(0, 1)})


def test_grid_search_with_a_searcher_is_rejected():
    with pytest.raises(ValueError, match=r"grid_search at `opt/name`.*RandomSearcher"):
        configured(RandomSearcher(), {"opt": {"name": grid_search(["a", "b"])}})


def test_add_configurations_sets_properties_when_not_called():
    searcher = RandomSearcher(seed=0)
    gen = SearchGenerator(searcher)
    gen.add_configurations({"lr": uniform(0, 1)}, 2)
    assert set(searcher.space) == {"lr"}
    assert len(drain(gen)) == 2


def test_nothing_to_tell_leaves_set_search_properties_uncalled(tmp_path):
    """No param_space and no metric: Ray does not call it, and a searcher that takes
    whatever it is given keeps its own metric."""
    import fasttune as tune

    class Overwrites(ListSearcher):
        def set_search_properties(self, metric, mode, config, **spec):
            self._metric, self._mode = metric, mode
            return True

    searcher = Overwrites([1], metric="score", mode="max")
    grid = tune.Tuner(
        lambda config: tune.report({"score": config["x"]}),
        tune_config=tune.TuneConfig(search_alg=searcher),
        run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0),
    ).fit()
    assert (searcher.metric, searcher.mode) == ("score", "max")
    assert grid.get_best_result().metrics["score"] == 1  # ranked by the searcher's metric


def test_old_style_set_search_properties_without_spec(caplog):
    class OldStyle(RandomSearcher):
        def set_search_properties(self, metric, mode, config):
            return super().set_search_properties(metric, mode, config)

    gen = SearchGenerator(OldStyle())
    with caplog.at_level(logging.WARNING):
        assert gen.set_search_properties("m", "max", {"a": uniform(0, 1)}, name="exp") is True
    assert "does not accept **spec" in caplog.text
    gen.add_configurations({"a": uniform(0, 1)}, 1)
    assert gen.next_suggestion("t0") is not None


def test_generator_call_order_and_argument_errors():
    with pytest.raises(TypeError, match="`searcher` must be a Searcher"):
        SearchGenerator(object())
    gen = SearchGenerator(ListSearcher([1]))
    with pytest.raises(RuntimeError, match="add_configurations"):
        gen.next_suggestion("t0")
    with pytest.raises(TypeError, match="param_space"):
        gen.add_configurations("space", 1)
    gen.add_configurations({}, 1)
    with pytest.raises(RuntimeError, match="already called"):
        gen.add_configurations({}, 1)
    with pytest.raises(ValueError, match=r"SearchGenerator\.get_state"):
        SearchGenerator(ListSearcher([1])).set_state({"counter": 1})


def resumed(gen, searcher):
    blob = cloudpickle.dumps(gen.get_state())
    fresh = SearchGenerator(searcher)
    fresh.set_state(pickle.loads(blob))
    return fresh


@pytest.mark.parametrize("cut", [0, 1, 4, 7])
def test_generator_resume_equals_uninterrupted_run(cut):
    space = {"lr": uniform(0, 1), "n": randint(0, 100), "epochs": 5}

    def make():
        return configured(RandomSearcher(seed=5), space, num_samples=7, metric="loss", mode="min")

    expected = [(s.config, s.tag) for s in drain(make())]
    gen = make()
    head = [gen.next_suggestion(f"t{i}") for i in range(cut)]
    restored = resumed(gen, RandomSearcher(seed=1234))
    assert (restored.metric, restored.mode) == ("loss", "min")
    rest = drain(restored, prefix="r")
    assert [(s.config, s.tag) for s in head + rest] == expected
    assert restored.is_finished()


def test_generator_resume_after_finished_searcher():
    gen = configured(ListSearcher([1]), num_samples=5)
    drain(gen)
    restored = resumed(gen, ListSearcher([1, 2, 3]))
    assert restored.is_finished()
    assert restored.next_suggestion("t9") is None


def test_generator_resume_uses_custom_save_and_restore():
    class FileSearcher(ListSearcher):
        def get_state(self):
            raise NotImplementedError

        def save(self, checkpoint_path):
            with open(checkpoint_path, "w") as f:
                f.write(str(self.position))

        def restore(self, checkpoint_path):
            with open(checkpoint_path) as f:
                self.position = int(f.read())

    gen = configured(FileSearcher([1, 2, 3]), num_samples=3)
    gen.next_suggestion("t0")
    restored = resumed(gen, FileSearcher([1, 2, 3]))
    assert [s.config["x"] for s in drain(restored)] == [2, 3]


def test_generator_state_without_searcher_support(caplog):
    class Unsaveable(ListSearcher):
        def get_state(self):
            raise NotImplementedError

    gen = configured(Unsaveable([1, 2, 3]), num_samples=3)
    gen.next_suggestion("t0")
    with caplog.at_level(logging.WARNING):
        state = gen.get_state()
        gen.get_state()
    assert state["searcher"] is None
    assert caplog.text.count("cannot save its state") == 1
    restored = resumed(gen, Unsaveable([7, 8, 9]))
    assert [s.config["x"] for s in drain(restored)] == [7, 8]  # counter kept: 2 left


def test_generator_save_to_dir_writes_searcher_beside(tmp_path):
    gen = configured(ListSearcher([1, 2, 3]), num_samples=3)
    gen.next_suggestion("t0")
    assert not gen.has_checkpoint(str(tmp_path))
    gen.save_to_dir(str(tmp_path), "s")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "search-gen-state-s.pkl",
        "searcher-state-s.pkl",
    ]
    assert gen.has_checkpoint(str(tmp_path))
    restored = SearchGenerator(ListSearcher([1, 2, 3]))
    restored.restore_from_dir(str(tmp_path))
    assert [s.config["x"] for s in drain(restored)] == [2, 3]
    # The searcher alone can be restored from the same directory (Ray's workflow).
    alone = ListSearcher([1, 2, 3])
    alone.restore_from_dir(str(tmp_path))
    assert alone.suggest("t") == {"x": 2}


# ---------------------------------------------------------------------- helpers


def test_ensure_search_algorithm():
    assert isinstance(ensure_search_algorithm(None), BasicVariantGenerator)
    searcher = ListSearcher([1])
    wrapped = ensure_search_algorithm(searcher)
    assert isinstance(wrapped, SearchGenerator) and wrapped.searcher is searcher
    algorithm = BasicVariantGenerator()
    assert ensure_search_algorithm(algorithm) is algorithm
    with pytest.raises(TypeError, match=r"`TuneConfig.search_alg` must be .*Searcher"):
        ensure_search_algorithm("optuna")


def test_search_algorithm_base():
    class Fixed(SearchAlgorithm):
        def add_configurations(self, param_space, num_samples):
            self.config = param_space

        def next_suggestion(self, trial_id):
            self.set_finished()
            return Suggestion(self.config, "", {})

    alg = Fixed()
    assert alg.total_samples == -1 and not alg.is_finished()
    assert alg.set_search_properties("loss", "max", {}) is True
    assert alg.set_search_properties("loss", None, {}) is False
    alg.add_configurations({"a": 1}, 1)
    assert alg.next_suggestion("t0").config == {"a": 1}
    assert alg.is_finished()
    state = alg.get_state()
    fresh = Fixed()
    fresh.set_state(state)
    assert fresh.is_finished() and (fresh.metric, fresh.mode) == ("loss", "max")
    with pytest.raises(NotImplementedError, match="next_suggestion"):
        SearchAlgorithm().next_suggestion("t0")
