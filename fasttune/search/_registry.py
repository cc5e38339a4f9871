"""Search algorithms by name: ``create_searcher`` and ``SEARCH_ALG_IMPORT`` (as Ray's).

``SEARCH_ALG_IMPORT`` maps each of Ray Tune's names to a function that imports and
returns the class, so asking for one searcher never imports the others' libraries.
Ray's name that fasttune does not provide (``"vizier"``) is listed too; its import
function raises an ``ImportError`` that says so.

Example:
    >>> SEARCH_ALG_IMPORT["random"]().__name__
    'BasicVariantGenerator'
    >>> type(create_searcher("Random", metric="loss", max_concurrent=2)).__name__
    'BasicVariantGenerator'
"""

from __future__ import annotations

import importlib
import inspect
import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)


def _importer(module: str, class_name: str) -> Callable[[], type]:
    def import_class() -> type:
        return getattr(importlib.import_module(module), class_name)

    import_class.__name__ = f"_import_{class_name}"
    import_class.__doc__ = f"Import and return ``{module}.{class_name}``."
    return import_class


def _not_provided(name: str, class_name: str) -> Callable[[], type]:
    def import_class() -> type:
        available = ", ".join(repr(n) for n in SEARCH_ALG_IMPORT if n not in _NOT_PROVIDED)
        raise ImportError(
            f"fasttune does not provide Ray Tune's {name!r} search algorithm ({class_name}). "
            f"Available here: {available}."
        )

    import_class.__name__ = f"_import_{class_name}"
    return import_class


# Ray's names for searchers fasttune does not provide.
_NOT_PROVIDED = {
    "vizier": "VizierSearch",
}

SEARCH_ALG_IMPORT: dict[str, Callable[[], type]] = {
    "variant_generator": _importer("fasttune.search.basic_variant", "BasicVariantGenerator"),
    "random": _importer("fasttune.search.basic_variant", "BasicVariantGenerator"),
    "ax": _importer("fasttune.search.ax", "AxSearch"),
    "hyperopt": _importer("fasttune.search.hyperopt", "HyperOptSearch"),
    "bayesopt": _importer("fasttune.search.bayesopt", "BayesOptSearch"),
    "bohb": _importer("fasttune.search.bohb", "TuneBOHB"),
    "nevergrad": _importer("fasttune.search.nevergrad", "NevergradSearch"),
    "optuna": _importer("fasttune.search.optuna", "OptunaSearch"),
    "vizier": _not_provided("vizier", _NOT_PROVIDED["vizier"]),
    "zoopt": _importer("fasttune.search.zoopt", "ZOOptSearch"),
    "hebo": _importer("fasttune.search.hebo", "HEBOSearch"),
}
"""Search algorithm name -> function returning its class (imported on call)."""


def create_searcher(search_alg: str, **kwargs: Any) -> Any:
    """Build a search algorithm from its name, e.g. to pick one from a config file.

    Keyword arguments the class does not accept are dropped (as Ray does), so one set
    of options (``metric``, ``mode``, ``points_to_evaluate``...) can serve every
    searcher; a class that takes ``**kwargs`` receives them all.

    Args:
        search_alg: A key of :data:`SEARCH_ALG_IMPORT` (case-insensitive), e.g.
            ``"optuna"``, ``"hyperopt"``, ``"random"``.
        **kwargs: Arguments for the class's constructor.

    Returns:
        The search algorithm (a ``Searcher``, or a ``BasicVariantGenerator``).

    Raises:
        TypeError: If ``search_alg`` is not a string.
        ValueError: If ``search_alg`` is not a known name (the message lists them).
        ImportError: If the algorithm is not provided by fasttune, or its optional
            library is missing (the message says what to install).

    Example:
        >>> searcher = create_searcher("random", max_concurrent=2, metric="loss")
        >>> type(searcher).__name__, searcher.max_concurrent
        ('BasicVariantGenerator', 2)
        >>> create_searcher("grid")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: create_searcher: unknown search algorithm 'grid'; choose one of ...
    """
    if not isinstance(search_alg, str):
        raise TypeError(
            f"create_searcher: `search_alg` must be a name (str), got "
            f"{type(search_alg).__name__}: {search_alg!r}."
        )
    name = search_alg.strip().lower()
    if name not in SEARCH_ALG_IMPORT:
        raise ValueError(
            f"create_searcher: unknown search algorithm {search_alg!r}; choose one of "
            f"{list(SEARCH_ALG_IMPORT)}."
        )
    cls = SEARCH_ALG_IMPORT[name]()
    accepted = _accepted_kwargs(cls, kwargs)
    dropped = sorted(set(kwargs) - set(accepted))
    if dropped:
        logger.debug("create_searcher(%r): %s does not take %s", name, cls.__name__, dropped)
    return cls(**accepted)


def _accepted_kwargs(cls: type, kwargs: dict[str, Any]) -> dict[str, Any]:
    parameters = inspect.signature(cls).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return dict(kwargs)
    names = {
        p.name
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    return {key: value for key, value in kwargs.items() if key in names}
