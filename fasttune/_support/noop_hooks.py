"""Marking plugin hooks that do nothing, so the runner can skip calling them.

A scheduler or search algorithm that ignores intermediate results (FIFO, the
default variant generator) still costs a call and a copy of every result if the
runner cannot tell. Base classes mark such methods with :func:`noop_hook`; a
subclass that overrides the method gets called as usual.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

_MARK = "__fasttune_noop_hook__"
F = TypeVar("F", bound=Callable[..., Any])


def noop_hook(method: F) -> F:
    """Mark ``method`` as doing nothing the runner needs to call it for."""
    setattr(method, _MARK, True)
    return method


def is_noop_hook(plugin: Any, name: str) -> bool:
    """Whether ``plugin.<name>`` is a method marked by :func:`noop_hook` (not overridden)."""
    if name in getattr(plugin, "__dict__", {}):
        return False
    return bool(getattr(getattr(type(plugin), name, None), _MARK, False))
