"""Number checks that type checkers can follow.

``isinstance(value, numbers.Integral)`` accepts ``int`` and numpy integers at run
time, but mypy takes ``int`` and ``numbers.Integral`` for disjoint types (typeshed's
``Integral`` methods do not match ``int``'s), so it reads the code after such a check
as unreachable and leaves it unchecked. These guards do the same check and narrow to
``int`` / ``float``, which is how the checked value is then used.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import TypeGuard


def is_int(value: object) -> TypeGuard[int]:
    """Whether ``value`` is a whole number type (``int``, numpy integer), not a bool.

    Example:
        >>> import numpy as np
        >>> [is_int(v) for v in (3, np.int64(3), 3.0, True)]
        [True, True, False, False]
    """
    return isinstance(value, Integral) and not isinstance(value, bool)


def is_real(value: object) -> TypeGuard[float]:
    """Whether ``value`` is a real number (``int``, ``float``, numpy scalar), not a bool.

    Example:
        >>> import numpy as np
        >>> [is_real(v) for v in (3, 0.5, np.float32(0.5), True, "1")]
        [True, True, True, False, False]
    """
    return isinstance(value, Real) and not isinstance(value, bool)
