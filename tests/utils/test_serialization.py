"""Tests for diagnose_serialization and its helpers, with real unpicklable objects."""

from __future__ import annotations

import functools
import math
import threading

import cloudpickle
import pytest

from fasttune.utils.serialization import (
    captured_variables,
    diagnose_serialization,
    find_unserializable,
)

# Module globals read by trainables defined inside the tests. Those trainables are
# local functions/classes, so cloudpickle pickles them by value, globals included.
GLOBAL_LOCK = threading.Lock()
SCALE = 3.0


class ImportableBase:
    """A base class cloudpickle stores by reference: its globals never travel."""

    def helper(self) -> bool:
        return GLOBAL_LOCK.locked()


def _names(obj) -> set[str]:
    return {name for _, name, _ in captured_variables(obj)}


def test_picklable_trainable_returns_true(capsys):
    def train(config):
        return math.sqrt(config["x"]) * SCALE

    assert diagnose_serialization(train) is True
    out = capsys.readouterr().out
    assert "Trying to serialize" in out
    assert "Serialization succeeded!" in out


def test_closure_lock_is_named(capsys):
    lock = threading.Lock()
    threshold = 0.5

    def train(config):
        with lock:
            return config["x"] > threshold

    assert diagnose_serialization(train) == {"lock"}
    out = capsys.readouterr().out
    assert "Serialization failed: TypeError" in out
    assert "lock (lock) ... FAILED" in out
    assert "threshold (float) ... PASSED" in out
    assert "cannot pickle '_thread.lock' object" in out
    assert "['lock']" in out
    assert "inside the trainable" in out
    assert "fasttune.with_parameters" in out


def test_global_lock_is_named_and_passing_globals_are_not(capsys):
    def train(config):
        with GLOBAL_LOCK:
            return math.floor(config["x"] * SCALE)

    assert diagnose_serialization(train) == {"GLOBAL_LOCK"}
    out = capsys.readouterr().out
    assert "GLOBAL_LOCK (lock) ... FAILED" in out
    assert "SCALE (float) ... PASSED" in out
    assert "math (module) ... PASSED" in out


def test_global_used_only_in_a_nested_lambda_is_found():
    # inspect.getclosurevars only sees the outer code object; this one needs nested code.
    def train(config):
        check = lambda: GLOBAL_LOCK.locked()  # noqa: E731
        return check()

    assert find_unserializable(train).keys() == {"GLOBAL_LOCK"}


def test_argument_default_is_checked():
    def train(config, lock=threading.Lock()):  # noqa: B008
        return config

    assert diagnose_serialization(train) == {"lock"}


def test_failing_helper_is_traced_to_its_cause(capsys):
    event = threading.Event()

    def helper():
        return event.is_set()

    def train(config):
        return helper()

    assert diagnose_serialization(train) == {"helper"}
    assert "caused by: helper -> event" in capsys.readouterr().out


def test_partial_arguments_are_checked():
    def train(config, resource=None):
        return resource

    wrapped = functools.partial(train, resource=threading.Lock())
    assert diagnose_serialization(wrapped) == {"resource"}


def test_class_trainable_attribute_and_method_globals(capsys):
    class MyTrainable:
        lock = threading.Lock()
        lr = 0.1

        def step(self):
            with GLOBAL_LOCK:
                return {"score": SCALE}

        @staticmethod
        def helper():
            return math.pi

    assert diagnose_serialization(MyTrainable) == {"MyTrainable.lock", "GLOBAL_LOCK"}
    out = capsys.readouterr().out
    assert "MyTrainable.lock (lock) ... FAILED" in out
    assert "MyTrainable.lr (float) ... PASSED" in out


def test_importable_base_class_is_not_blamed():
    class Sub(ImportableBase):
        handle = threading.Lock()

        def step(self):
            return self.helper()

    # ImportableBase.helper reads GLOBAL_LOCK, but the base travels by reference.
    assert cloudpickle.dumps(ImportableBase)
    assert diagnose_serialization(Sub) == {"Sub.handle"}


def test_callable_instance_attributes_are_checked():
    class Scorer:
        def __init__(self):
            self.conn = threading.Lock()
            self.weight = 2

        def __call__(self, config):
            return config["x"] * self.weight

    assert diagnose_serialization(Scorer()) == {"conn"}


def test_function_attributes_are_checked():
    def train(config):
        return config

    train.shared = threading.Lock()
    assert diagnose_serialization(train) == {"shared"}


def test_nothing_found_returns_empty_set(capsys):
    def train(config):
        return config

    # cloudpickle also pickles annotations, which are not scanned: the failure is real
    # but no captured variable explains it.
    train.__annotations__ = {"config": threading.Lock()}

    assert diagnose_serialization(train) == set()
    assert "cause is elsewhere" in capsys.readouterr().out


def test_captured_variables_skips_builtins_and_unread_globals():
    def train(config):
        return len(config) + SCALE

    assert _names(train) == {"SCALE"}


def test_captured_variables_lists_kinds():
    lock = threading.Lock()

    def train(config, flag=True):
        return lock, GLOBAL_LOCK, flag

    kinds = {name: kind for kind, name, _ in captured_variables(train)}
    assert kinds == {
        "GLOBAL_LOCK": "global variable",
        "lock": "closure variable",
        "flag": "argument default",
    }


def test_find_unserializable_reports_the_error_text():
    lock = threading.RLock()

    def train(config):
        return lock

    errors = find_unserializable(train)
    assert list(errors) == ["lock"]
    assert errors["lock"].startswith("TypeError: cannot pickle")


@pytest.mark.parametrize("value", [1, "x", [1, 2], {"a": 1}])
def test_find_unserializable_is_empty_for_picklable_captures(value):
    def train(config):
        return value

    assert find_unserializable(train) == {}
