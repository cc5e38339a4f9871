"""Search spaces for :class:`~fasttune.search.optuna.OptunaSearch`: fasttune domains to
Optuna distributions, and back.

A space is flattened to ``"a/b"`` keys (Optuna parameters have flat names) and each
key gets a :class:`OptunaParam`: the Optuna distribution, plus how to turn Optuna's
value back into the value fasttune's own sampler would give (categories that Optuna
cannot store are sampled by index; quantized floats are rounded to the step's
decimals, so a step of 0.1 gives 0.3 and not 0.30000000000000004).

Bounds follow Ray Tune: ``randint``/``lograndint`` exclude ``upper``; ``qrandint``,
``quniform`` (and ``qlograndint`` with ``q=1``) include it.

Example:
    >>> from fasttune.search.sample import choice, randint
    >>> space = to_optuna_space({"net": {"width": randint(1, 4)}, "act": choice(["relu"])})
    >>> space.params["net/width"].distribution
    IntDistribution(high=3, log=False, low=1, step=1)
    >>> unflatten({"net/width": 2, "act": "relu"})
    {'net': {'width': 2}, 'act': 'relu'}
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fasttune._support.imports import import_optional
from fasttune.search._checks import plain
from fasttune.search._domains import Categorical, Domain, Float, Integer
from fasttune.search._function import Function
from fasttune.search._samplers import (
    LogUniform,
    Normal,
    Quantized,
    Uniform,
    _decimal_places,
    aligned_bounds,
)
from fasttune.search._spec_view import contains_unresolved, is_grid_dict

if TYPE_CHECKING:
    from optuna.distributions import BaseDistribution

logger = logging.getLogger(__name__)

SEP = "/"
_PLAIN_CHOICE_TYPES = (type(None), bool, int, float, str)


def _optuna() -> Any:
    return import_optional("optuna", extra="optuna", feature="OptunaSearch")


@dataclass(frozen=True)
class OptunaParam:
    """One searched parameter: its Optuna distribution and how values map to it.

    Args:
        distribution: The Optuna distribution the sampler draws from.
        categories: If set, Optuna draws an index into these categories (for
            values Optuna cannot store, such as lists or classes).
        decimals: If set, drawn floats are rounded to this many decimal places.
    """

    distribution: BaseDistribution
    categories: tuple[Any, ...] | None = None
    decimals: int | None = None

    def decode(self, value: Any) -> Any:
        """The config value for Optuna's ``value``."""
        if self.categories is not None:
            return self.categories[int(value)]
        if self.decimals is not None:
            return round(float(value), self.decimals)
        return value

    def encode(self, key: str, value: Any) -> Any:
        """Optuna's value for the config value ``value`` (of parameter ``key``).

        Raises:
            ValueError: If ``value`` is not one of the categories of a choice.
        """
        value = plain(value)
        if self.categories is None:
            return value
        for index, category in enumerate(self.categories):
            if _same(category, value):
                return index
        raise ValueError(
            f"`{key}` = {value!r} is not one of its choices {list(self.categories)!r}; "
            "give one of them."
        )


def _same(category: Any, value: Any) -> bool:
    try:
        return bool(category == value)
    except Exception:  # e.g. numpy arrays compare element-wise
        return category is value


@dataclass
class OptunaSpace:
    """A flattened search space: searched parameters and constant values.

    Attributes:
        params: ``{"a/b": OptunaParam}`` for each searched parameter.
        constants: ``{"a/b": value}`` for fixed values laid into every suggestion.
    """

    params: dict[str, OptunaParam] = field(default_factory=dict)
    constants: dict[str, Any] = field(default_factory=dict)

    @property
    def distributions(self) -> dict[str, BaseDistribution]:
        """``{"a/b": distribution}``, what ``study.ask(fixed_distributions=...)`` takes."""
        return {key: param.distribution for key, param in self.params.items()}

    def decode(self, optuna_params: dict[str, Any]) -> dict[str, Any]:
        """A flat config from the parameters of an Optuna trial, constants included."""
        values = {key: self.params[key].decode(optuna_params[key]) for key in self.params}
        return {**self.constants, **values}

    def encode(self, flat_point: dict[str, Any], what: str) -> dict[str, Any]:
        """Optuna parameters for a flat config; constants and other keys are dropped.

        Raises:
            ValueError: If a searched parameter is missing (``what`` names the source).
        """
        missing = [key for key in self.params if key not in flat_point]
        if missing:
            raise ValueError(
                f"{what} lacks {', '.join(f'`{key}`' for key in missing)}; give a value "
                f"for every searched parameter ({', '.join(self.params)})."
            )
        return {key: param.encode(key, flat_point[key]) for key, param in self.params.items()}


def to_optuna_space(spec: dict[str, Any]) -> OptunaSpace:
    """Convert a space of fasttune domains, Optuna distributions and constants.

    Nested dicts become ``"a/b"`` keys.

    Raises:
        ValueError: For a parameter Optuna cannot sample (``grid_search``,
            ``sample_from``, ``randn``, ``qlograndint`` with ``q > 1``, a domain inside a
            list) or a key that contains ``"/"``; the message names the key.
        TypeError: If ``spec`` is not a dict.
    """
    if not isinstance(spec, dict):
        raise TypeError(f"An Optuna search space must be a dict, got {type(spec).__name__}.")
    space = OptunaSpace()
    distribution_cls = _optuna().distributions.BaseDistribution
    for key, value in flatten(spec).items():
        if isinstance(value, distribution_cls):
            space.params[key] = OptunaParam(value)
        elif isinstance(value, Domain) or is_grid_dict(value):
            space.params[key] = domain_to_param(key, value)
        elif contains_unresolved(value):
            raise ValueError(
                f"`{key}` holds a search-space definition inside a "
                f"{type(value).__name__}; OptunaSearch only searches dict values. Use a dict "
                'instead (e.g. {"0": tune.uniform(0, 1), ...}).'
            )
        else:
            space.constants[key] = value
    return space


def domain_to_param(key: str, domain: Any) -> OptunaParam:
    """The :class:`OptunaParam` for the fasttune domain ``domain`` at ``key``.

    Raises:
        ValueError: If Optuna cannot sample the domain; the message says what to use.
    """
    ot = _optuna()
    dists = ot.distributions
    if is_grid_dict(domain) or (isinstance(domain, Domain) and domain.is_grid()):
        raise ValueError(
            f"`{key}` uses grid_search, which OptunaSearch cannot sample: only the default "
            "search algorithm (BasicVariantGenerator) expands grids. Use "
            "tune.choice([...]) instead."
        )
    if isinstance(domain, Function):
        raise ValueError(
            f"`{key}` uses sample_from, which OptunaSearch cannot convert. Compute the "
            "value in the trainable from the other parameters, or pass a define-by-run "
            "function as `OptunaSearch(space=...)`."
        )
    sampler = domain.get_sampler()
    q = None
    if isinstance(sampler, Quantized):
        q = sampler.q
        sampler = sampler.get_sampler()
    if isinstance(sampler, Normal):
        raise ValueError(
            f"`{key}` samples from a normal distribution (randn/qrandn), which OptunaSearch "
            "cannot convert. Use tune.uniform(low, high) (or tune.quniform) over the range "
            "you expect instead."
        )
    if isinstance(domain, Float):
        if isinstance(sampler, LogUniform):
            if q is not None:
                logger.warning(
                    "`%s`: Optuna cannot quantize log-uniform floats; sampling "
                    "loguniform(%s, %s) without q=%s.",
                    key,
                    domain.lower,
                    domain.upper,
                    q,
                )
            return OptunaParam(dists.FloatDistribution(domain.lower, domain.upper, log=True))
        if isinstance(sampler, Uniform):
            if q is None:
                return OptunaParam(dists.FloatDistribution(domain.lower, domain.upper))
            low, high = aligned_bounds(domain.lower, domain.upper, q)
            return OptunaParam(
                dists.FloatDistribution(low, high, step=q), decimals=_decimal_places(q)
            )
    elif isinstance(domain, Integer):
        if isinstance(sampler, LogUniform):
            if q is None:  # lograndint: upper excluded
                return OptunaParam(dists.IntDistribution(domain.lower, domain.upper - 1, log=True))
            if q == 1:  # qlograndint: upper included
                return OptunaParam(dists.IntDistribution(domain.lower, domain.upper, log=True))
            raise ValueError(
                f"`{key}` is qlograndint with q={q}, but Optuna cannot quantize log-scaled "
                "integers. Use tune.lograndint(...) (every integer) or tune.qrandint(..., q) "
                "(uniform over multiples of q) instead."
            )
        if isinstance(sampler, Uniform):
            if q is None:  # randint: upper excluded
                return OptunaParam(dists.IntDistribution(domain.lower, domain.upper - 1))
            step = int(q)  # qrandint: the multiples of q in [lower, upper]
            low = -(-domain.lower // step) * step
            high = domain.upper // step * step
            return OptunaParam(dists.IntDistribution(low, high, step=step))
    elif isinstance(domain, Categorical) and isinstance(sampler, Uniform):
        categories = tuple(domain.categories)
        if contains_unresolved(list(categories)):
            raise ValueError(
                f"`{key}` is a choice of categories holding search domains (a conditional "
                "space), which OptunaSearch cannot convert. Write the space as a "
                "define-by-run function instead: OptunaSearch(space=fn), where fn(trial) "
                "calls trial.suggest_categorical(...) and then suggests each branch's own "
                "parameters."
            )
        if all(type(category) in _PLAIN_CHOICE_TYPES for category in categories):
            return OptunaParam(dists.CategoricalDistribution(categories))
        indices = tuple(range(len(categories)))
        return OptunaParam(dists.CategoricalDistribution(indices), categories=categories)
    raise ValueError(
        f"`{key}`: OptunaSearch cannot convert {type(domain).__name__} sampled with "
        f"{sampler}. Use tune.uniform, loguniform, quniform, randint, lograndint, qrandint "
        "or choice."
    )


def flatten(spec: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten nested dicts to ``"a/b"`` keys (empty dicts stay values).

    Raises:
        ValueError: If a key contains ``"/"``.

    Example:
        >>> flatten({"a": {"b": 1}, "c": 2})
        {'a/b': 1, 'c': 2}
    """
    flat: dict[str, Any] = {}
    for key, value in spec.items():
        name = str(key)
        if SEP in name:
            raise ValueError(
                f"Key {prefix + name!r} contains {SEP!r}, which OptunaSearch uses to join "
                "nested keys. Rename it."
            )
        if isinstance(value, dict) and value and not is_grid_dict(value):
            flat.update(flatten(value, prefix + name + SEP))
        else:
            flat[prefix + name] = value
    return flat


def unflatten(flat: dict[str, Any]) -> dict[str, Any]:
    """Undo :func:`flatten`: ``{"a/b": 1}`` -> ``{"a": {"b": 1}}``."""
    nested: dict[str, Any] = {}
    for key, value in flat.items():
        *parents, leaf = key.split(SEP)
        node = nested
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


def as_float(value: Any) -> float | None:
    """``value`` as a float if it is a real number (bools are not), else None."""
    value = plain(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def is_finite_number(value: Any) -> bool:
    """Whether ``value`` is a finite real number."""
    number = as_float(value)
    return number is not None and math.isfinite(number)
