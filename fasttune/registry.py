"""Trainables registered by name (``register_trainable``), as in Ray Tune."""

from __future__ import annotations

from typing import Any

from fasttune.error import TuneValueError

_trainables: dict[str, Any] = {}


def register_trainable(name: str, trainable: Any, warn: bool = True) -> None:
    """Register a function or Trainable class under ``name`` for ``Tuner("name")``.

    Example:
        >>> def train_fn(config):
        ...     pass
        >>> register_trainable("my_fn", train_fn)
        >>> get_trainable_cls("my_fn").__name__
        'my_fn'
    """
    from fasttune.trainable.function_trainable import wrap_function
    from fasttune.trainable.trainable import Trainable

    if not isinstance(name, str) or not name:
        raise TypeError(f"register_trainable(name=...) must be a non-empty str, got {name!r}")
    if isinstance(trainable, type) and issubclass(trainable, Trainable):
        _trainables[name] = trainable
    elif callable(trainable):
        _trainables[name] = wrap_function(trainable, name=name)
    else:
        raise TypeError(
            f"register_trainable(trainable=...) takes a function or a Trainable subclass, got "
            f"{type(trainable).__name__}"
        )


def get_trainable_cls(name: str) -> Any:
    """The Trainable class registered as ``name``."""
    try:
        return _trainables[name]
    except KeyError:
        known = ", ".join(sorted(_trainables)) or "none"
        raise TuneValueError(
            f"Unknown trainable {name!r}: register it first with "
            f"fasttune.register_trainable({name!r}, fn_or_class). Registered: {known}."
        ) from None


def is_registered(name: str) -> bool:
    return name in _trainables


def register_env(name: str, env_creator: Any) -> None:
    """Accepted for compatibility with RLlib-style code; stored, not used by fasttune."""
    _trainables.setdefault(f"__env__{name}", env_creator)
