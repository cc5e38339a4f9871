"""Argument checks for search-space constructors.

Every message names the function and parameter, shows the bad value and says
what to do, so a typo in a search space fails where it is written.
"""

from __future__ import annotations

import math
from typing import Any

from fasttune._support.numeric import is_int, is_real


def plain(value: Any) -> Any:
    """Turn a numpy scalar into the matching Python scalar; leave others alone."""
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
        return value.item()
    return value


def check_real(where: str, name: str, value: Any, *, finite: bool = True) -> float | int:
    """Return ``value`` as a Python number, or raise if it is not a real number.

    Raises:
        TypeError: If ``value`` is not a real number.
        ValueError: If ``finite`` and ``value`` is infinite or NaN.
    """
    value = plain(value)
    if not is_real(value):
        raise TypeError(
            f"{where}: `{name}` must be a number, got {value!r} ({type(value).__name__})."
        )
    if math.isnan(value) or (finite and math.isinf(value)):
        raise ValueError(f"{where}: `{name}` must be a finite number, got {value!r}.")
    return value


def check_int(where: str, name: str, value: Any) -> int:
    """Return ``value`` as an ``int``; whole floats such as ``10.0`` are accepted.

    Raises:
        TypeError: If ``value`` is not a whole number.
    """
    value = check_real(where, name, value)
    if is_int(value):
        return int(value)
    if float(value).is_integer():
        return int(value)
    raise TypeError(f"{where}: `{name}` must be an integer, got {value!r}.")


def check_bounds(where: str, lower: float, upper: float) -> None:
    """Raise unless ``lower < upper``."""
    if not lower < upper:
        raise ValueError(
            f"{where}: `lower` must be less than `upper`, got lower={lower!r} and "
            f"upper={upper!r}. Swap them or widen the range."
        )


def check_log_bounds(where: str, lower: float, upper: float) -> None:
    """Raise unless ``0 < lower < upper`` (a log scale needs positive bounds)."""
    if not lower > 0:
        raise ValueError(
            f"{where}: `lower` must be greater than 0 on a log scale, got lower={lower!r}. "
            "Pass the untransformed value (e.g. 1e-4, not -4) or use a linear sampler."
        )
    check_bounds(where, lower, upper)


def check_positive(where: str, name: str, value: Any) -> float | int:
    """Return ``value`` if it is a finite number greater than 0, else raise."""
    value = check_real(where, name, value)
    if not value > 0:
        raise ValueError(f"{where}: `{name}` must be greater than 0, got {name}={value!r}.")
    return value


def check_base(where: str, base: Any) -> None:
    """Raise unless ``base`` is a positive number other than 1."""
    base = check_positive(where, "base", base)
    if base == 1:
        raise ValueError(f"{where}: `base` must not be 1, got base={base!r}. Use e.g. 10.")


def check_size(size: Any) -> int:
    """Return ``size`` if it is an int of at least 1, else raise."""
    if not is_int(size) or size < 1:
        raise ValueError(f"sample: `size` must be an int >= 1, got size={size!r}.")
    return int(size)


def check_divisible(where: str, name: str, value: float, q: float) -> None:
    """Raise unless ``value`` is (close to) a whole multiple of ``q``."""
    if math.isinf(value):
        return
    ratio = value / q
    if not math.isclose(ratio, round(ratio)):
        raise ValueError(
            f"{where}: `{name}`={value!r} is not a multiple of q={q!r}. "
            f"Choose a bound that is a multiple of q, or a q that divides it."
        )
