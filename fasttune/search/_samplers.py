"""Samplers: how a domain's values are drawn (uniform, log-uniform, normal, grid, quantized).

A domain says *what* values are valid; its sampler says *how* they are drawn. The
public classes here are the ones searcher integrations test against with
``isinstance`` (as in Ray Tune); each domain type subclasses them privately with
the actual drawing code.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from fasttune.search._checks import check_positive, check_real, check_size
from fasttune.search._rng import RandomState, _RandomSource, as_random_source

if TYPE_CHECKING:
    from fasttune.search._domains import Domain


class Sampler:
    """Draws values for a :class:`Domain`.

    Subclasses implement ``_draw`` (and ``_draw_quantized`` where quantizing makes
    sense); :meth:`sample` turns the drawn array into Python values.
    """

    def sample(
        self,
        domain: Domain,
        config: Any = None,
        size: int = 1,
        random_state: RandomState = None,
    ) -> Any:
        """Draw ``size`` values from ``domain``: one value if ``size == 1``, else a list."""
        size = check_size(size)
        values = self._draw(domain, size, as_random_source(random_state))
        return domain._pack(values, size)

    def _draw(self, domain: Domain, size: int, rng: _RandomSource) -> Any:
        raise NotImplementedError(f"{type(self).__name__} cannot draw values on its own.")

    def _draw_quantized(self, domain: Domain, q: float, size: int, rng: _RandomSource) -> Any:
        raise ValueError(f"{type(self).__name__} sampling cannot be quantized.")

    def __str__(self) -> str:
        return type(self).__name__.lstrip("_")

    def __repr__(self) -> str:
        return f"{self}()"


class BaseSampler(Sampler):
    """Marker base for samplers that are not a distribution (e.g. calling a function)."""

    def __str__(self) -> str:
        return "Base"


class Uniform(Sampler):
    """Uniform sampling over a domain's range or categories."""

    def __str__(self) -> str:
        return "Uniform"


class LogUniform(Sampler):
    """Log-uniform sampling: every order of magnitude in the range is equally likely.

    Args:
        base: Kept for Ray Tune compatibility; the distribution does not depend on it.
    """

    def __init__(self, base: float = 10) -> None:
        self.base = base

    def __str__(self) -> str:
        return "LogUniform"


class Normal(Sampler):
    """Sampling from a normal distribution.

    Args:
        mean: Mean of the distribution.
        sd: Standard deviation; must be greater than 0.

    Raises:
        ValueError: If ``sd <= 0``.
    """

    def __init__(self, mean: float = 0.0, sd: float = 1.0) -> None:
        self.mean = check_real("Normal", "mean", mean)
        self.sd = check_positive("Normal", "sd", sd)

    def __str__(self) -> str:
        return "Normal"

    def __repr__(self) -> str:
        return f"Normal(mean={self.mean!r}, sd={self.sd!r})"


class Grid(Sampler):
    """Marks a categorical domain as a grid axis, expanded rather than sampled."""

    def sample(
        self,
        domain: Domain,
        config: Any = None,
        size: int = 1,
        random_state: RandomState = None,
    ) -> Any:
        """Always raises: grid axes are expanded by the variant generator."""
        raise RuntimeError(
            "A grid_search domain cannot be sampled; its values are expanded by the "
            "variant generator. Use tune.choice(...) to sample one value at random."
        )

    def __str__(self) -> str:
        return "Grid"


class Quantized(Sampler):
    """Rounds the values of another sampler to whole multiples of ``q``.

    The range is first narrowed to the multiples of ``q`` inside it, so the upper
    bound becomes reachable (inclusive), as in Ray Tune.

    Args:
        sampler: The sampler whose values are rounded.
        q: The step; must be greater than 0.

    Raises:
        ValueError: If ``q <= 0``.
    """

    def __init__(self, sampler: Sampler, q: float) -> None:
        if not isinstance(sampler, Sampler):
            raise TypeError(f"Quantized: `sampler` must be a Sampler, got {sampler!r}.")
        self.sampler = sampler
        self.q = check_positive("Quantized", "q", q)

    def get_sampler(self) -> Sampler:
        """Return the sampler whose values are rounded."""
        return self.sampler

    def _draw(self, domain: Domain, size: int, rng: _RandomSource) -> Any:
        return self.sampler._draw_quantized(domain, self.q, size, rng)

    def __str__(self) -> str:
        return f"Quantized({self.sampler}, q={self.q})"

    __repr__ = __str__


def aligned_bounds(lower: float, upper: float, q: float) -> tuple[float, float]:
    """Return the smallest and largest multiples of ``q`` inside ``[lower, upper]``.

    Raises:
        ValueError: If no multiple of ``q`` lies in the range.
    """
    low = lower if math.isinf(lower) else math.ceil(_ratio(lower, q)) * q
    high = upper if math.isinf(upper) else math.floor(_ratio(upper, q)) * q
    if low > high:
        raise ValueError(
            f"No multiple of q={q!r} lies between lower={lower!r} and upper={upper!r}. "
            "Use a smaller q or a wider range."
        )
    return low, high


def _ratio(value: float, q: float) -> float:
    """``value / q``, snapped to a whole number when float error is all that separates them."""
    ratio = value / q
    nearest = round(ratio)
    return float(nearest) if math.isclose(ratio, nearest) else ratio


def round_to_multiple(value: float, q: float) -> float:
    """Round ``value`` to the nearest multiple of ``q``, as ``round(value / q) * q``.

    The result is then rounded to the decimal places ``q`` is written with, so
    steps of 0.1 give 0.3 rather than 0.30000000000000004.
    """
    return round(round(float(value) / q) * q, _decimal_places(q))


def _decimal_places(q: float) -> int:
    """Digits after the point in the shortest repr of ``q`` (0.25 -> 2, 1e-05 -> 5)."""
    from decimal import Decimal

    exponent = Decimal(repr(float(q))).as_tuple().exponent
    return max(0, -int(exponent))
