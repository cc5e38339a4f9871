"""Resource amounts in words, for the messages of every resource accounting."""

from __future__ import annotations

__all__ = ["describe_amount", "format_number"]

_GIB = 1024**3


def format_number(value: float) -> str:
    """A number without a needless ``.0``.

    >>> format_number(8.0), format_number(0.5)
    ('8', '0.5')
    """
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def describe_amount(name: str, amount: float) -> str:
    """``amount`` of resource ``name`` in words.

    >>> describe_amount("CPU", 4), describe_amount("GPU", 1), describe_amount("TPU", 2)
    ('4 CPUs', '1 GPU', "2 of the custom resource 'TPU'")
    """
    if name == "memory":
        return f"{format_number(amount)} bytes ({amount / _GIB:.2f} GiB) of memory"
    if name in ("CPU", "GPU"):
        return f"{format_number(amount)} {name}{'' if amount == 1 else 's'}"
    return f"{format_number(amount)} of the custom resource {name!r}"
