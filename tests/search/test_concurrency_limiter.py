"""ConcurrencyLimiter: the bound holds (measured on real workers), batch mode, forwarding, state."""

from __future__ import annotations

import random
import time

import pytest

import fasttune as tune
from fasttune.search.concurrency_limiter import ConcurrencyLimiter
from fasttune.search.search_generator import SearchGenerator
from fasttune.search.searcher import Searcher


class RecordingSearcher(Searcher):
    """Suggests {"i": 0}, {"i": 1}, ... (then FINISHED after ``limit``) and records calls."""

    def __init__(self, metric="loss", mode="min", limit=None):
        super().__init__(metric=metric, mode=mode)
        self.limit = limit
        self.n = 0
        self.suggested: list[str] = []
        self.results: list[tuple[str, dict]] = []
        self.completed: list[tuple[str, dict | None, bool]] = []
        self.points: list[tuple[dict, float]] = []
        self.properties: list[tuple] = []

    def set_search_properties(self, metric, mode, config, **spec):
        self.properties.append((metric, mode, config))
        self._metric = self._metric or metric
        self._mode = self._mode or mode
        return True

    def suggest(self, trial_id):
        if self.limit is not None and self.n >= self.limit:
            return Searcher.FINISHED
        self.suggested.append(trial_id)
        self.n += 1
        return {"i": self.n - 1}

    def on_trial_result(self, trial_id, result):
        self.results.append((trial_id, result))

    def on_trial_complete(self, trial_id, result=None, error=False):
        self.completed.append((trial_id, result, error))

    def add_evaluated_point(
        self, parameters, value, error=False, pruned=False, intermediate_values=None
    ):
        self.points.append((parameters, value))


class SelfLimiting(RecordingSearcher):
    """A searcher that enforces concurrency itself (set_max_concurrency returns True)."""

    def __init__(self):
        super().__init__()
        self.own_limit = None

    def set_max_concurrency(self, max_concurrent):
        self.own_limit = max_concurrent
        return True


class NoneSometimes(RecordingSearcher):
    """Returns None on every other call (nothing to suggest right now)."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def suggest(self, trial_id):
        self.calls += 1
        if self.calls % 2 == 0:
            return None
        return super().suggest(trial_id)


# ---------------------------------------------------------------------- validation


@pytest.mark.parametrize("bad", [0, -3])
def test_max_concurrent_below_one_is_rejected(bad):
    with pytest.raises(ValueError, match=rf"`max_concurrent` must be >= 1, got {bad}"):
        ConcurrencyLimiter(RecordingSearcher(), max_concurrent=bad)


@pytest.mark.parametrize("bad", [1.5, "2", True, None])
def test_max_concurrent_must_be_an_int(bad):
    with pytest.raises(TypeError, match="`max_concurrent` must be an int"):
        ConcurrencyLimiter(RecordingSearcher(), max_concurrent=bad)


def test_searcher_must_be_a_searcher():
    from fasttune.search.basic_variant import BasicVariantGenerator

    with pytest.raises(TypeError, match="`searcher` must be a Searcher.*BasicVariantGenerator"):
        ConcurrencyLimiter(BasicVariantGenerator(), max_concurrent=2)


def test_set_max_concurrency_validates_and_applies():
    limiter = ConcurrencyLimiter(RecordingSearcher(), max_concurrent=1)
    assert limiter.set_max_concurrency(2) is True
    assert [limiter.suggest(t) for t in "abc"] == [{"i": 0}, {"i": 1}, None]
    with pytest.raises(ValueError):
        limiter.set_max_concurrency(0)


# ---------------------------------------------------------------------- the bound


def test_suggest_returns_none_at_the_limit_without_asking_the_searcher():
    inner = RecordingSearcher()
    limiter = ConcurrencyLimiter(inner, max_concurrent=2)
    assert limiter.suggest("a") == {"i": 0}
    assert limiter.suggest("b") == {"i": 1}
    assert limiter.suggest("c") is None
    assert limiter.suggest("c") is None
    assert inner.suggested == ["a", "b"]
    limiter.on_trial_complete("b", {"loss": 1.0})
    assert limiter.suggest("c") == {"i": 2}
    assert limiter.live_trials == {"a", "c"}


@pytest.mark.parametrize("batch", [False, True])
@pytest.mark.parametrize("max_concurrent", [1, 2, 3])
def test_bound_holds_under_random_interleaving(max_concurrent, batch):
    rng = random.Random(max_concurrent * 10 + batch)
    inner = RecordingSearcher()
    limiter = ConcurrencyLimiter(inner, max_concurrent=max_concurrent, batch=batch)
    running: list[str] = []  # handed out, not yet completed
    next_id = peak = 0
    for _ in range(400):
        if running and rng.random() < 0.45:
            trial_id = running.pop(rng.randrange(len(running)))
            limiter.on_trial_complete(trial_id, {"loss": 0.0}, error=rng.random() < 0.1)
        elif limiter.suggest(f"t{next_id}") is not None:
            running.append(f"t{next_id}")
            next_id += 1
        peak = max(peak, len(running))
        assert len(running) <= max_concurrent
        assert len(limiter.live_trials) <= max_concurrent
    assert peak == max_concurrent  # the limit was reached, not just respected
    assert next_id > 50  # and trials kept flowing


def test_none_and_finished_take_no_slot():
    inner = NoneSometimes()
    limiter = ConcurrencyLimiter(inner, max_concurrent=2)
    assert limiter.suggest("a") == {"i": 0}
    assert limiter.suggest("b") is None  # the searcher had nothing
    assert limiter.suggest("b") == {"i": 1}
    assert limiter.live_trials == {"a", "b"}

    finished = ConcurrencyLimiter(RecordingSearcher(limit=1), max_concurrent=3)
    assert finished.suggest("a") == {"i": 0}
    assert finished.suggest("b") == Searcher.FINISHED
    assert finished.live_trials == {"a"}


def test_repeated_or_unknown_completions_free_no_extra_slot():
    inner = RecordingSearcher()
    limiter = ConcurrencyLimiter(inner, max_concurrent=2)
    limiter.suggest("a")
    limiter.suggest("b")
    limiter.on_trial_complete("a", {"loss": 1.0})
    limiter.on_trial_complete("a", {"loss": 1.0})
    limiter.on_trial_complete("stranger", {"loss": 1.0})
    assert limiter.suggest("c") == {"i": 2}
    assert limiter.suggest("d") is None
    assert [tid for tid, _, _ in inner.completed] == ["a"]


def test_a_live_trial_id_cannot_be_suggested_again():
    limiter = ConcurrencyLimiter(RecordingSearcher(), max_concurrent=2)
    limiter.suggest("a")
    with pytest.raises(ValueError, match="'a' is already live"):
        limiter.suggest("a")


def test_errors_are_forwarded_and_free_the_slot():
    inner = RecordingSearcher()
    limiter = ConcurrencyLimiter(inner, max_concurrent=1)
    limiter.suggest("a")
    limiter.on_trial_complete("a", None, error=True)
    assert inner.completed == [("a", None, True)]
    assert limiter.suggest("b") == {"i": 1}


# ---------------------------------------------------------------------- batch mode


def test_batch_waits_for_the_whole_batch_and_reports_in_completion_order():
    inner = RecordingSearcher()
    limiter = ConcurrencyLimiter(inner, max_concurrent=3, batch=True)
    assert [limiter.suggest(t) for t in "abc"] == [{"i": 0}, {"i": 1}, {"i": 2}]
    limiter.on_trial_complete("b", {"loss": 2.0})
    limiter.on_trial_complete("a", {"loss": 1.0}, error=True)
    assert inner.completed == []  # nothing learnt mid-batch
    assert limiter.suggest("d") is None  # and no slot free yet
    limiter.on_trial_complete("c", {"loss": 3.0})
    assert inner.completed == [
        ("b", {"loss": 2.0}, False),
        ("a", {"loss": 1.0}, True),
        ("c", {"loss": 3.0}, False),
    ]
    assert limiter.live_trials == set()
    assert [limiter.suggest(t) for t in "defg"] == [{"i": 3}, {"i": 4}, {"i": 5}, None]


def test_batch_counts_a_partial_batch_when_the_searcher_ran_dry():
    inner = NoneSometimes()
    limiter = ConcurrencyLimiter(inner, max_concurrent=3, batch=True)
    assert limiter.suggest("a") == {"i": 0}
    assert limiter.suggest("b") is None  # batch is just {"a"}
    limiter.on_trial_complete("a", {"loss": 1.0})
    assert [tid for tid, _, _ in inner.completed] == ["a"]


# ---------------------------------------------------------------------- forwarding


def test_metric_mode_and_space_reach_the_wrapped_searcher():
    inner = RecordingSearcher(metric=None, mode=None)
    limiter = ConcurrencyLimiter(inner, max_concurrent=2)
    assert (limiter.metric, limiter.mode) == (None, None)
    space = {"x": tune.uniform(0, 1)}
    assert limiter.set_search_properties("acc", "max", space) is True
    assert inner.properties == [("acc", "max", space)]
    assert (limiter.metric, limiter.mode) == ("acc", "max")


def test_results_and_points_are_forwarded():
    inner = RecordingSearcher()
    limiter = ConcurrencyLimiter(inner, max_concurrent=1)
    limiter.suggest("a")
    limiter.on_trial_result("a", {"loss": 3.0})
    limiter.add_evaluated_point({"i": 9}, 0.5)
    assert inner.results == [("a", {"loss": 3.0})]
    assert inner.points == [({"i": 9}, 0.5)]


def test_a_searcher_that_limits_itself_takes_over():
    inner = SelfLimiting()
    limiter = ConcurrencyLimiter(inner, max_concurrent=2)
    assert inner.own_limit == 2
    # The limiter steps aside: it passes every call through.
    assert [limiter.suggest(t) for t in "abc"] == [{"i": 0}, {"i": 1}, {"i": 2}]
    limiter.on_trial_complete("c", {"loss": 1.0})
    assert inner.completed == [("c", {"loss": 1.0}, False)]
    limiter.set_max_concurrency(5)
    assert inner.own_limit == 5


def test_pause_hooks_are_forwarded_when_the_searcher_has_them():
    class Pausing(RecordingSearcher):
        def __init__(self):
            super().__init__()
            self.events = []

        def on_pause(self, trial_id):
            self.events.append(("pause", trial_id))

        def on_unpause(self, trial_id):
            self.events.append(("unpause", trial_id))

    inner = Pausing()
    limiter = ConcurrencyLimiter(inner, max_concurrent=1)
    limiter.on_pause("a")
    limiter.on_unpause("a")
    assert inner.events == [("pause", "a"), ("unpause", "a")]
    ConcurrencyLimiter(RecordingSearcher(), 1).on_pause("a")  # no hook: nothing happens


# ---------------------------------------------------------------------- state


def _drive(limiter, steps):
    """Apply ("s", id) / ("c", id) steps; return what each suggest returned."""
    out = []
    for kind, trial_id in steps:
        if kind == "s":
            out.append(limiter.suggest(trial_id))
        else:
            limiter.on_trial_complete(trial_id, {"loss": float(len(trial_id))})
    return out


@pytest.mark.parametrize("batch", [False, True])
def test_state_roundtrip_continues_like_the_uninterrupted_run(batch):
    before = [("s", "a"), ("s", "b"), ("c", "a"), ("s", "c")]
    after = [("s", "d"), ("c", "b"), ("s", "d"), ("c", "c"), ("s", "e"), ("s", "f")]

    whole = ConcurrencyLimiter(RecordingSearcher(), max_concurrent=2, batch=batch)
    expected = _drive(whole, before + after)

    first = ConcurrencyLimiter(RecordingSearcher(), max_concurrent=2, batch=batch)
    got = _drive(first, before)
    state = first.get_state()
    inner = RecordingSearcher()
    second = ConcurrencyLimiter(inner, max_concurrent=2, batch=batch)
    second.set_state(state)
    got += _drive(second, after)
    assert got == expected
    assert inner.n == whole.searcher.n  # the wrapped searcher's state came back too
    assert inner.completed == whole.searcher.completed


def test_save_to_dir_and_restore_from_dir(tmp_path):
    limiter = ConcurrencyLimiter(RecordingSearcher(), max_concurrent=2, batch=True)
    limiter.suggest("a")
    limiter.suggest("b")
    limiter.on_trial_complete("a", {"loss": 1.0})
    assert limiter.save_to_dir(str(tmp_path)) is True
    restored = ConcurrencyLimiter(RecordingSearcher(), max_concurrent=2, batch=True)
    restored.restore_from_dir(str(tmp_path))
    assert restored.live_trials == {"a", "b"}
    assert restored.cached_results == {"a": ({"loss": 1.0}, False)}
    assert restored.searcher.n == 2
    restored.on_trial_complete("b", {"loss": 2.0})
    assert [c[0] for c in restored.searcher.completed] == ["a", "b"]


def test_state_from_something_else_is_rejected():
    limiter = ConcurrencyLimiter(RecordingSearcher(), max_concurrent=2)
    with pytest.raises(ValueError, match="ConcurrencyLimiter.get_state"):
        limiter.set_state({"live_trials": []})


def test_search_generator_state_carries_the_limiter():
    gen = SearchGenerator(ConcurrencyLimiter(RecordingSearcher(), max_concurrent=1))
    gen.set_search_properties(None, None, {})
    gen.add_configurations({}, num_samples=5)
    assert gen.next_suggestion("a").config == {"i": 0}
    state = gen.get_state()
    fresh = SearchGenerator(ConcurrencyLimiter(RecordingSearcher(), max_concurrent=1))
    fresh.set_state(state)
    assert fresh.next_suggestion("b") is None  # "a" is still live after the restore
    fresh.on_trial_complete("a", {"loss": 0.0})
    assert fresh.next_suggestion("b").config == {"i": 1}


# ---------------------------------------------------------------------- end to end


def timed(config):
    start = time.time()
    time.sleep(config["sleep"])
    tune.report({"loss": float(config["i"]), "start": start, "end": time.time()})


def _max_overlap(results) -> int:
    events = []
    for r in results:
        events += [(r.metrics["start"], 1), (r.metrics["end"], -1)]
    running = peak = 0
    for _, delta in sorted(events):  # an end sorts before a start at the same instant
        running += delta
        peak = max(peak, running)
    return peak


def _fit(tmp_path, search_alg, num_samples, sleep=0.5, name="exp"):
    return tune.Tuner(
        timed,
        param_space={"sleep": sleep},
        tune_config=tune.TuneConfig(search_alg=search_alg, num_samples=num_samples),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name=name, verbose=0),
    ).fit()


@pytest.fixture
def four_cpus():
    tune.init(num_cpus=4, num_gpus=0)
    yield
    tune.shutdown()


@pytest.mark.usefixtures("four_cpus")
def test_tuner_never_runs_more_than_max_concurrent_trials(tmp_path):
    inner = RecordingSearcher()
    grid = _fit(tmp_path, ConcurrencyLimiter(inner, max_concurrent=2), num_samples=8)
    assert grid.num_terminated == 8 and not grid.errors
    assert _max_overlap(grid) == 2  # bound held, and was reached
    assert sorted(r.config["i"] for r in grid) == list(range(8))
    assert len(inner.completed) == 8


@pytest.mark.usefixtures("four_cpus")
def test_without_the_limiter_resources_alone_allow_more(tmp_path):
    # The control for the test above: the same run unwrapped overlaps more than 2.
    grid = _fit(tmp_path, RecordingSearcher(), num_samples=8)
    assert _max_overlap(grid) > 2


@pytest.mark.usefixtures("four_cpus")
def test_tuner_batch_mode_runs_in_waves(tmp_path):
    inner = RecordingSearcher()
    limiter = ConcurrencyLimiter(inner, max_concurrent=3, batch=True)
    grid = _fit(tmp_path, limiter, num_samples=9, sleep=0.4)
    assert grid.num_terminated == 9
    by_i = {r.config["i"]: r.metrics for r in grid}
    for wave in range(1, 3):
        previous = [by_i[i] for i in range(3 * wave - 3, 3 * wave)]
        current = [by_i[i] for i in range(3 * wave, 3 * wave + 3)]
        assert min(m["start"] for m in current) >= max(m["end"] for m in previous)
    assert _max_overlap(grid) == 3
    # The searcher heard each wave only once it was complete: in blocks of 3.
    waves = [sorted(r["loss"] for _, r, _ in inner.completed[k : k + 3]) for k in (0, 3, 6)]
    assert waves == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0]]


@pytest.mark.usefixtures("four_cpus")
def test_tuner_with_a_real_searcher_and_the_tuners_metric(tmp_path):
    from fasttune.search.optuna import OptunaSearch

    def quadratic(config):
        start = time.time()
        time.sleep(0.2)
        tune.report({"loss": (config["x"] - 0.3) ** 2, "start": start, "end": time.time()})

    optuna_search = OptunaSearch(seed=0)  # metric, mode and space come from the Tuner
    grid = tune.Tuner(
        quadratic,
        param_space={"x": tune.uniform(-1, 1)},
        tune_config=tune.TuneConfig(
            metric="loss",
            mode="min",
            search_alg=ConcurrencyLimiter(optuna_search, max_concurrent=2),
            num_samples=6,
        ),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="exp", verbose=0),
    ).fit()
    assert grid.num_terminated == 6 and not grid.errors
    assert _max_overlap(grid) <= 2
    assert (optuna_search.metric, optuna_search.mode) == ("loss", "min")
    best = grid.get_best_result()
    assert best.metrics["loss"] == min(r.metrics["loss"] for r in grid)
