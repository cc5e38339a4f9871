"""Tests for ``Callback`` and ``CallbackList``: dispatch, hook coverage, saved state."""

from __future__ import annotations

import inspect
import logging
from typing import Any

import pytest

from fasttune.callback import HOOKS, Callback, CallbackList
from fasttune.experiment.trial import Trial


class Recorder(Callback):
    """Records every hook call as (name, hook, kwargs)."""

    def __init__(self, name: str, calls: list[tuple[str, str, dict[str, Any]]]):
        self.name = name
        self.calls = calls

    def _record(self, hook: str, info: dict[str, Any]) -> None:
        self.calls.append((self.name, hook, info))


def _make_recording_hook(hook: str) -> Any:
    def method(self: Recorder, **info: Any) -> None:
        self._record(hook, info)

    method.__name__ = hook
    return method


for _hook in HOOKS:
    setattr(Recorder, _hook, _make_recording_hook(_hook))


class ResultCounter(Callback):
    def __init__(self) -> None:
        self.count = 0

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.count += 1

    def get_state(self) -> dict[str, Any]:
        return {"count": self.count}

    def set_state(self, state: dict[str, Any]) -> None:
        self.count = state["count"]


class OtherCounter(ResultCounter):
    pass


@pytest.fixture
def trial(tmp_path) -> Trial:
    t = Trial("train", trial_id="abcde_00000", config={"x": 1}, experiment_path=str(tmp_path))
    t.init_local_path()
    return t


def test_base_callback_defines_every_ray_hook_as_noop(trial: Trial) -> None:
    cb = Callback()
    for hook in HOOKS:
        assert callable(getattr(cb, hook))
    cb.setup(stop=None, num_samples=1, total_num_samples=1)
    assert cb.on_trial_result(iteration=1, trials=[trial], trial=trial, result={}) is None
    assert cb.on_checkpoint(iteration=1, trials=[trial], trial=trial, checkpoint=None) is None
    assert cb.on_experiment_end(trials=[trial]) is None
    assert cb.get_state() is None


def test_hook_signatures_match_ray() -> None:
    params = {h: list(inspect.signature(getattr(Callback, h)).parameters) for h in HOOKS}
    assert params["setup"] == ["self", "stop", "num_samples", "total_num_samples", "info"]
    assert params["on_step_begin"] == ["self", "iteration", "trials", "info"]
    assert params["on_trial_result"] == ["self", "iteration", "trials", "trial", "result", "info"]
    assert params["on_checkpoint"] == ["self", "iteration", "trials", "trial", "checkpoint", "info"]
    assert params["on_experiment_end"] == ["self", "trials", "info"]
    for hook in ("on_trial_start", "on_trial_restore", "on_trial_save", "on_trial_complete",
                 "on_trial_recover", "on_trial_error"):  # fmt: skip
        assert params[hook] == ["self", "iteration", "trials", "trial", "info"]


def test_every_hook_reaches_every_callback_in_order(trial: Trial) -> None:
    calls: list[tuple[str, str, dict[str, Any]]] = []
    cbs = CallbackList([Recorder("a", calls), Recorder("b", calls)])
    for hook in HOOKS:
        getattr(cbs, hook)(iteration=3, trials=[trial], trial=trial)
    assert [(n, h) for n, h, _ in calls] == [(n, h) for h in HOOKS for n in ("a", "b")]
    assert all(info["trial"] is trial and info["iteration"] == 3 for _, _, info in calls)


def test_hooks_are_only_dispatched_to_callbacks_that_override_them(trial: Trial) -> None:
    counter = ResultCounter()
    plain = Callback()
    cbs = CallbackList([plain, counter])
    assert cbs.listeners("on_trial_result") == [counter]
    assert cbs.listeners("on_trial_start") == []
    for i in range(5):
        cbs.on_trial_result(iteration=i, trials=[trial], trial=trial, result={"i": i})
    cbs.on_trial_start(iteration=0, trials=[trial], trial=trial)  # nobody listens: no error
    assert counter.count == 5


def test_instance_level_override_is_dispatched(trial: Trial) -> None:
    seen: list[int] = []
    cb = Callback()
    cb.on_trial_result = lambda **info: seen.append(info["iteration"])  # type: ignore[method-assign]
    cbs = CallbackList([cb])
    cbs.on_trial_result(iteration=7, trials=[trial], trial=trial, result={})
    assert seen == [7]


def test_exception_in_a_callback_propagates(trial: Trial) -> None:
    class Boom(Callback):
        def on_trial_start(self, iteration, trials, trial, **info):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        CallbackList([Boom(), ResultCounter()]).on_trial_start(
            iteration=0, trials=[trial], trial=trial
        )


def test_non_callbacks_are_rejected_with_a_helpful_message() -> None:
    with pytest.raises(TypeError, match="pass an instance"):
        CallbackList([ResultCounter])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="Callback instances"):
        CallbackList([object()])  # type: ignore[list-item]


def test_listeners_rejects_unknown_hook() -> None:
    with pytest.raises(ValueError, match="on_trial_finish"):
        CallbackList([]).listeners("on_trial_finish")


def test_callbacks_property_len_and_iter() -> None:
    a, b = ResultCounter(), Callback()
    cbs = CallbackList([a, b])
    assert cbs.callbacks == [a, b] and len(cbs) == 2 and list(cbs) == [a, b]


def _count(cbs: CallbackList, trial: Trial, n: int) -> None:
    for i in range(n):
        cbs.on_trial_result(iteration=i, trials=[trial], trial=trial, result={})


def test_state_round_trip_by_position(trial: Trial) -> None:
    first, second = ResultCounter(), ResultCounter()
    cbs = CallbackList([first, Callback(), second])
    _count(CallbackList([first]), trial, 2)
    _count(CallbackList([second]), trial, 5)
    state = cbs.get_state()
    assert [e["index"] for e in state] == [0, 2]
    assert [e["state"] for e in state] == [{"count": 2}, {"count": 5}]

    restored = [ResultCounter(), Callback(), ResultCounter()]
    CallbackList(restored).set_state(state)
    assert [restored[0].count, restored[2].count] == [2, 5]


def test_state_follows_class_when_positions_moved(trial: Trial) -> None:
    counter, other = ResultCounter(), OtherCounter()
    _count(CallbackList([counter]), trial, 3)
    _count(CallbackList([other]), trial, 4)
    state = CallbackList([counter, other]).get_state()

    new_counter, new_other = ResultCounter(), OtherCounter()
    CallbackList([Callback(), new_other, new_counter]).set_state(state)
    assert (new_counter.count, new_other.count) == (3, 4)


def test_state_without_matching_callback_is_skipped_with_warning(trial: Trial, caplog) -> None:
    counter = ResultCounter()
    _count(CallbackList([counter]), trial, 1)
    state = CallbackList([counter]).get_state()
    with caplog.at_level(logging.WARNING, logger="fasttune.callback"):
        CallbackList([Callback()]).set_state(state)
    assert "ResultCounter" in caplog.text


def test_no_state_gives_empty_list_and_none_restores_nothing() -> None:
    cbs = CallbackList([Callback(), ResultCounter()])
    assert cbs.get_state() == [
        {"index": 1, "class": f"{__name__}.ResultCounter", "state": {"count": 0}}
    ]
    assert CallbackList([Callback()]).get_state() == []
    CallbackList([ResultCounter()]).set_state(None)


class _Boom(ValueError):
    pass


def _fails(config: dict[str, Any]) -> None:
    import fasttune as tune

    tune.report({"x": 1})
    raise _Boom("broken at 1")


def test_a_callback_reads_a_failed_trial_as_ray_s_trial_offers_it(tmp_path: Any) -> None:
    """get_error (the report's text), get_pickled_error (the exception) and the
    experiment's directory, as Ray's Trial has them."""
    import fasttune as tune

    seen: dict[str, Any] = {}

    class Reads(Callback):
        def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
            seen["text"] = trial.get_error()
            seen["error"] = trial.get_pickled_error()
            seen["dir_name"] = trial.experiment_dir_name
            seen["local"] = trial.local_experiment_path

    tune.Tuner(
        _fails,
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), name="exp", callbacks=[Reads()], verbose=0
        ),
    ).fit()
    assert "broken at 1" in seen["text"] and "_Boom" in seen["text"]
    assert isinstance(seen["error"], ValueError) and "broken at 1" in str(seen["error"])
    assert seen["dir_name"] == "exp" and seen["local"] == str(tmp_path / "exp")
