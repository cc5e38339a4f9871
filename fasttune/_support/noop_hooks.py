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


_FORWARDS = "__fasttune_forwards_to__"


def forwarding_hook(attribute: str) -> Callable[[F], F]:
    """Mark a method that only calls the same method of ``self.<attribute>`` (a wrapper
    such as a concurrency limiter): it does nothing exactly when that one does nothing."""

    def mark(method: F) -> F:
        setattr(method, _FORWARDS, attribute)
        return method

    return mark


def is_noop_hook(plugin: Any, name: str) -> bool:
    """Whether ``plugin.<name>`` is a method marked by :func:`noop_hook` (not overridden),
    or one marked by :func:`forwarding_hook` whose target's method is."""
    if name in getattr(plugin, "__dict__", {}):
        return False
    method = getattr(type(plugin), name, None)
    if getattr(method, _MARK, False):
        return True
    attribute = getattr(method, _FORWARDS, None)
    if attribute is None:
        return False
    inner = getattr(plugin, attribute, None)
    return inner is not None and inner is not plugin and is_noop_hook(inner, name)
