"""fasttune search spaces as hyperopt expressions, and configs as hyperopt label values.

:func:`convert_space` turns a ``param_space`` into the (nested) dict of ``hp.*``
expressions that ``hyperopt.Domain`` takes; :func:`encode_point` turns a config
(an entry of ``points_to_evaluate``) into the ``{label: value}`` form hyperopt
stores in its trials, choosing indices for ``hp.choice``.

Labels are the key paths joined with ``/`` (``"model/lr"``); a domain inside the
``i``-th option of a choice ``c`` is labelled ``"c/i/..."``, so options may reuse
key names. Constants are kept as ``pyll.Literal`` values and come back unchanged
(tuples stay tuples, objects are not rebuilt), except that a list option of a choice
comes back as a tuple (``choice([[1, 2], [3, 4]])`` gives ``(1, 2)`` or ``(3, 4)``),
as hyperopt, and so Ray's HyperOptSearch, gives it.

Integer and quantized domains are searched as ``hp.quniform``/``hp.qloguniform``
over a range widened by half a step on each side, so every allowed value is
equally likely and the ordering is kept (TPE models them as numbers, not as
unrelated categories); values are then clipped into range and cast.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from fasttune._support.imports import import_optional
from fasttune.search._domains import Categorical, Domain, Float, Integer
from fasttune.search._samplers import (
    LogUniform,
    Normal,
    Quantized,
    Uniform,
    aligned_bounds,
    round_to_multiple,
)
from fasttune.search._spec_view import contains_unresolved, is_grid_dict, path_str

logger = logging.getLogger(__name__)

Path = tuple[Any, ...]


def import_hyperopt() -> Any:
    """The ``hyperopt`` module, or an ImportError naming ``pip install "fasttune[hyperopt]"``."""
    return import_optional("hyperopt", extra="hyperopt", feature="HyperOptSearch")


# ---------------------------------------------------------------------- value fixing
# Module-level functions, so expressions that call them pickle by reference.


def _snap_float(value: Any, q: float, low: float, high: float) -> float:
    """Round to a multiple of ``q`` (without float noise) and clip into ``[low, high]``."""
    return min(max(float(round_to_multiple(value, q)), low), high)


def _snap_int(value: Any, low: int, high: int) -> int:
    """Round to the nearest int and clip into ``[low, high]``."""
    return int(min(max(round(float(value)), low), high))


def _as_tuples(value: Any) -> Any:
    """Lists (nested too) as tuples: hyperopt evaluates a list option of a choice so."""
    if isinstance(value, (list, tuple)):
        return tuple(_as_tuples(item) for item in value)
    return value


def _sequence(kind: str, *items: Any) -> list[Any] | tuple[Any, ...]:
    """Rebuild a list or tuple that holds searched values."""
    return list(items) if kind == "list" else tuple(items)


# ---------------------------------------------------------------------- spaces
def convert_space(
    spec: Mapping[str, Any], prefix: str = "", keep_constants: bool = True
) -> dict[str, Any]:
    """Convert a ``param_space`` to hyperopt expressions.

    Args:
        spec: The space: fasttune domains, constants, nested dicts and lists;
            hyperopt expressions already in it are kept.
        prefix: Prepended (with ``/``) to every label.
        keep_constants: Keep constant entries of (nested) dicts, as ``Literal``
            values. Constants inside choices and lists are always kept.

    Returns:
        The converted dict, or ``{}`` if ``spec`` has no fasttune domain to search.

    Raises:
        ValueError: For ``grid_search``, ``sample_from`` and domains hyperopt cannot
            express, naming the key.

    Example:
        >>> from fasttune.search.sample import uniform
        >>> space = convert_space({"x": uniform(0, 1), "epochs": 3})
        >>> space["x"].name, space["epochs"].obj
        ('float', 3)
    """
    if not contains_unresolved(spec):
        return {}
    base: Path = (prefix,) if prefix else ()
    return _convert(dict(spec), base, keep_constants, root=True)


def _convert(value: Any, path: Path, keep: bool = True, root: bool = False) -> Any:
    hpo = import_hyperopt()
    if is_grid_dict(value) or (isinstance(value, Domain) and value.is_grid()):
        raise ValueError(
            f"`{path_str(path)}` uses grid_search, which HyperOptSearch cannot search. "
            "Use tune.choice([...]) instead."
        )
    if isinstance(value, Domain):
        return _domain_expr(hpo, value, path)
    if isinstance(value, hpo.pyll.Apply):
        return value
    if not root and not _holds_expression(hpo, value):
        return hpo.pyll.Literal(value)
    if isinstance(value, Mapping):
        return {
            key: _convert(item, (*path, key), keep)
            for key, item in value.items()
            if keep or _holds_expression(hpo, item)
        }
    kind = "list" if isinstance(value, list) else "tuple"
    items = [_convert(item, (*path, i)) for i, item in enumerate(value)]
    return hpo.pyll.scope.call(_sequence, (kind, *items))


def _holds_expression(hpo: Any, value: Any) -> bool:
    """Whether ``value`` is or holds a domain, a grid axis or a hyperopt expression."""
    if contains_unresolved(value) or isinstance(value, hpo.pyll.Apply):
        return True
    if isinstance(value, Mapping):
        return any(_holds_expression(hpo, item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_expression(hpo, item) for item in value)
    return False


def _domain_expr(hpo: Any, domain: Domain, path: Path) -> Any:
    """The hyperopt expression sampling ``domain``, labelled by ``path``."""
    hp, scope = hpo.hp, hpo.pyll.scope
    label = path_str(path)
    sampler = domain.get_sampler()
    q = None
    if isinstance(sampler, Quantized):
        q, sampler = sampler.q, sampler.get_sampler()
    if isinstance(domain, Float) and isinstance(sampler, (Uniform, LogUniform)):
        log = isinstance(sampler, LogUniform)
        if q is None:
            bounds = (
                (math.log(domain.lower), math.log(domain.upper))
                if log
                else (domain.lower, domain.upper)
            )
            return (hp.loguniform if log else hp.uniform)(label, *bounds)
        low, high = aligned_bounds(domain.lower, domain.upper, q)
        expr = _widened(hp, label, low, high, q, log)
        return scope.call(_snap_float, (expr, q, low, high))
    if isinstance(domain, Float) and isinstance(sampler, Normal):
        if q is None:
            return hp.normal(label, sampler.mean, sampler.sd)
        expr = hp.qnormal(label, sampler.mean, sampler.sd, q)
        return scope.call(_snap_float, (expr, q, -math.inf, math.inf))
    if isinstance(domain, Integer) and isinstance(sampler, (Uniform, LogUniform)):
        step: float
        if q is None:  # randint / lograndint: upper bound excluded
            low, high, step = domain.lower, domain.upper - 1, 1
        else:  # qrandint / qlograndint: multiples of q, both bounds included
            first, last = aligned_bounds(domain.lower, domain.upper, q)
            low, high, step = int(first), int(last), q
        expr = _widened(hp, label, low, high, step, isinstance(sampler, LogUniform))
        return scope.call(_snap_int, (expr, low, high))
    if isinstance(domain, Categorical) and isinstance(sampler, Uniform):
        options = [
            hpo.pyll.Literal(_as_tuples(option))
            if isinstance(option, list) and not _holds_expression(hpo, option)
            else _convert(option, (*path, i))
            for i, option in enumerate(domain.categories)
        ]
        return hp.choice(label, options)
    what = "sample_from(...)" if domain.is_function() else f"{type(domain).__name__} {sampler}"
    raise ValueError(
        f"`{label}` is a {what} domain, which HyperOptSearch cannot search. Use uniform, "
        "loguniform, quniform, qloguniform, randn, qrandn, randint, qrandint, lograndint, "
        "qlograndint or choice; compute derived values inside the trainable."
    )


def _widened(hp: Any, label: str, low: float, high: float, q: float, log: bool) -> Any:
    """``hp.quniform``/``hp.qloguniform`` over ``[low - q/2, high + q/2]``: each multiple alike."""
    low, high = low - q / 2, high + q / 2
    if log:
        return hp.qloguniform(label, math.log(low), math.log(high), q)
    return hp.quniform(label, low, high, q)


def has_parameters(space: Any) -> bool:
    """Whether a hyperopt space has anything to search (at least one ``hp.*`` label)."""
    hpo = import_hyperopt()
    if not isinstance(space, Mapping) or not space:
        return False
    root = hpo.pyll.as_apply(dict(space))
    return any(node.name == "hyperopt_param" for node in hpo.pyll.dfs(root))


# ---------------------------------------------------------------------- points
class _Mismatch(ValueError):
    """A value does not fit an expression (tried on each option of a choice)."""


def encode_point(space: Mapping[str, Any], point: Mapping[str, Any]) -> dict[str, Any]:
    """Turn a config into hyperopt's ``{label: value}`` (choice values become indices).

    Args:
        space: A space as :func:`convert_space` returns it (or a native hyperopt dict).
        point: A config giving a value for every searched key; constants may be left out.

    Raises:
        ValueError: A searched key is missing, or a value is not one of a choice's
            options; the message names the key.

    Example:
        >>> from fasttune.search.sample import choice, uniform
        >>> space = convert_space({"x": uniform(0, 1), "act": choice(["relu", "tanh"])})
        >>> encode_point(space, {"x": 0.5, "act": "tanh"})
        {'act': 1, 'x': 0.5}
    """
    hpo = import_hyperopt()
    if not isinstance(point, Mapping):
        raise TypeError(f"points_to_evaluate must hold dicts, got {point!r}.")
    unknown = sorted(str(key) for key in point if key not in space)
    if unknown:  # e.g. constants of the param_space, which the Tuner sets itself
        logger.debug("points_to_evaluate: %s not searched; ignored.", unknown)
    out: dict[str, Any] = {}
    try:
        _encode(hpo, hpo.pyll.as_apply(dict(space)), point, (), out, strict=False)
    except _Mismatch as error:
        raise ValueError(f"points_to_evaluate: {error} Point: {dict(point)!r}.") from None
    return out


def _encode(hpo: Any, node: Any, value: Any, path: Path, out: dict[str, Any], strict: bool) -> None:
    if node.name == "literal":
        if strict and not _equal(node.obj, value):
            raise _Mismatch(f"`{path_str(path)}` is {value!r}, not {node.obj!r}.")
        return
    if node.name == "dict":
        if not isinstance(value, Mapping):
            raise _Mismatch(f"`{path_str(path)}` must be a dict, got {value!r}.")
        for key, child in node.named_args:
            if key in value:
                _encode(hpo, child, value[key], (*path, key), out, strict)
            elif _is_searched(hpo, child):
                raise _Mismatch(f"`{path_str((*path, key))}` is missing; give every searched key.")
        return
    if node.name == "switch":
        param = node.pos_args[0]
        out[param.arg["label"].obj] = _choose(hpo, node.pos_args[1:], value, path, out)
        return
    if node.name == "call" and _is_literal(node.pos_args[0], _sequence):
        items = node.pos_args[1].pos_args[1:]
        if not isinstance(value, (list, tuple)) or len(value) != len(items):
            raise _Mismatch(f"`{path_str(path)}` must be a list of {len(items)} values.")
        for i, (child, item) in enumerate(zip(items, value)):
            _encode(hpo, child, item, (*path, i), out, strict)
        return
    labels = [n.arg["label"].obj for n in hpo.pyll.dfs(node) if n.name == "hyperopt_param"]
    if len(labels) != 1:
        raise _Mismatch(f"cannot map the value of `{path_str(path)}` onto its hyperopt expression.")
    out[labels[0]] = value


def _choose(hpo: Any, options: list[Any], value: Any, path: Path, out: dict[str, Any]) -> int:
    """The index of the option ``value`` stands for (encoding that option's inner values)."""
    for i, option in enumerate(options):  # exact type first: True is not 1
        if (
            option.name == "literal"
            and type(option.obj) is type(value)
            and _equal(option.obj, value)
        ):
            return i
    for i, option in enumerate(options):
        if option.name == "literal":
            if _equal(option.obj, value):
                return i
            continue
        inner: dict[str, Any] = {}
        try:
            _encode(hpo, option, value, (*path, i), inner, strict=True)
        except _Mismatch:
            continue
        out.update(inner)
        return i
    shown = [option.obj if option.name == "literal" else "<expression>" for option in options]
    raise _Mismatch(f"`{path_str(path)}` is {value!r}, which is not one of the choices {shown}.")


def _is_searched(hpo: Any, node: Any) -> bool:
    return any(n.name == "hyperopt_param" for n in hpo.pyll.dfs(node))


def _is_literal(node: Any, obj: Any) -> bool:
    return node.name == "literal" and node.obj is obj


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(_as_tuples(a) == _as_tuples(b))  # [1, 2] picks the option (1, 2)
    except Exception:  # e.g. arrays: ambiguous truth value
        return False
