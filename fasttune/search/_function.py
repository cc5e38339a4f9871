"""The ``sample_from`` domain: a value computed by a user function."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fasttune.search._checks import check_size
from fasttune.search._domains import Domain
from fasttune.search._rng import RandomState
from fasttune.search._samplers import BaseSampler
from fasttune.search._spec_view import as_view, unwrap


class Function(Domain):
    """A hyperparameter whose value is computed by ``func``.

    ``func`` takes no argument, or one: the config being resolved. That argument
    supports both styles Ray Tune users write, ``config["a"]`` and
    ``spec.config.a``.

    Args:
        func: A callable of zero or one argument.

    Raises:
        TypeError: If ``func`` is not callable.
        ValueError: If ``func`` cannot be called with zero or one argument.

    Example:
        >>> Function(lambda spec: spec.config.a * 2).sample(config={"a": 3})
        6
    """

    class _CallSampler(BaseSampler):
        def sample(
            self,
            domain: Domain,
            config: Any = None,
            size: int = 1,
            random_state: RandomState = None,
        ) -> Any:
            size = check_size(size)
            configs = config if isinstance(config, list) else [config] * size
            items = [domain._call(configs[i]) for i in range(size)]  # type: ignore[attr-defined]
            return items[0] if size == 1 else items

        def __str__(self) -> str:
            return "Call"

    default_sampler_cls = _CallSampler

    def __init__(self, func: Callable[..., Any]) -> None:
        if not callable(func):
            raise TypeError(
                f"sample_from: `func` must be callable, got {func!r} ({type(func).__name__}). "
                "Pass e.g. lambda config: config['a'] * 2."
            )
        self.func = func
        self.pass_config = _takes_one_argument(func)

    def is_function(self) -> bool:
        """Always True."""
        return True

    def is_valid(self, value: Any) -> bool:
        """Always True: the function defines its own values."""
        return True

    @property
    def domain_str(self) -> str:
        """The function's name followed by ``()``."""
        return f"{getattr(self.func, '__qualname__', repr(self.func))}()"

    def __repr__(self) -> str:
        return f"Function({self.domain_str})"

    def _call(self, config: Any) -> Any:
        if not self.pass_config:
            return unwrap(self.func())
        try:
            return unwrap(self.func(as_view(config)))
        except (KeyError, AttributeError) as first_error:
            # Written for the other style: `spec.config.a` given a bare config, or
            # `config["a"]` given a spec. Retry once with the config nested under
            # "config"; report the first error if that fails too.
            try:
                return unwrap(self.func(as_view({"config": as_view(config)})))
            except (KeyError, AttributeError):
                raise first_error from None


def _takes_one_argument(func: Callable[..., Any]) -> bool:
    import inspect

    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return False  # Not introspectable (some builtins): call it without arguments.
    try:
        signature.bind(None)
        return True
    except TypeError:
        pass
    try:
        signature.bind()
        return False
    except TypeError:
        raise ValueError(
            f"sample_from: `func` must accept zero arguments or one (the config), "
            f"but {func!r} has signature {signature}."
        ) from None
