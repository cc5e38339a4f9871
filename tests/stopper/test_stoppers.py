"""Tests for the stoppers and make_stopper (RunConfig.stop)."""

from __future__ import annotations

import datetime
import functools
import pickle
import time

import pytest

import fasttune.stopper as stopper_pkg
from fasttune.stopper import (
    CombinedStopper,
    FunctionStopper,
    MaximumIterationStopper,
    NoopStopper,
    Stopper,
    TimeoutStopper,
    make_stopper,
)


class FakeClock:
    """A clock tests move by hand; picklable, and shared by copies made by unpickling."""

    now = 0.0

    def __call__(self):
        return FakeClock.now


@pytest.fixture
def clock():
    FakeClock.now = 1000.0
    return FakeClock()


class Always(Stopper):
    def __init__(self, value=True, all_value=False):
        self.value, self.all_value, self.calls = value, all_value, 0

    def __call__(self, trial_id, result):
        self.calls += 1
        return self.value

    def stop_all(self):
        return self.all_value


def test_exports():
    assert set(stopper_pkg.__all__) == {
        "CombinedStopper",
        "ExperimentPlateauStopper",
        "FunctionStopper",
        "MaximumIterationStopper",
        "NoopStopper",
        "Stopper",
        "TimeoutStopper",
        "TrialPlateauStopper",
        "make_stopper",
    }


def test_base_stopper():
    with pytest.raises(NotImplementedError, match="__call__"):
        Stopper()("t1", {})
    assert Stopper().stop_all() is False


def test_noop_stopper():
    assert NoopStopper()("t1", {"loss": 0}) is False
    assert NoopStopper().stop_all() is False


def test_function_stopper_calls_and_converts():
    seen = []

    def fn(trial_id, result):
        seen.append((trial_id, result))
        return result["acc"] > 0.9 and 1

    stopper = FunctionStopper(fn)
    assert stopper("t1", {"acc": 0.5}) is False
    assert stopper("t2", {"acc": 0.95}) is True
    assert seen == [("t1", {"acc": 0.5}), ("t2", {"acc": 0.95})]
    assert stopper.stop_all() is False


@pytest.mark.parametrize(
    "fn",
    [
        lambda result: True,
        lambda trial_id, result, extra: True,
        lambda *, trial_id, result: True,
    ],
)
def test_function_stopper_checks_arity(fn):
    with pytest.raises(TypeError, match=r"must accept two arguments \(trial_id, result\)"):
        FunctionStopper(fn)


def test_function_stopper_accepts_flexible_signatures():
    assert FunctionStopper(lambda *args: True)("t", {}) is True
    assert FunctionStopper(lambda trial_id, result, extra=1: False)("t", {}) is False
    partial = functools.partial(lambda limit, trial_id, result: result["i"] >= limit, 3)
    assert FunctionStopper(partial)("t", {"i": 3}) is True


def test_function_stopper_rejects_non_functions():
    with pytest.raises(TypeError, match="`function` must be a callable"):
        FunctionStopper(42)
    with pytest.raises(TypeError, match="`function` must be a callable"):
        FunctionStopper(NoopStopper())

    class LooksLikeStopper:
        def __call__(self, trial_id, result):
            return False

        def stop_all(self):
            return True

    with pytest.raises(ValueError, match="Subclass Stopper"):
        FunctionStopper(LooksLikeStopper())


def test_combined_stopper_is_or_and_every_stopper_sees_every_result():
    counter = MaximumIterationStopper(max_iter=2)
    first = Always(True)
    stopper = CombinedStopper(first, counter)
    assert stopper("t1", {}) is True
    assert stopper("t1", {}) is True
    assert counter("t1", {}) is True  # counted the two results above as well (3 >= 2)
    assert CombinedStopper(Always(False), Always(False))("t", {}) is False
    assert CombinedStopper(Always(False), Always(True))("t", {}) is True


def test_combined_stop_all():
    assert CombinedStopper(Always(all_value=False), Always(all_value=True)).stop_all() is True
    assert CombinedStopper(Always(), NoopStopper()).stop_all() is False
    assert CombinedStopper().stop_all() is False


def test_combined_rejects_non_stoppers():
    with pytest.raises(TypeError, match="argument 1 must be a Stopper"):
        CombinedStopper(NoopStopper(), lambda trial_id, result: True)


def test_maximum_iteration_counts_per_trial():
    stopper = MaximumIterationStopper(max_iter=3)
    assert [stopper("a", {}) for _ in range(2)] == [False, False]
    assert stopper("b", {}) is False
    assert stopper("a", {}) is True
    assert [stopper("b", {}), stopper("b", {})] == [False, True]
    assert stopper.stop_all() is False
    restored = pickle.loads(pickle.dumps(stopper))
    assert restored("a", {}) is True


@pytest.mark.parametrize(
    ("value", "error"), [(-1, ValueError), (2.5, TypeError), (True, TypeError)]
)
def test_maximum_iteration_validates(value, error):
    with pytest.raises(error, match="max_iter"):
        MaximumIterationStopper(value)


def test_timeout_counts_from_first_check(clock):
    stopper = TimeoutStopper(10, clock=clock)
    FakeClock.now += 100  # before the first check: start-up time is free
    assert stopper.stop_all() is False
    FakeClock.now += 6
    assert stopper.stop_all() is False
    assert stopper.budget_left == pytest.approx(4)
    assert stopper("t1", {"any": 1}) is False
    FakeClock.now += 4
    assert stopper.stop_all() is True


def test_timeout_accepts_timedelta(clock):
    stopper = TimeoutStopper(datetime.timedelta(minutes=1), clock=clock)
    stopper.stop_all()
    FakeClock.now += 59
    assert stopper.stop_all() is False
    FakeClock.now += 1
    assert stopper.stop_all() is True


def test_timeout_pickles_the_remaining_budget(clock):
    stopper = TimeoutStopper(10, clock=clock)
    stopper.stop_all()
    FakeClock.now += 3
    blob = pickle.dumps(stopper)
    FakeClock.now += 500  # downtime between crash and resume does not count
    restored = pickle.loads(blob)
    assert restored.budget_left == pytest.approx(7)
    assert restored.stop_all() is False
    FakeClock.now += 6.5
    assert restored.stop_all() is False
    FakeClock.now += 0.5
    assert restored.stop_all() is True


def test_timeout_with_default_clock_pickles():
    restored = pickle.loads(pickle.dumps(TimeoutStopper(5)))
    assert restored.stop_all() is False


def test_timeout_reads_the_wall_clock_as_ray_does(monkeypatch):
    # Ray's TimeoutStopper reads time.time(); so does the default one, at each call,
    # and a pickled copy keeps only the budget left.
    wall = [1_700_000_000.0]
    monkeypatch.setattr(time, "time", lambda: wall[0])
    stopper = TimeoutStopper(10)
    assert stopper.stop_all() is False
    wall[0] += 4
    assert stopper.budget_left == pytest.approx(6)
    restored = pickle.loads(pickle.dumps(stopper))
    wall[0] += 1000  # time between save and resume is not spent
    assert restored.stop_all() is False and restored.budget_left == pytest.approx(6)
    wall[0] += 6
    assert restored.stop_all() is True


@pytest.mark.parametrize(
    ("value", "error"), [("10", TypeError), (None, TypeError), (True, TypeError), (-1, ValueError)]
)
def test_timeout_validates(value, error):
    with pytest.raises(error, match="`timeout`"):
        TimeoutStopper(value)


def test_make_stopper_forms():
    assert make_stopper(None) == (None, {})
    criterion = {"training_iteration": 5, "loss": lambda value: value < 0.1}
    stopper, stop_dict = make_stopper(criterion)
    assert stopper is None and stop_dict == criterion and stop_dict is not criterion
    noop = NoopStopper()
    assert make_stopper(noop) == (noop, {})

    def fn(trial_id, result):
        return result["i"] > 2

    stopper, stop_dict = make_stopper(fn)
    assert isinstance(stopper, FunctionStopper) and stop_dict == {}
    assert stopper("t", {"i": 3}) is True


@pytest.mark.parametrize("bad", [5, "loss", [("loss", 1)]])
def test_make_stopper_rejects_other_values(bad):
    with pytest.raises(TypeError, match=r"`RunConfig.stop` must be a dict"):
        make_stopper(bad)


def test_make_stopper_rejects_bad_dicts_and_fake_stoppers():
    with pytest.raises(TypeError, match=r"`RunConfig\.stop` keys"):
        make_stopper({1: 2})

    class Fake:
        def __call__(self, trial_id, result):
            return False

        def stop_all(self):
            return False

    with pytest.raises(ValueError, match="Subclass Stopper"):
        make_stopper(Fake())
    with pytest.raises(TypeError, match="two arguments"):
        make_stopper(lambda result: True)
