"""One random source over the ways a user can hand us randomness.

``random_state`` arguments accept ``None`` (numpy's global generator, so
``np.random.seed`` applies), an ``int`` seed, a ``numpy.random.Generator`` or a
legacy ``numpy.random.RandomState``. :class:`_RandomSource` gives them one small
interface. numpy is imported only when a source is created, never at import time.

:class:`NumpyState` is for libraries that draw from numpy's *global* random state
(hpbandster's BOHB, ZOOpt, HEBO): each searcher keeps a state of its own, swapped in
around every call, so a seed reproduces its suggestions, a restored searcher continues
them, and the user's numpy state is left alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from numbers import Integral
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


class _RandomSource:
    """Uniform, normal and integer draws from whichever numpy generator was given.

    Args:
        random_state: ``None``, an int seed, a ``numpy.random.Generator`` or a
            ``numpy.random.RandomState``.

    Raises:
        TypeError: If ``random_state`` is none of these.
    """

    def __init__(self, random_state: RandomState = None) -> None:
        if isinstance(random_state, _RandomSource):
            self._rng: Any = random_state._rng
            return
        if random_state is None:
            # numpy's global generator, resolved when a draw needs it: a search space
            # without random domains (a grid) never imports numpy.
            self._rng = None
            return
        import numpy as np

        if isinstance(random_state, (np.random.Generator, np.random.RandomState)):
            self._rng = random_state
        elif isinstance(random_state, Integral) and not isinstance(random_state, bool):
            self._rng = np.random.default_rng(int(random_state))
        else:
            raise TypeError(
                "`random_state` must be None, an int seed, a numpy.random.Generator or a "
                f"numpy.random.RandomState, got {random_state!r} "
                f"({type(random_state).__name__})."
            )

    @property
    def _backend(self) -> Any:
        # Resolved on each call rather than stored, so pickling never captures np.random.
        if self._rng is None:
            import numpy as np

            return np.random
        return self._rng

    @property
    def is_legacy(self) -> bool:
        """Whether draws go through the legacy ``RandomState`` API."""
        import numpy as np

        return not isinstance(self._rng, np.random.Generator)

    def uniform(self, low: float, high: float, size: int) -> np.ndarray:
        """Draw ``size`` floats uniformly from ``[low, high)``."""
        return self._backend.uniform(low, high, size=size)

    def normal(self, mean: float, sd: float, size: int) -> np.ndarray:
        """Draw ``size`` floats from a normal distribution."""
        return self._backend.normal(mean, sd, size=size)

    def integers(self, low: int, high: int, size: int) -> np.ndarray:
        """Draw ``size`` integers uniformly from ``[low, high)``."""
        if self.is_legacy:
            return self._backend.randint(low, high, size=size)
        return self._backend.integers(low, high, size=size)


if TYPE_CHECKING:
    RandomState = None | int | np.random.Generator | np.random.RandomState | _RandomSource
else:
    RandomState = Any


def as_random_source(random_state: RandomState = None) -> _RandomSource:
    """Return ``random_state`` as a :class:`_RandomSource`, reusing one if given."""
    if isinstance(random_state, _RandomSource):
        return random_state
    return _RandomSource(random_state)


class NumpyState:
    """A numpy global random state of one's own, made active only inside :meth:`active`.

    Args:
        seed: Seed of the state (None: from fresh entropy).

    Example:
        >>> import numpy as np
        >>> own = NumpyState(0)
        >>> with own.active():
        ...     first = np.random.rand()
        >>> first == np.random.RandomState(0).rand()
        True
    """

    def __init__(self, seed: int | None):
        import numpy as np

        self.state = np.random.RandomState(seed).get_state()

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Use this state as numpy's global one, then keep where it got to."""
        import numpy as np

        outer = np.random.get_state()
        np.random.set_state(self.state)
        try:
            yield
        finally:
            self.state = np.random.get_state()
            np.random.set_state(outer)
