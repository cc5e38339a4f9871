"""validate_save_restore and validate_warmstart."""

from __future__ import annotations

import threading

import pytest

import fasttune as tune
from fasttune.utils import validate_save_restore, validate_warmstart


class Good(tune.Trainable):
    def setup(self, config):
        self.n = 0

    def step(self):
        self.n += 1
        return {"n": self.n}

    def save_checkpoint(self, checkpoint_dir):
        return {"n": self.n}

    def load_checkpoint(self, checkpoint):
        self.n = checkpoint["n"]


class ForgetsState(Good):
    def load_checkpoint(self, checkpoint):
        self.n = 0


def test_good_trainable_validates():
    assert validate_save_restore(Good) is True


def test_function_trainable_validates():
    def fn(config):
        start = 0
        ckpt = tune.get_checkpoint()
        if ckpt:
            start = ckpt.get_metadata()["i"] + 1
        for i in range(start, 10):
            import tempfile

            d = tempfile.mkdtemp()
            c = tune.Checkpoint.from_directory(d)
            c.set_metadata({"i": i})
            tune.report({"i": i}, checkpoint=c)

    assert validate_save_restore(fn) is True


def test_broken_restore_is_reported():
    class CountsItself(Good):
        def save_checkpoint(self, checkpoint_dir):
            return {"n": self.n}

        def step(self):
            self.n += 1
            return {"n": self.n, "training_iteration": self.n}

    class Broken(CountsItself):
        def load_checkpoint(self, checkpoint):
            self.n = 0

    assert validate_save_restore(CountsItself) is True
    with pytest.raises(RuntimeError, match="training_iteration=1, expected 4"):
        validate_save_restore(Broken)


def test_unpicklable_trainable_is_reported():
    lock = threading.Lock()

    class Locked(Good):
        def setup(self, config):
            self.lock = lock
            self.n = 0

    with pytest.raises(RuntimeError, match="cannot be serialised"):
        validate_save_restore(Locked)


def test_validate_warmstart():
    validate_warmstart(["a", "b"], [{"a": 1, "b": 2}], [0.5])
    validate_warmstart(["a"], None, None)
    with pytest.raises(TypeError, match="points_to_evaluate must be a list"):
        validate_warmstart(["a"], {"a": 1}, None)
    with pytest.raises(ValueError, match="has 1 entries"):
        validate_warmstart(["a", "b"], [{"a": 1}], None)
    with pytest.raises(ValueError, match="one reward per point"):
        validate_warmstart(["a"], [{"a": 1}, {"a": 2}], [1.0])
