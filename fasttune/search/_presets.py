"""Counting variants and applying preset points (``points_to_evaluate``) to a search space."""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Sequence
from typing import Any

from fasttune._support.numeric import is_int
from fasttune.search._domains import Categorical, Domain
from fasttune.search._spec_paths import Path, assign_value, get_value, parse_spec_vars
from fasttune.search._spec_view import is_grid_dict, is_unresolved, path_str

logger = logging.getLogger("fasttune.search.variant_generator")


def check_num_samples(num_samples: Any) -> float:
    """Return the number of passes over the grid (``math.inf`` for -1).

    Raises:
        TypeError: If ``num_samples`` is not an int.
        ValueError: If ``num_samples`` is below -1.
    """
    if not is_int(num_samples):
        raise TypeError(f"`num_samples` must be an int, got {num_samples!r}.")
    if num_samples == -1:
        return math.inf
    if num_samples < 0:
        raise ValueError(
            f"`num_samples` must be >= 0, or -1 to sample until stopped; got {num_samples}."
        )
    return int(num_samples)


def count_spec_samples(spec: dict[str, Any], num_samples: int = 1) -> int:
    """Number of configs that ``num_samples`` passes over the spec's grid produce.

    Example:
        >>> from fasttune.search.sample import grid_search
        >>> count_spec_samples({"a": grid_search([1, 2]), "b": grid_search([3, 4, 5])}, 2)
        12
    """
    _, _, grid_vars = parse_spec_vars(spec)
    return num_samples * math.prod(len(domain) for _, domain in grid_vars)


def count_variants(spec: dict[str, Any], presets: Sequence[dict[str, Any]] | None = None) -> float:
    """Number of configs an experiment spec yields, as Ray Tune counts them.

    Args:
        spec: ``{"config": param_space, "num_samples": n}`` (``num_samples`` defaults to 1).
        presets: Points to evaluate; each replaces one of the ``num_samples`` passes.

    Returns:
        The count, or ``math.inf`` when ``num_samples`` is -1.

    Example:
        >>> from fasttune.search.sample import grid_search
        >>> count_variants({"config": {"a": grid_search([1, 2])}, "num_samples": 3}, [{"a": 1}])
        5
    """
    remaining = check_num_samples(spec.get("num_samples", 1))
    total = 0
    for preset in presets or []:
        preset_spec = {**spec, "config": resolved_with_presets(spec.get("config", {}), preset)}
        total += count_spec_samples(preset_spec, 1)
        remaining -= 1
    if remaining > 0:
        if remaining == math.inf:
            return math.inf
        total += count_spec_samples(spec, int(remaining))
    return total


def resolved_with_presets(space: dict[str, Any], point: dict[str, Any]) -> dict[str, Any]:
    """Return a copy of ``space`` with the values of ``point`` in place of its entries.

    A value replaces the domain or grid axis at its path (or at the nearest parent
    path that is one). Values outside their domain are logged as warnings.

    Raises:
        TypeError: If ``point`` is not a dict.
        ValueError: If a key of ``point`` is not in ``space``.
    """
    if not isinstance(point, dict):
        raise TypeError(
            f"points_to_evaluate: each point must be a dict, got {point!r} "
            f"({type(point).__name__})."
        )
    preset = copy.deepcopy(space)
    done: set[Path] = set()
    resolved, _, _ = parse_spec_vars(point)
    for path, value in resolved:
        target = _target_path(preset, path)
        if target in done:
            continue
        done.add(target)
        if target != path:
            value = get_value(point, target)
        _warn_if_invalid(get_value(preset, target), target, value)
        assign_value(preset, target, copy.deepcopy(value))
    return preset


def _target_path(space: dict[str, Any], path: Path) -> Path:
    """The path where a preset value goes: ``path``, or the domain that contains it."""
    node: Any = space
    for depth, key in enumerate(path):
        if depth and is_unresolved(node):
            return path[:depth]
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            raise ValueError(
                f"points_to_evaluate: key `{path_str(path)}` is not in the search space. "
                "Add it to `param_space` or remove it from the point."
            ) from None
    return path


def _warn_if_invalid(entry: Any, path: Path, value: Any) -> None:
    domain = Categorical(entry["grid_search"]) if is_grid_dict(entry) else entry
    if isinstance(domain, Domain):
        if not domain.is_valid(value):
            logger.warning(
                "Pre-set value %r is not a valid value of `%s`: %s",
                value,
                path_str(path),
                domain.domain_str,
            )
    elif _differs(domain, value):
        logger.warning(
            "Pre-set value %r differs from the fixed value of `%s` in the search space: %r",
            value,
            path_str(path),
            domain,
        )


def _differs(a: Any, b: Any) -> bool:
    try:
        return bool(a != b)
    except Exception:  # e.g. numpy arrays, whose comparison has no single truth value
        return a is not b
