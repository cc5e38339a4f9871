"""Turn what the user passed as a trainable into a picklable Trainable class."""

from __future__ import annotations

from typing import Any

import cloudpickle

from fasttune.error import TuneTypeError
from fasttune.trainable.function_trainable import (
    FunctionTrainable,
    check_takes_config,
    wrap_function,
)
from fasttune.trainable.trainable import Trainable, implements


def resolve_trainable(trainable: Any) -> type[Trainable]:
    """A Trainable class for a function, a Trainable subclass or a registered name.

    Raises:
        TypeError: For anything else, naming what was passed.
    """
    if isinstance(trainable, str):
        from fasttune.registry import get_trainable_cls

        return get_trainable_cls(trainable)
    if isinstance(trainable, type):
        if issubclass(trainable, Trainable):
            return trainable
        raise TuneTypeError(
            f"The trainable {trainable.__name__} is a class but not a fasttune.Trainable "
            "subclass: subclass fasttune.Trainable, or pass a training function."
        )
    if callable(trainable):
        name = getattr(trainable, "__name__", None) or type(trainable).__name__
        check_takes_config(trainable, name)  # before any trial, not in each of them
        return wrap_function(trainable)
    raise TuneTypeError(
        f"Unknown trainable type {type(trainable).__name__} ({trainable!r}): pass a "
        "function taking a config dict, a fasttune.Trainable subclass, or the name of a "
        "registered trainable."
    )


def pickle_trainable(cls: type[Trainable]) -> tuple[bytes, str]:
    """The cloudpickled class and a key identifying it.

    Raises:
        TypeError: The trainable cannot be pickled; names the captured culprits.
    """
    try:
        blob = cloudpickle.dumps(cls)
    except Exception as e:
        culprits = ""
        try:
            from fasttune.utils.serialization import find_unserializable

            target = getattr(cls, "_train_func", cls)
            found = find_unserializable(target)
            if found:
                culprits = " It captures: " + "; ".join(f"{k} ({v})" for k, v in found.items())
        except Exception:
            pass
        raise TypeError(
            f"The trainable {cls.__name__} cannot be serialised to reach its worker "
            f"processes: {e}.{culprits} Create such objects inside the trainable, or pass "
            "picklable data with fasttune.with_parameters()."
        ) from e
    name = getattr(cls, "_name", None) or cls.__name__
    # Keys only need to be unique within this driver process: Python's (salted, 64-bit)
    # hash of the bytes plus their length.
    return blob, f"{name}-{hash(blob) & 0xFFFFFFFFFFFF:012x}-{len(blob)}"


def is_function_trainable(cls: type[Trainable]) -> bool:
    return issubclass(cls, FunctionTrainable)


def default_checkpoint_at_end(cls: type[Trainable], configured: bool | None) -> bool:
    """Class trainables save at the end when they can (RAY_NOTES: skip, don't fail)."""
    if is_function_trainable(cls):
        return False
    if configured is False:
        return False
    return implements(cls, "save_checkpoint")
