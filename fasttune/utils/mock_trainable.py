"""Ray's path for ``MyTrainableClass`` (``ray.tune.utils.mock_trainable``).

The class is a Trainable, a layer above ``fasttune.utils``; its name resolves on first
use from :mod:`fasttune.trainable.mock_trainable`.

Example:
    >>> from fasttune.utils.mock_trainable import MyTrainableClass
    >>> MyTrainableClass.__name__
    'MyTrainableClass'
"""

import importlib
from typing import Any

__all__ = ["MyTrainableClass"]  # noqa: F822  (resolved by __getattr__)


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("fasttune.trainable.mock_trainable"), name)
    raise AttributeError(f"module 'fasttune.utils.mock_trainable' has no attribute {name!r}")
