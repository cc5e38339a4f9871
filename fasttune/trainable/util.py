"""``with_parameters`` and ``with_resources``: wrap a trainable without changing it."""

from __future__ import annotations

import atexit
import functools
import inspect
import os
import uuid
from collections.abc import Callable
from typing import Any

import cloudpickle

from fasttune.storage.filesystem import atomic_write_bytes
from fasttune.trainable.trainable import Trainable

_loaded_parameters: dict[str, dict[str, Any]] = {}
_store_dir: str | None = None
# Set by an executor whose workers cannot read this machine's files (Ray): called once
# per store with its objects, it returns a picklable loader whose ``load()`` gives them
# back in any worker.
_share: Callable[[dict[str, Any]], Any] | None = None


def share_parameters_with(share: Callable[[dict[str, Any]], Any] | None) -> None:
    """Make :func:`with_parameters` objects travel through ``share`` (None: a local file).

    The Ray executor passes a function that puts the objects in Ray's object store
    once and returns a loader (picklable, with a ``load()`` method) that fetches them
    in each actor; the local executors leave it unset, and the objects are written
    once to a file that workers of this machine read.
    """
    global _share
    _share = share


def _parameter_store_dir() -> str:
    global _store_dir
    if _store_dir is None:
        import shutil  # here: not on a worker's way to its trial
        import tempfile

        _store_dir = tempfile.mkdtemp(prefix="fasttune_params_")
        atexit.register(shutil.rmtree, _store_dir, True)
    return _store_dir


class ParameterStore:
    """Large objects shared by every trial, serialised once.

    In the creating process the objects are held by reference. When the store is
    pickled (to reach a worker process), the objects are written once to a file and
    only the file's path travels; each process loads them once and caches them. Under
    an executor that set :func:`share_parameters_with` (Ray), they are shared through
    it once instead, and only its loader travels.
    """

    def __init__(self, objects: dict[str, Any]):
        self.key = uuid.uuid4().hex
        self._objects: dict[str, Any] | None = objects
        self._path: str | None = None
        self._loader: Any = None
        self._shared_by: Any = None  # the share function the loader came from

    def get(self) -> dict[str, Any]:
        if self._objects is not None:
            return self._objects
        cached = _loaded_parameters.get(self.key)
        if cached is None:
            if self._loader is not None:
                cached = self._loader.load()
            else:
                assert self._path is not None
                with open(self._path, "rb") as f:
                    cached = cloudpickle.load(f)
            _loaded_parameters[self.key] = cached
        return cached

    def __getstate__(self) -> dict[str, Any]:
        if _share is not None:
            if self._loader is None or self._shared_by is not _share:
                self._loader, self._shared_by = _share(self.get()), _share
            return {"key": self.key, "loader": self._loader}
        if self._path is None:
            path = os.path.join(_parameter_store_dir(), f"{self.key}.pkl")
            atomic_write_bytes(path, cloudpickle.dumps(self.get()))
            self._path = path
        return {"key": self.key, "path": self._path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.key = state["key"]
        self._path = state.get("path")
        self._loader = state.get("loader")
        self._shared_by = None
        self._objects = _loaded_parameters.get(self.key)


def _check_accepts(func: Callable[..., Any], names: list[str], what: str) -> None:
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    missing = [n for n in names if n not in params]
    if missing:
        raise TypeError(
            f"with_parameters() got {missing}, but {what} takes no parameter of that name. "
            f"Add them to its signature, e.g. def {getattr(func, '__name__', 'fn')}"
            f"(config, {', '.join(missing)})."
        )


def with_parameters(trainable: Any, **kwargs: Any) -> Any:
    """Pass large objects to a trainable once, instead of through every config.

    Functions are called as ``trainable(config, **kwargs)``; class trainables get
    ``setup(config, **kwargs)``.

    Example:
        >>> def train_fn(config, data):
        ...     return {"n": len(data)}
        >>> fn = with_parameters(train_fn, data=list(range(1000)))
        >>> fn({})
        {'n': 1000}
    """
    store = ParameterStore(kwargs)
    names = list(kwargs)
    if isinstance(trainable, type) and issubclass(trainable, Trainable):
        from fasttune.trainable.function_trainable import FunctionTrainable, wrap_function

        if issubclass(trainable, FunctionTrainable):
            train_func = with_parameters(trainable._train_func, **kwargs)
            return wrap_function(train_func, name=trainable._name)
        _check_accepts(trainable.setup, ["self", "config", *names], f"{trainable.__name__}.setup")

        def setup(self: Trainable, config: dict[str, Any]) -> None:
            trainable.setup(self, config, **store.get())

        return type(trainable.__name__, (trainable,), {"setup": setup, "_parameter_store": store})
    if not callable(trainable):
        raise TypeError(
            "with_parameters(trainable=...) expects a function or a Trainable class, got "
            f"{type(trainable).__name__}"
        )
    _check_accepts(trainable, ["config", *names], getattr(trainable, "__name__", "the function"))

    @functools.wraps(trainable)
    def inner(config: dict[str, Any]) -> Any:
        return trainable(config, **store.get())

    inner._parameter_store = store  # type: ignore[attr-defined]
    if hasattr(inner, "__wrapped__"):
        del inner.__wrapped__  # keep signature introspection on (config)
    return inner


def _to_placement_group_factory(value: Any) -> Any:
    from fasttune.execution.placement_groups import normalize_resources

    return normalize_resources(value)


def resource_request_method(resources: Any) -> classmethod:
    """A ``default_resource_request`` classmethod returning ``resources`` (or its value)."""
    if (
        callable(resources)
        and not isinstance(resources, dict)
        and not hasattr(resources, "bundles")
    ):

        def request(cls: type, config: dict[str, Any]) -> Any:
            return _to_placement_group_factory(resources(config))

    else:
        fixed = _to_placement_group_factory(resources)

        def request(cls: type, config: dict[str, Any]) -> Any:
            return fixed

    return classmethod(request)


def with_resources(trainable: Any, resources: Any) -> Any:
    """Attach a resource request to a trainable.

    Args:
        trainable: A function or a Trainable class.
        resources: A dict such as ``{"cpu": 2, "gpu": 1}``, a ``PlacementGroupFactory``,
            or a callable ``config -> dict | PlacementGroupFactory``.

    Example:
        >>> def train_fn(config):
        ...     pass
        >>> fn = with_resources(train_fn, {"cpu": 2})
    """
    if not (isinstance(resources, dict) or callable(resources) or hasattr(resources, "bundles")):
        raise TypeError(
            "with_resources(resources=...) takes a dict like {'cpu': 2, 'gpu': 1}, a "
            f"PlacementGroupFactory or a callable of config, got {type(resources).__name__}"
        )
    method = resource_request_method(resources)
    if isinstance(trainable, type) and issubclass(trainable, Trainable):
        return type(trainable.__name__, (trainable,), {"default_resource_request": method})
    if not callable(trainable):
        raise TypeError(
            "with_resources(trainable=...) expects a function or a Trainable class, got "
            f"{type(trainable).__name__}"
        )

    @functools.wraps(trainable)
    def inner(config: dict[str, Any]) -> Any:
        return trainable(config)

    inner._resources = resources  # type: ignore[attr-defined]
    if hasattr(inner, "__wrapped__"):
        del inner.__wrapped__
    return inner
