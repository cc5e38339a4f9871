"""Package attributes imported when first used (PEP 562 ``__getattr__``).

A package lists where each public name lives; importing the package imports none of
them, so ``import fasttune`` (and the fork server's start, and a run that needs one
stopper) pays only for what it uses.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection, Mapping
from typing import Any


def lazy_names(
    namespace: dict[str, Any], names: Mapping[str, str], submodules: Collection[str] = ()
) -> Callable[[str], Any]:
    """The ``__getattr__`` of the package whose globals are ``namespace``.

    Args:
        namespace: The package's ``globals()``; each name is kept there once imported,
            so later lookups are plain attribute reads.
        names: Public name -> the module defining it.
        submodules: Subpackages and modules reachable as attributes.

    Example:
        >>> ns = {"__name__": "pkg"}
        >>> getattr_ = lazy_names(ns, {"dumps": "json"})
        >>> getattr_("dumps").__module__, "dumps" in ns
        ('json', True)
    """
    package = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        if name in names:
            value = getattr(importlib.import_module(names[name]), name)
        elif name in submodules:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    return __getattr__
