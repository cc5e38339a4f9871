"""Read-only views of a partly resolved spec, handed to ``sample_from`` functions.

A view allows both ``spec.config.a`` and ``config["a"]``. Reading a value that is
still a domain or a grid axis raises :class:`RecursiveDependencyError`, which the
variant generator catches to retry the function once that value is resolved.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from fasttune.search._domains import Domain

_DATA = "_spec_view_data"
_PATH = "_spec_view_path"


class RecursiveDependencyError(ValueError):
    """A ``sample_from`` function read a value that is not resolved (yet, or ever)."""


def is_grid_dict(value: Any) -> bool:
    """Whether ``value`` is ``{"grid_search": [...]}``, Ray Tune's grid marker."""
    return isinstance(value, dict) and len(value) == 1 and "grid_search" in value


def is_unresolved(value: Any) -> bool:
    """Whether ``value`` still has to be sampled or expanded."""
    return isinstance(value, Domain) or is_grid_dict(value)


def contains_unresolved(value: Any) -> bool:
    """Whether ``value`` is unresolved or holds an unresolved value at any depth."""
    if is_unresolved(value):
        return True
    if isinstance(value, dict):
        return any(contains_unresolved(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return any(contains_unresolved(item) for item in value)
    return False


def path_str(path: tuple[Any, ...]) -> str:
    """``("a", 0, "b")`` -> ``"a/0/b"``, for messages."""
    return "/".join(str(part) for part in path)


def _guard(value: Any, path: tuple[Any, ...]) -> Any:
    if is_unresolved(value):
        raise RecursiveDependencyError(f"`{path_str(path)}` is not resolved yet (it is {value!r}).")
    if isinstance(value, dict):
        return SpecView(value, path)
    if isinstance(value, (list, tuple)) and contains_unresolved(value):
        return SequenceView(value, path)
    return value


class SpecView(Mapping):
    """A read-only mapping over a spec dict with attribute access to its keys.

    Keys win over method names, so ``spec.config.items`` reads a key named
    ``items`` if there is one (as Ray Tune's spec objects do).
    """

    __slots__ = (_DATA, _PATH)

    def __init__(self, data: Mapping[Any, Any], path: tuple[Any, ...] = ()) -> None:
        object.__setattr__(self, _DATA, data)
        object.__setattr__(self, _PATH, path)

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("__") and name not in (_DATA, _PATH):
            data = object.__getattribute__(self, _DATA)
            if name in data:
                path = object.__getattribute__(self, _PATH)
                return _guard(data[name], (*path, name))
        return object.__getattribute__(self, name)

    def __getattr__(self, name: str) -> Any:
        data = object.__getattribute__(self, _DATA)
        where = path_str(object.__getattribute__(self, _PATH)) or "the spec"
        raise AttributeError(f"{where} has no key {name!r}; keys are {sorted(map(str, data))}.")

    def __setattr__(self, name: str, value: Any) -> None:
        raise TypeError("The spec passed to a sample_from function is read-only.")

    def __getitem__(self, key: Any) -> Any:
        data = object.__getattribute__(self, _DATA)
        return _guard(data[key], (*object.__getattribute__(self, _PATH), key))

    def __contains__(self, key: object) -> bool:
        return key in object.__getattribute__(self, _DATA)

    def __iter__(self) -> Iterator[Any]:
        return iter(object.__getattribute__(self, _DATA))

    def __len__(self) -> int:
        return len(object.__getattribute__(self, _DATA))

    def __repr__(self) -> str:
        return f"SpecView({object.__getattribute__(self, _DATA)!r})"


class SequenceView(Sequence):
    """A read-only list over a spec list that still holds unresolved values."""

    __slots__ = (_DATA, _PATH)

    def __init__(self, data: Sequence[Any], path: tuple[Any, ...] = ()) -> None:
        object.__setattr__(self, _DATA, data)
        object.__setattr__(self, _PATH, path)

    def __getitem__(self, index: Any) -> Any:
        data = object.__getattribute__(self, _DATA)
        path = object.__getattribute__(self, _PATH)
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(data)))]
        if index < 0:
            index += len(data)
        return _guard(data[index], (*path, index))

    def __len__(self) -> int:
        return len(object.__getattribute__(self, _DATA))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (list, tuple, SequenceView)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SequenceView({object.__getattribute__(self, _DATA)!r})"


def as_view(config: Any) -> Any:
    """Wrap a config or spec dict in a :class:`SpecView`; views pass through."""
    if config is None:
        return SpecView({})
    if isinstance(config, (SpecView, SequenceView)):
        return config
    if isinstance(config, Mapping):
        return SpecView(config)
    return config


def unwrap(value: Any) -> Any:
    """Turn views inside a function's return value back into plain (copied) containers."""
    if isinstance(value, (SpecView, SequenceView)):
        data = object.__getattribute__(value, _DATA)
        return copy.deepcopy(dict(data) if isinstance(value, SpecView) else list(data))
    if isinstance(value, list):
        return [unwrap(item) for item in value]
    if isinstance(value, tuple) and type(value) is tuple:
        return tuple(unwrap(item) for item in value)
    if isinstance(value, dict) and type(value) is dict:
        return {key: unwrap(item) for key, item in value.items()}
    return value
