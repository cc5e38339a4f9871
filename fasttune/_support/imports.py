"""Lazy imports of optional dependencies, with the exact install command on failure."""

from __future__ import annotations

import importlib
from types import ModuleType


class MissingDependencyError(ImportError):
    """An optional dependency that a feature needs is not installed."""


def import_optional(module: str, *, extra: str, feature: str | None = None) -> ModuleType:
    """Import ``module`` or raise an ImportError that says which extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        what = feature or module
        raise MissingDependencyError(
            f"{what} needs the optional package {module!r}, which is not installed. "
            f'Install it with: pip install "fasttune[{extra}]"'
        ) from e
