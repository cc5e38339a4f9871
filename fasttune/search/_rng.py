"""One random source over the ways a user can hand us randomness.

``random_state`` arguments accept ``None`` (the global generator: numpy's once
numpy is imported, so ``np.random.seed`` applies, else Python's ``random``), an
``int`` seed, a ``numpy.random.Generator``, a legacy ``numpy.random.RandomState`` or
a ``random.Random``. :class:`_RandomSource` gives them one small interface. numpy is
imported only for a numpy generator or seed, never at import time.

:class:`NumpyState` is for libraries that draw from numpy's *global* random state
(hpbandster's BOHB, ZOOpt, HEBO): each searcher keeps a state of its own, swapped in
around every call, so a seed reproduces its suggestions, a restored searcher continues
them, and the user's numpy state is left alone.
"""

from __future__ import annotations

import contextlib
import random
import sys
from collections.abc import Iterator
from numbers import Integral
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np


class _PythonDraws:
    """numpy's legacy draw names over Python's ``random``: the module or a ``random.Random``.

    Draws come back as lists. Python's Mersenne Twister draws a uniform float the
    same way numpy's legacy generator does (``low + (high - low) * random()``).
    """

    def __init__(self, source: Any) -> None:
        self._source = source

    def uniform(self, low: float, high: float, size: int) -> list[float]:
        source = self._source
        return [source.uniform(low, high) for _ in range(size)]

    def normal(self, mean: float, sd: float, size: int) -> list[float]:
        source = self._source
        return [source.gauss(mean, sd) for _ in range(size)]

    def randint(self, low: int, high: int, size: int) -> list[int]:
        source = self._source
        return [source.randrange(low, high) for _ in range(size)]


class _RandomSource:
    """Uniform, normal and integer draws, as lists, from whichever generator was given.

    With no generator, draws come from numpy's global one when numpy is imported (so
    ``np.random.seed`` applies, as in Ray Tune), else from Python's ``random`` module
    (so ``random.seed`` applies): a user who has not imported numpy cannot have
    seeded it, and a run that samples does not pay ~0.1 s to import it.

    Args:
        random_state: ``None``, an int seed, a ``numpy.random.Generator``, a
            ``numpy.random.RandomState`` or a ``random.Random``.

    Raises:
        TypeError: If ``random_state`` is none of these.
    """

    def __init__(self, random_state: RandomState = None) -> None:
        if isinstance(random_state, _RandomSource):
            self._rng: Any = random_state._rng
            return
        if random_state is None or isinstance(random_state, random.Random):
            # None: the global generator, resolved when a draw needs it, so a search
            # space without random domains (a grid) never imports numpy.
            self._rng = random_state
            return
        import numpy as np

        if isinstance(random_state, (np.random.Generator, np.random.RandomState)):
            self._rng = random_state
        elif isinstance(random_state, Integral) and not isinstance(random_state, bool):
            self._rng = np.random.default_rng(int(random_state))
        else:
            raise TypeError(
                "`random_state` must be None, an int seed, a numpy.random.Generator, a "
                f"numpy.random.RandomState or a random.Random, got {random_state!r} "
                f"({type(random_state).__name__})."
            )

    @property
    def _backend(self) -> Any:
        # Resolved on each call rather than stored, so pickling never captures np.random.
        rng = self._rng
        if rng is None:
            numpy = sys.modules.get("numpy")
            return _PythonDraws(random) if numpy is None else numpy.random
        if isinstance(rng, random.Random):
            return _PythonDraws(rng)
        return rng

    def uniform(self, low: float, high: float, size: int) -> list[float]:
        """Draw ``size`` floats uniformly from ``[low, high)``."""
        return _as_list(self._backend.uniform(low, high, size=size))

    def normal(self, mean: float, sd: float, size: int) -> list[float]:
        """Draw ``size`` floats from a normal distribution."""
        return _as_list(self._backend.normal(mean, sd, size=size))

    def integers(self, low: int, high: int, size: int) -> list[int]:
        """Draw ``size`` integers uniformly from ``[low, high)``."""
        backend = self._backend
        draw = getattr(backend, "integers", None) or backend.randint  # Generator or legacy
        return _as_list(draw(low, high, size=size))


def _as_list(values: Any) -> list[Any]:
    return values if isinstance(values, list) else values.tolist()


def fresh_generator() -> Any:
    """A generator of one's own, seeded from the global state the user can have seeded.

    numpy's (a ``Generator``, whose state is a few ints) when numpy is imported, so
    ``np.random.seed`` repeats a run; else a ``random.Random`` seeded from Python's
    ``random``, so ``random.seed`` does.
    """
    numpy = sys.modules.get("numpy")
    if numpy is None:
        return random.Random(random.getrandbits(64))
    return numpy.random.default_rng(numpy.random.randint(0, 2**31 - 1))


if TYPE_CHECKING:
    RandomState = (
        None | int | np.random.Generator | np.random.RandomState | random.Random | _RandomSource
    )
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
