"""Domains: the type and valid range of a hyperparameter (Float, Integer, Categorical).

A domain is immutable in use: ``.uniform()``, ``.loguniform()``, ``.quantized()`` and
friends return a copy with the sampler set, so ``Float(0, 1).uniform()`` never
changes the original. Sampled values are plain Python ``float``/``int``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from copy import copy
from typing import Any, TypeVar

from fasttune.search._checks import (
    check_base,
    check_bounds,
    check_divisible,
    check_int,
    check_log_bounds,
    check_positive,
    check_real,
    plain,
)
from fasttune.search._rng import RandomState, _RandomSource
from fasttune.search._samplers import (
    Grid,
    LogUniform,
    Normal,
    Quantized,
    Sampler,
    Uniform,
    aligned_bounds,
    round_to_multiple,
)

# A sampler set on a domain returns a copy of the same domain class.
_D = TypeVar("_D", bound="Domain")
_R = TypeVar("_R", bound="_Range")


class Domain:
    """Base class for a hyperparameter's type, valid values and sampler.

    Subclasses: :class:`Float`, :class:`Integer`, :class:`Categorical` and
    :class:`~fasttune.search.sample.Function`.
    """

    sampler: Sampler | None = None
    default_sampler_cls: type[Sampler] | None = None

    def cast(self, value: Any) -> Any:
        """Convert a drawn value to the domain's Python type."""
        return value

    def set_sampler(self, sampler: Sampler, allow_override: bool = False) -> None:
        """Set how values are drawn.

        Raises:
            ValueError: If a sampler is already set and ``allow_override`` is False.
        """
        if self.sampler is not None and not allow_override:
            raise ValueError(
                f"{type(self).__name__} already samples with {self.sampler}; cannot also use "
                f"{sampler}. Choose one sampler per parameter (e.g. Float(0, 1).uniform())."
            )
        self.sampler = sampler

    def get_sampler(self) -> Sampler:
        """Return the sampler in use, or a new default one if none was set."""
        if self.sampler is not None:
            return self.sampler
        if self.default_sampler_cls is None:
            raise ValueError(f"{type(self).__name__} has no sampler; set one first.")
        return self.default_sampler_cls()

    def sample(self, config: Any = None, size: int = 1, random_state: RandomState = None) -> Any:
        """Draw values from this domain.

        Args:
            config: The (partly) resolved config; only used by ``sample_from`` functions.
            size: How many values to draw.
            random_state: ``None`` (the global generator: numpy's if numpy is
                imported, else Python's ``random``), an int seed, a numpy
                ``Generator``/``RandomState`` or a ``random.Random``.

        Returns:
            One value if ``size == 1``, else a list of ``size`` values.

        Example:
            >>> Float(0, 1).uniform().sample(random_state=0) < 1
            True
        """
        return self.get_sampler().sample(self, config=config, size=size, random_state=random_state)

    def is_grid(self) -> bool:
        """Whether this domain is a grid axis (expanded, not sampled)."""
        return isinstance(self.sampler, Grid)

    def is_function(self) -> bool:
        """Whether this domain wraps a ``sample_from`` function."""
        return False

    def is_valid(self, value: Any) -> bool:
        """Whether ``value`` lies in this domain."""
        raise NotImplementedError

    @property
    def domain_str(self) -> str:
        """A short description of the valid values, for messages."""
        return "(unknown)"

    def _pack(self, values: Any, size: int) -> Any:
        items = values.tolist() if hasattr(values, "tolist") else list(values)
        items = [self.cast(item) for item in items]
        return items[0] if size == 1 else items

    def _with_sampler(self: _D, sampler: Sampler, allow_override: bool = False) -> _D:
        new = copy(self)
        new.set_sampler(sampler, allow_override=allow_override)
        return new

    def __repr__(self) -> str:
        return f"{type(self).__name__}{self.domain_str}[{self.get_sampler()}]"


class _Continuous(Sampler):
    """A sampler that draws real numbers in a range; quantizing rounds them."""

    def _draw_range(self, lower: float, upper: float, size: int, rng: _RandomSource) -> Any:
        raise NotImplementedError

    def _draw(self, domain: Domain, size: int, rng: _RandomSource) -> Any:
        return self._draw_range(domain.lower, domain.upper, size, rng)  # type: ignore[attr-defined]

    def _draw_quantized(self, domain: Domain, q: float, size: int, rng: _RandomSource) -> Any:
        low, high = aligned_bounds(domain.lower, domain.upper, q)  # type: ignore[attr-defined]
        return [round_to_multiple(value, q) for value in self._draw_range(low, high, size, rng)]


def _log_uniform(lower: float, upper: float, size: int, rng: _RandomSource) -> list[float]:
    draws = rng.uniform(math.log(lower), math.log(upper), size)
    return [min(max(math.exp(value), lower), upper) for value in draws]


class _Range(Domain):
    """A range of numbers from ``lower`` to ``upper``: what Float and Integer share."""

    lower: float
    upper: float

    @property
    def domain_str(self) -> str:
        """``(lower, upper)``."""
        return f"({self.lower}, {self.upper})"

    def _quantized(self: _R, q: float) -> _R:
        aligned_bounds(self.lower, self.upper, q)
        return self._with_sampler(Quantized(_unquantized(self), q), allow_override=True)


def _plain_number(value: Any) -> Any:
    """``value`` as a plain int or float, or None if it is not a number (bools are not)."""
    value = plain(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


class Float(_Range):
    """A real-valued hyperparameter in ``[lower, upper]``; ``None`` means unbounded.

    Args:
        lower: Lower bound, or None for no bound.
        upper: Upper bound, or None for no bound.

    Example:
        >>> Float(1e-4, 1e-1).loguniform().sample(random_state=0) < 0.1
        True
    """

    class _Uniform(_Continuous, Uniform):
        def _draw_range(self, lower: float, upper: float, size: int, rng: _RandomSource) -> Any:
            if math.isinf(lower) or math.isinf(upper):
                raise ValueError(
                    f"Uniform sampling needs finite bounds, got ({lower}, {upper}). "
                    "Set both bounds or use Float(None, None).normal()."
                )
            return rng.uniform(lower, upper, size)

    class _LogUniform(_Continuous, LogUniform):
        def _draw_range(self, lower: float, upper: float, size: int, rng: _RandomSource) -> Any:
            return _log_uniform(lower, upper, size, rng)

    class _Normal(_Continuous, Normal):
        def _draw_range(self, lower: float, upper: float, size: int, rng: _RandomSource) -> Any:
            return rng.normal(self.mean, self.sd, size)

    default_sampler_cls = _Uniform

    def __init__(self, lower: float | None, upper: float | None) -> None:
        self.lower = (
            -math.inf if lower is None else check_real("Float", "lower", lower, finite=False)
        )
        self.upper = (
            math.inf if upper is None else check_real("Float", "upper", upper, finite=False)
        )

    def cast(self, value: Any) -> float:
        """Return ``value`` as a Python float."""
        return float(value)

    def uniform(self) -> Float:
        """Sample uniformly between the (finite) bounds."""
        self._require_finite("Float.uniform")
        check_bounds("Float.uniform", self.lower, self.upper)
        return self._with_sampler(self._Uniform())

    def loguniform(self, base: float = 10) -> Float:
        """Sample log-uniformly between the bounds, which must be positive and finite."""
        check_base("Float.loguniform", base)
        self._require_finite("Float.loguniform")
        check_log_bounds("Float.loguniform", self.lower, self.upper)
        return self._with_sampler(self._LogUniform(base))

    def normal(self, mean: float = 0.0, sd: float = 1.0) -> Float:
        """Sample from a normal distribution; the domain must be unbounded."""
        if not (math.isinf(self.lower) and math.isinf(self.upper)):
            raise ValueError(
                f"Float.normal: normal sampling needs an unbounded domain, got {self.domain_str}. "
                "Use Float(None, None).normal(mean, sd) (tune.randn)."
            )
        return self._with_sampler(self._Normal(mean, sd))

    def quantized(self, q: float) -> Float:
        """Round sampled values to multiples of ``q``; finite bounds must be multiples of q."""
        q = check_positive("Float.quantized", "q", q)
        check_divisible("Float.quantized", "lower", self.lower, q)
        check_divisible("Float.quantized", "upper", self.upper, q)
        return self._quantized(q)

    def is_valid(self, value: Any) -> bool:
        """Whether ``value`` is a number in ``[lower, upper]``."""
        value = _plain_number(value)
        return value is not None and self.lower <= value <= self.upper

    def _require_finite(self, where: str) -> None:
        for name in ("lower", "upper"):
            if math.isinf(getattr(self, name)):
                raise ValueError(f"{where}: `{name}` must be a finite bound, got {name}=None/inf.")


class Integer(_Range):
    """An integer hyperparameter in ``[lower, upper)`` (upper included once quantized).

    Args:
        lower: Lowest value (included).
        upper: Upper bound (excluded by ``uniform``/``loguniform``, included by
            ``quantized``, as in Ray Tune's ``randint`` vs ``qrandint``).

    Example:
        >>> 0 <= Integer(0, 10).uniform().sample(random_state=0) < 10
        True
    """

    class _Uniform(Uniform):
        def _draw(self, domain: Domain, size: int, rng: _RandomSource) -> Any:
            return rng.integers(domain.lower, domain.upper, size)  # type: ignore[attr-defined]

        def _draw_quantized(self, domain: Domain, q: float, size: int, rng: _RandomSource) -> Any:
            low = -(-domain.lower // q)  # type: ignore[attr-defined]
            high = domain.upper // q  # type: ignore[attr-defined]
            return [value * q for value in rng.integers(low, high + 1, size)]

    class _LogUniform(_Continuous, LogUniform):
        def _draw_range(self, lower: float, upper: float, size: int, rng: _RandomSource) -> Any:
            return _log_uniform(lower, upper, size, rng)

        def _draw(self, domain: Domain, size: int, rng: _RandomSource) -> Any:
            upper = domain.upper  # type: ignore[attr-defined]
            values = _log_uniform(domain.lower, upper, size, rng)  # type: ignore[attr-defined]
            return [min(math.floor(value), upper - 1) for value in values]

    default_sampler_cls = _Uniform

    def __init__(self, lower: int, upper: int) -> None:
        self.lower = check_int("Integer", "lower", lower)
        self.upper = check_int("Integer", "upper", upper)

    def cast(self, value: Any) -> int:
        """Return ``value`` as a Python int."""
        return int(value)

    def uniform(self) -> Integer:
        """Sample uniformly from ``lower`` (included) to ``upper`` (excluded)."""
        check_bounds("Integer.uniform", self.lower, self.upper)
        return self._with_sampler(self._Uniform())

    def loguniform(self, base: float = 10) -> Integer:
        """Sample log-uniformly from ``lower`` (> 0, included) to ``upper`` (excluded)."""
        check_base("Integer.loguniform", base)
        check_log_bounds("Integer.loguniform", self.lower, self.upper)
        return self._with_sampler(self._LogUniform(base))

    def quantized(self, q: int) -> Integer:
        """Round sampled values to multiples of ``q``; the upper bound becomes included."""
        q = check_int("Integer.quantized", "q", q)
        check_positive("Integer.quantized", "q", q)
        return self._quantized(q)

    def is_valid(self, value: Any) -> bool:
        """Whether ``value`` is an integer the sampler can produce."""
        value = _plain_number(value)
        if value is None or not float(value).is_integer():
            return False
        if isinstance(self.sampler, Quantized):
            return self.lower <= value <= self.upper
        return self.lower <= value < self.upper


class Categorical(Domain):
    """A choice among ``categories``; also the form a grid axis takes.

    Args:
        categories: A non-empty sequence of values (any objects).

    Example:
        >>> Categorical(["relu", "tanh"]).uniform().sample(random_state=0) in ("relu", "tanh")
        True
    """

    class _Uniform(Uniform):
        def _draw(self, domain: Domain, size: int, rng: _RandomSource) -> Any:
            categories = domain.categories  # type: ignore[attr-defined]
            return [categories[i] for i in rng.integers(0, len(categories), size)]

    default_sampler_cls = _Uniform

    def __init__(self, categories: Iterable[Any]) -> None:
        self.categories = _as_categories(categories)

    def uniform(self) -> Categorical:
        """Sample one category uniformly at random."""
        return self._with_sampler(self._Uniform())

    def grid(self) -> Categorical:
        """Make this a grid axis: every category yields its own variant."""
        return self._with_sampler(Grid())

    def __len__(self) -> int:
        return len(self.categories)

    def __getitem__(self, item: Any) -> Any:
        return self.categories[item]

    def is_valid(self, value: Any) -> bool:
        """Whether ``value`` is one of the categories."""
        return value in self.categories

    @property
    def domain_str(self) -> str:
        """The list of categories."""
        return f"{self.categories}"


def _bound(name: str, value: Any) -> float:
    return check_real("Float", name, value, finite=False)


def _as_categories(categories: Any) -> list[Any]:
    if isinstance(categories, (str, bytes, Mapping)) or not isinstance(categories, Iterable):
        raise TypeError(
            "`categories` must be a list (or other sequence) of values, got "
            f"{categories!r} ({type(categories).__name__}). Wrap a single value in a list."
        )
    values = [plain(value) for value in categories]
    if not values:
        raise ValueError("`categories` must not be empty, got []. Give at least one value.")
    return values


def _unquantized(domain: Domain) -> Sampler:
    sampler = domain.get_sampler()
    return sampler.get_sampler() if isinstance(sampler, Quantized) else sampler
