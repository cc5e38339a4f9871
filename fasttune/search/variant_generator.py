"""Expand a search space into concrete configs, as in ``ray.tune.search.variant_generator``.

A spec is a nested structure of dicts, lists and tuples whose leaves are plain
values, :class:`~fasttune.search.sample.Domain` objects (sampled) or
``{"grid_search": [...]}`` axes (expanded). Grid axes combine as a cartesian
product; the axis whose path sorts first varies fastest, as in Ray Tune.
``sample_from`` functions may read other values, including the results of other
functions: they are retried, pass after pass, until every value they read is
resolved, and a cycle raises :class:`RecursiveDependencyError`.

Example:
    >>> from fasttune.search.sample import grid_search
    >>> space = {"a": grid_search([1, 2]), "b": grid_search(["x", "y"])}
    >>> [config for _, config in generate_variants(space)]
    [{'a': 1, 'b': 'x'}, {'a': 2, 'b': 'x'}, {'a': 1, 'b': 'y'}, {'a': 2, 'b': 'y'}]
"""

from __future__ import annotations

import copy
import itertools
import math
import re
from collections.abc import Iterator, Sequence
from typing import Any

from fasttune.search._domains import Domain
from fasttune.search._presets import (
    check_num_samples,
    count_spec_samples,
    count_variants,
    resolved_with_presets,
)
from fasttune.search._rng import RandomState, _RandomSource, as_random_source
from fasttune.search._spec_paths import (
    Path,
    PathValues,
    assign_value,
    get_value,
    parse_spec_vars,
    path_sort_key,
    resolve_nested_dict,
)
from fasttune.search._spec_view import (
    RecursiveDependencyError,
    SpecView,
    contains_unresolved,
    path_str,
)
from fasttune.search.sample import grid_search

__all__ = [
    "RecursiveDependencyError",
    "assign_value",
    "count_spec_samples",
    "count_variants",
    "expand_param_space",
    "flatten_resolved_vars",
    "format_vars",
    "generate_variants",
    "get_preset_variants",
    "grid_search",
    "parse_spec_vars",
    "resolve_nested_dict",
]


def generate_variants(
    unresolved_spec: dict[str, Any],
    constant_grid_search: bool = False,
    random_state: RandomState = None,
) -> Iterator[tuple[dict[Path, Any], dict[str, Any]]]:
    """Yield every grid variant of ``unresolved_spec``, with its random values sampled.

    Args:
        unresolved_spec: The spec; it is deep-copied and never changed.
        constant_grid_search: Sample random values once and reuse them for every
            grid variant (True), or sample anew for each variant (False, Ray's default).
        random_state: ``None``, an int seed, or a numpy Generator/RandomState.

    Yields:
        ``(resolved_vars, spec)``: the value chosen for each path that was a domain
        or grid axis, and the fully resolved spec.

    Raises:
        RecursiveDependencyError: If ``sample_from`` functions depend on each other
            in a cycle.
        ValueError: If sampling a value fails.

    Example:
        >>> from fasttune.search.sample import randint
        >>> _, config = next(generate_variants({"n": randint(0, 5)}, random_state=0))
        >>> 0 <= config["n"] < 5
        True
    """
    if not isinstance(unresolved_spec, dict):
        raise TypeError(
            f"generate_variants: the spec must be a dict, got {type(unresolved_spec).__name__}."
        )
    rng = as_random_source(random_state)
    yield from _expand(_copy_spec(unresolved_spec), constant_grid_search, rng)


def _copy_spec(spec: Any) -> Any:
    """A deep copy of ``spec`` that shares its :class:`Domain` objects with it.

    Domains are only read (sampled, or their grid values copied) and every one is
    replaced by a value in the copy, so copying them (each a ``__reduce_ex__`` and a
    rebuild, with its sampler) was most of a suggestion's cost: 78 -> 35 us for a
    four-key space. Everything else is copied as ``copy.deepcopy`` does.
    """
    memo: dict[int, Any] = {}
    stack = [spec]
    while stack:
        value = stack.pop()
        if isinstance(value, Domain):
            memo[id(value)] = value
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
    return copy.deepcopy(spec, memo)


def _expand(
    spec: dict[str, Any], constant_grid_search: bool, rng: _RandomSource
) -> Iterator[tuple[dict[Path, Any], dict[str, Any]]]:
    # `spec` is owned here: callers pass a private copy.
    _, domain_vars, grid_vars = parse_spec_vars(spec)
    if not domain_vars and not grid_vars:
        yield {}, spec
        return
    # Values that grid variants reveal (domains inside grid values) are resolved one
    # level down, so an unresolvable function is only an error once no grid is left.
    strict = not grid_vars
    fixed: dict[Path, Any] = {}
    pending = domain_vars
    if constant_grid_search:
        fixed = _resolve_domains(spec, domain_vars, rng, strict=strict)
        pending = [(path, domain) for path, domain in domain_vars if path not in fixed]
    for variant in _grid_variants(spec, grid_vars):
        chosen = dict(fixed)
        chosen.update(_resolve_domains(variant, pending, rng, strict=strict))
        for nested_vars, resolved in _expand(variant, constant_grid_search, rng):
            grid_values = {path: get_value(resolved, path) for path, _ in grid_vars}
            yield {**chosen, **grid_values, **nested_vars}, resolved


def _grid_variants(spec: dict[str, Any], grid_vars: PathValues) -> Iterator[dict[str, Any]]:
    """Yield a copy of ``spec`` per grid combination; the first axis varies fastest."""
    if not grid_vars:
        yield spec
        return
    for path, _ in grid_vars:
        assign_value(spec, path, None)  # keep grid values out of the per-variant copies
    axes = [domain.categories for _, domain in reversed(grid_vars)]
    for combination in itertools.product(*axes):
        variant = _copy_spec(spec)
        for (path, _), value in zip(reversed(grid_vars), combination):
            assign_value(variant, path, copy.deepcopy(value))
        yield variant


def _resolve_domains(
    spec: dict[str, Any], domain_vars: PathValues, rng: _RandomSource, *, strict: bool
) -> dict[Path, Any]:
    """Sample ``domain_vars`` into ``spec``, retrying functions until no progress is made."""
    resolved: dict[Path, Any] = {}
    pending = list(domain_vars)
    while pending:
        blocked: list[tuple[Path, Domain, RecursiveDependencyError]] = []
        for path, domain in pending:
            try:
                value = _sample_one(spec, path, domain, rng)
            except RecursiveDependencyError as error:
                blocked.append((path, domain, error))
                continue
            assign_value(spec, path, value)
            resolved[path] = value
        if len(blocked) == len(pending):
            # A function that returned a domain reveals values the next level samples.
            if strict and not any(contains_unresolved(v) for v in resolved.values()):
                raise _cycle_error(blocked)
            break
        pending = [(path, domain) for path, domain, _ in blocked]
    return resolved


def _sample_one(spec: dict[str, Any], path: Path, domain: Domain, rng: _RandomSource) -> Any:
    try:
        return domain.sample(config=SpecView(spec), random_state=rng)
    except RecursiveDependencyError:
        raise
    except Exception as error:
        raise ValueError(
            f"Could not sample `{path_str(path)}` from {domain!r}: {type(error).__name__}: {error}"
        ) from error


def _cycle_error(
    blocked: list[tuple[Path, Domain, RecursiveDependencyError]],
) -> RecursiveDependencyError:
    details = "; ".join(f"`{path_str(path)}` waits: {error}" for path, _, error in blocked)
    return RecursiveDependencyError(
        "Circular dependency: these sample_from values read each other (or a value that "
        f"is never resolved), so none can be computed. {details} "
        "Break the cycle by making one of them independent."
    )


def format_vars(resolved_vars: dict[Path, Any]) -> str:
    """Format resolved values as Ray Tune's experiment tag, e.g. ``a=2,lr=0.0100``.

    Keys are the last element of each path, sorted by path; floats get four
    decimals; other characters outside ``[a-zA-Z0-9_-]`` become ``_``.

    Example:
        >>> format_vars({("config", "lr"): 0.01, ("config", "act"): "relu/x"})
        'act=relu_x,lr=0.0100'
    """
    items = sorted(resolved_vars.items(), key=lambda item: path_sort_key(_as_path(item[0])))
    return ",".join(
        f"{_clean_value(_as_path(path)[-1])}={_clean_value(value)}" for path, value in items
    )


def _as_path(key: Any) -> Path:
    return key if isinstance(key, tuple) else (key,)


def _clean_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    return re.sub(r"[^a-zA-Z0-9_-]+", "_", str(value)).strip("_")


def flatten_resolved_vars(resolved_vars: dict[Path, Any]) -> dict[str, Any]:
    """Map each path to ``"a/b"`` form, dropping a leading ``"config"``.

    Example:
        >>> flatten_resolved_vars({("config", "opt", "lr"): 0.1})
        {'opt/lr': 0.1}
    """
    flat: dict[str, Any] = {}
    for path, value in resolved_vars.items():
        path = _as_path(path)
        if path and path[0] == "config":
            path = path[1:]
        flat[path_str(path)] = value
    return flat


def get_preset_variants(
    spec: dict[str, Any],
    config: dict[str, Any],
    constant_grid_search: bool = False,
    random_state: RandomState = None,
) -> Iterator[tuple[dict[Path, Any], dict[str, Any]]]:
    """Like :func:`generate_variants`, with ``spec["config"]`` overridden by ``config``.

    Values in ``config`` replace the matching domains or grid axes, so fewer
    values are sampled. A value outside its domain is logged as a warning.

    Raises:
        ValueError: If a key of ``config`` is not in ``spec["config"]``.
    """
    preset_spec = copy.copy(spec)
    preset_spec["config"] = resolved_with_presets(spec.get("config", {}), config)
    return generate_variants(preset_spec, constant_grid_search, random_state)


def expand_param_space(
    param_space: dict[str, Any] | None,
    num_samples: int = 1,
    seed: RandomState = None,
    points_to_evaluate: Sequence[dict[str, Any]] | None = None,
    constant_grid_search: bool = False,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield the trial configs of a Tuner's ``param_space``, as Ray Tune would.

    Each of ``num_samples`` passes expands the whole grid once (so there are
    ``num_samples x grid size`` configs). Each point of ``points_to_evaluate``
    takes the place of one pass, with its values fixed; all points are used even
    if there are more than ``num_samples``.

    Args:
        param_space: The search space (None means ``{}``); never changed.
        num_samples: Passes over the grid; -1 repeats forever.
        seed: ``None``, an int seed, or a numpy Generator/RandomState. The same
            seed gives the same configs (``sample_from`` functions that draw from
            their own random source are not covered).
        points_to_evaluate: Configs (possibly partial) to try first.
        constant_grid_search: Reuse random values across a pass's grid variants.

    Yields:
        ``(tag, config)``: the experiment-tag suffix (:func:`format_vars`, empty when
        nothing varies) and the resolved config.

    Example:
        >>> from fasttune.search.sample import grid_search
        >>> list(expand_param_space({"a": grid_search([1, 2])}, num_samples=2))
        [('a=1', {'a': 1}), ('a=2', {'a': 2}), ('a=1', {'a': 1}), ('a=2', {'a': 2})]
    """
    space = {} if param_space is None else param_space
    if not isinstance(space, dict):
        raise TypeError(f"`param_space` must be a dict, got {type(space).__name__}.")
    passes = check_num_samples(num_samples)
    rng = as_random_source(seed)
    for point in copy.deepcopy(list(points_to_evaluate or [])):
        preset = resolved_with_presets(space, point)
        for resolved_vars, config in generate_variants(preset, constant_grid_search, rng):
            yield format_vars(resolved_vars), config
        passes -= 1
    for _ in range(int(passes)) if passes != math.inf else itertools.count():
        for resolved_vars, config in generate_variants(space, constant_grid_search, rng):
            yield format_vars(resolved_vars), config
