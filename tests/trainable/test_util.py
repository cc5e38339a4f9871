"""with_parameters and with_resources."""

from __future__ import annotations

import multiprocessing
import os

import cloudpickle
import pytest

import fasttune as tune
from fasttune.trainable import wrap_function


def uses_data(config, data):
    tune.report({"total": sum(data) * config["k"]})


def _run_in_child(blob, queue):
    cls = wrap_function(cloudpickle.loads(blob))
    t = cls(config={"k": 2})
    queue.put(t.train()["total"])
    t.stop()


def test_with_parameters_function_gets_the_objects(make_trainable):
    fn = tune.with_parameters(uses_data, data=[1, 2, 3])
    assert fn.__name__ == "uses_data"
    t = make_trainable(wrap_function(fn), {"k": 10})
    assert t.train()["total"] == 60


def test_with_parameters_stores_large_objects_once():
    big = list(range(200_000))
    fn = tune.with_parameters(uses_data, data=big)
    first = cloudpickle.dumps(fn)
    second = cloudpickle.dumps(fn)
    assert len(first) < len(cloudpickle.dumps(big)) / 50  # only a reference travels
    store = fn._parameter_store
    assert os.path.exists(store._path)
    mtime = os.stat(store._path).st_mtime_ns
    cloudpickle.dumps(fn)
    assert os.stat(store._path).st_mtime_ns == mtime  # not written again
    assert len(second) == len(first)

    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_run_in_child, args=(first, queue))
    proc.start()
    assert queue.get(timeout=60) == sum(big) * 2
    proc.join(timeout=60)


class _Loader:
    """What a sharing executor hands back: a picklable handle on objects stored elsewhere
    (Ray's object store for the Ray executor; a dict of this process here)."""

    shelf: dict[int, object] = {}

    def __init__(self, objects):
        self.key = id(objects)
        _Loader.shelf[self.key] = objects

    def load(self):
        return _Loader.shelf[self.key]


def test_with_parameters_objects_travel_through_a_sharing_executor_once(make_trainable):
    from fasttune.trainable.util import share_parameters_with

    big = list(range(200_000))
    fn = tune.with_parameters(uses_data, data=big)
    shared = []
    share_parameters_with(lambda objects: shared.append(objects) or _Loader(objects))
    try:
        first = cloudpickle.dumps(fn)
        second = cloudpickle.dumps(fn)
    finally:
        share_parameters_with(None)
    assert len(shared) == 1 and shared[0] == {"data": big}  # shared once
    assert len(first) < len(cloudpickle.dumps(big)) / 50 and len(second) == len(first)
    assert fn._parameter_store._path is None  # no file written
    restored = cloudpickle.loads(first)
    assert restored._parameter_store._objects is None  # as in a worker: only the loader came
    t = make_trainable(wrap_function(restored), {"k": 1})
    assert t.train()["total"] == sum(big)


def test_with_parameters_class_trainable(make_trainable):
    class Model(tune.Trainable):
        def setup(self, config, data=None, scale=1):
            self.total = sum(data) * scale

        def step(self):
            return {"total": self.total}

    cls = tune.with_parameters(Model, data=[1, 2], scale=5)
    assert cls.__name__ == "Model" and issubclass(cls, Model)
    assert make_trainable(cls).train()["total"] == 15


def test_with_parameters_on_wrapped_function(make_trainable):
    cls = tune.with_parameters(wrap_function(uses_data), data=[4])
    assert make_trainable(cls, {"k": 1}).train()["total"] == 4


def test_with_parameters_rejects_unknown_names():
    with pytest.raises(TypeError, match=r"\['other'\].*def uses_data\(config, other\)"):
        tune.with_parameters(uses_data, other=1)

    class NoKwargs(tune.Trainable):
        def setup(self, config):
            pass

    with pytest.raises(TypeError, match="NoKwargs.setup"):
        tune.with_parameters(NoKwargs, data=1)


def test_with_resources_dict_pgf_and_callable():
    def fn(config):
        pass

    as_dict = wrap_function(tune.with_resources(fn, {"cpu": 2, "gpu": 0.5}))
    assert as_dict.default_resource_request({}).required_resources == {"CPU": 2, "GPU": 0.5}

    pgf = tune.PlacementGroupFactory([{"CPU": 1, "GPU": 1}, {"GPU": 1}])
    as_pgf = wrap_function(tune.with_resources(fn, pgf))
    assert as_pgf.default_resource_request({}) == pgf

    dynamic = wrap_function(tune.with_resources(fn, lambda config: {"cpu": config["n"]}))
    assert dynamic.default_resource_request({"n": 3}).required_resources == {"CPU": 3}
    assert dynamic.__name__ == "fn"


def test_with_resources_class_and_bad_input():
    class Model(tune.Trainable):
        def step(self):
            return {}

    cls = tune.with_resources(Model, {"cpu": 4})
    assert cls.default_resource_request({}).required_resources == {"CPU": 4}
    assert Model.default_resource_request({}) is None
    with pytest.raises(TypeError, match="with_resources\\(resources=...\\)"):
        tune.with_resources(Model, 3)
    with pytest.raises(ValueError):
        tune.with_resources(Model, {"cpu": -1})


def test_with_resources_and_parameters_compose(make_trainable):
    fn = tune.with_resources(tune.with_parameters(uses_data, data=[1, 1]), {"cpu": 1})
    cls = wrap_function(fn)
    assert cls.default_resource_request({}).required_resources == {"CPU": 1}
    assert make_trainable(cls, {"k": 3}).train()["total"] == 6
