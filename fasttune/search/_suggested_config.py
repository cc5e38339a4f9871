"""A searcher's suggestion made into a trial's config as Ray makes it: ``sample_from``
values are not the searcher's (left out of the space it is given, computed from each
suggested config), and a config's keys keep the order of ``param_space``."""

from __future__ import annotations

from typing import Any

from fasttune.search._spec_paths import assign_value
from fasttune.search._spec_view import path_str


def is_function(value: Any) -> bool:
    """Whether ``value`` is a ``sample_from`` domain."""
    check = getattr(value, "is_function", None)
    return bool(callable(check) and check())


def without_functions(space: Any) -> Any:
    """``space`` without its ``sample_from`` values (at any depth of dicts)."""
    if not isinstance(space, dict):
        return space
    return {key: without_functions(value) for key, value in space.items() if not is_function(value)}


_FUNCTION_PASSES = 8


def compute_functions(config: dict[str, Any], functions: list[tuple[Any, Any]]) -> None:
    """Set each ``sample_from`` value of ``config`` from the config, as Ray does after a
    searcher's suggestion: in passes, so that one may read another's value."""
    waiting = list(functions)
    for _ in range(_FUNCTION_PASSES):
        failed: list[tuple[Any, Any]] = []
        error: Exception | None = None
        for path, domain in waiting:
            try:
                assign_value(config, path, domain.sample(config=config))
            except (KeyError, AttributeError, TypeError) as e:  # reads one not set yet
                failed.append((path, domain))
                error = e
        if not failed:
            return
        if len(failed) == len(waiting):
            break
        waiting = failed
    path, domain = waiting[0]
    raise ValueError(
        f"`{path_str(path)}` = {domain!r} could not be computed from the suggested config "
        f"({type(error).__name__}: {error}). Its function may read the config's other "
        "values (config['a'] or spec.config.a); make sure those exist in param_space."
    )


def key_order(space: dict[str, Any]) -> dict[str, Any]:
    """The keys of ``space`` in order, nested: ``{key: its own order, or None}``."""
    return {k: key_order(v) if isinstance(v, dict) else None for k, v in space.items()}


def in_order(config: dict[str, Any], order: dict[str, Any]) -> dict[str, Any]:
    """``config`` with the keys of ``order`` first, in that order (nested dicts too)."""
    if not order:
        return config
    ordered: dict[str, Any] = {}
    for key, inner in order.items():
        if key in config:
            value = config[key]
            ordered[key] = in_order(value, inner) if inner and isinstance(value, dict) else value
    for key, value in config.items():
        ordered.setdefault(key, value)
    return ordered
