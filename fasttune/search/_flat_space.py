"""Search spaces as flat ``{"a/b": domain}`` maps, for libraries that name parameters.

nevergrad and ConfigSpace take one flat set of named parameters. A ``param_space``
is flattened here into names (the key path joined with ``/``) and domains, each name
remembering its path so suggestions are nested back exactly (non-string keys too).
Domains inside lists or tuples, ``grid_search`` and ``sample_from`` are rejected with
the key named, as are spaces where two paths give the same name.

Snapping a drawn number into a domain (rounding to a step, casting to int, clipping
into the bounds) is shared too: :meth:`FlatSpace.decode` makes every value one the
domain allows, as a plain Python value.

Example:
    >>> from fasttune.search.sample import choice, qrandint, uniform
    >>> space = flatten_space(
    ...     {"lr": uniform(0, 1), "net": {"units": qrandint(8, 64, 8), "act": choice(["a", "b"])}},
    ...     "MySearch",
    ... )
    >>> space.names
    ['lr', 'net/units', 'net/act']
    >>> space.decode({"lr": 0.5, "net/units": 30.2, "net/act": "b"})
    {'lr': 0.5, 'net': {'units': 32, 'act': 'b'}}
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from fasttune.search._checks import plain
from fasttune.search._domains import Categorical, Domain, Float, Integer
from fasttune.search._samplers import (
    LogUniform,
    Normal,
    Quantized,
    Uniform,
    aligned_bounds,
    round_to_multiple,
)
from fasttune.search._spec_view import contains_unresolved, is_grid_dict, path_str

logger = logging.getLogger(__name__)

Path = tuple[Any, ...]

SUPPORTED = (
    "uniform, quniform, loguniform, qloguniform, randn, qrandn, randint, qrandint, "
    "lograndint, qlograndint and choice"
)


@dataclass(frozen=True)
class Param:
    """One searched parameter: its name, its path in the config and its domain.

    ``kind`` is ``"float"``, ``"int"`` or ``"choice"``; ``sampler`` the distribution
    (``Uniform``, ``LogUniform`` or ``Normal``; ``Uniform`` for choices); ``q`` the
    step of a quantized domain (None otherwise); ``low``/``high`` the range values
    may take, both included (for ``randint(0, 10)``: 0 and 9; for a quantized domain
    the first and last multiple of ``q``; infinite for ``randn``).
    """

    name: str
    path: Path
    domain: Domain
    kind: str
    sampler: Any
    q: float | None
    low: float
    high: float

    @property
    def log(self) -> bool:
        """Whether the domain is searched on a log scale."""
        return isinstance(self.sampler, LogUniform)

    def decode(self, value: Any) -> Any:
        """``value`` made one this domain allows: rounded, cast, clipped; plain Python."""
        value = plain(value)
        if self.kind == "choice":
            return value
        number = float(value)
        if self.q is not None:
            number = float(round_to_multiple(number, self.q))
        elif self.kind == "int":
            number = float(round(number))
        number = min(max(number, self.low), self.high)
        return round(number) if self.kind == "int" else number

    def step_index(self, value: Any, step: float) -> int:
        """The index of ``value`` among the multiples of ``step`` from ``low``."""
        return round((value - self.low) / step)

    def from_step_index(self, index: Any, step: float) -> Any:
        """The domain's value at ``index`` among the multiples of ``step`` from ``low``."""
        return self.decode(self.low + int(index) * step)

    def check(self, value: Any) -> Any:
        """Validate a user-given value (``points_to_evaluate``) and return it cast.

        Raises:
            ValueError: If the domain cannot produce ``value``.
        """
        if not self.domain.is_valid(value):
            raise ValueError(
                f"`{self.name}` is {value!r}, outside its domain {self.domain!r}. Give a "
                "value the search space can produce."
            )
        return self.domain.cast(plain(value)) if self.kind != "choice" else value


@dataclass(frozen=True)
class FlatSpace:
    """The searched parameters of a ``param_space``, in the order they appear.

    Attributes:
        params: One :class:`Param` per searched key.
        constants: Paths of the constant values (the Tuner sets those itself).
    """

    params: tuple[Param, ...]
    constants: frozenset[Path] = frozenset()

    @property
    def names(self) -> list[str]:
        """The parameter names, ``/``-joined key paths."""
        return [param.name for param in self.params]

    def decode(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Nest ``{name: drawn value}`` back into a config, each value snapped into its domain."""
        config: dict[str, Any] = {}
        for param in self.params:
            assign(config, param.path, param.decode(values[param.name]))
        return config

    def encode_point(self, point: Mapping[str, Any], searcher: str) -> dict[str, Any]:
        """Flatten a config to ``{name: value}``, checking every value against its domain.

        Keys that are not searched (e.g. constants of the ``param_space``) are ignored.

        Raises:
            TypeError: If ``point`` is not a dict.
            ValueError: If a searched key is missing or holds a value its domain cannot
                produce; the message names the key.
        """
        if not isinstance(point, Mapping):
            raise TypeError(
                f"{searcher}: `points_to_evaluate` must hold config dicts, got {point!r}."
            )
        flat: dict[str, Any] = {}
        for param in self.params:
            found, value = _lookup(point, param.path)
            if not found:
                raise ValueError(
                    f"{searcher}: a point of `points_to_evaluate` gives no value for "
                    f"`{param.name}`; give every searched key. Point: {dict(point)!r}."
                )
            try:
                flat[param.name] = param.check(value)
            except ValueError as error:
                raise ValueError(f"{searcher}: points_to_evaluate: {error}") from None
        return flat


class ParamCodec(Protocol):
    """How one parameter's values map to a library's (its parameter, encode, decode)."""

    @property
    def param(self) -> Param: ...

    def encode(self, value: Any) -> Any: ...

    def decode(self, value: Any) -> Any: ...


def encode_config(
    codecs: Sequence[ParamCodec], flat: FlatSpace, point: Mapping[str, Any], searcher: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A point of ``points_to_evaluate`` as the library's ``{name: value}``, and as a config.

    ``codecs`` are :class:`ParamCodec` objects over ``flat``'s parameters.

    Raises:
        ValueError: As :meth:`FlatSpace.encode_point`.
    """
    checked = flat.encode_point(point, searcher)
    values: dict[str, Any] = {}
    config: dict[str, Any] = {}
    for codec in codecs:
        value = checked[codec.param.name]
        values[codec.param.name] = codec.encode(value)
        assign(config, codec.param.path, value)
    return values, config


def decode_config(codecs: Sequence[ParamCodec], values: Mapping[str, Any]) -> dict[str, Any]:
    """The config for the library's ``{name: value}`` (``codecs`` as in :func:`encode_config`)."""
    config: dict[str, Any] = {}
    for codec in codecs:
        assign(config, codec.param.path, codec.decode(values[codec.param.name]))
    return config


def check_bounded(param: Param, searcher: str, library: str) -> None:
    """Refuse a ``randn`` domain for a library that searches bounded ranges only.

    Raises:
        ValueError: Naming the key and saying what to use instead.
    """
    if isinstance(param.sampler, Normal):
        raise ValueError(
            f"{searcher}: `{param.name}` is a normal (randn) domain, which has no bounds; "
            f"{library} searches bounded ranges. Use tune.uniform(lower, upper) instead."
        )


def flatten_space(spec: Mapping[str, Any], searcher: str) -> FlatSpace:
    """Flatten the domains of ``spec`` into named parameters.

    Args:
        spec: A ``param_space``: domains, constants and nested dicts.
        searcher: The searcher's name, for messages.

    Raises:
        ValueError: For ``grid_search``, ``sample_from``, domains inside lists,
            samplers the searcher cannot express, and two keys with the same name;
            the message names the key.
    """
    params: list[Param] = []
    constants: set[Path] = set()
    _walk(spec, (), params, constants, searcher)
    seen: dict[str, Path] = {}
    for param in params:
        if param.name in seen:
            raise ValueError(
                f"{searcher}: the keys {seen[param.name]!r} and {param.path!r} both give the "
                f"parameter name `{param.name}`; rename one (names join nested keys with '/')."
            )
        seen[param.name] = param.path
    return FlatSpace(tuple(params), frozenset(constants))


def _walk(value: Any, path: Path, params: list[Param], constants: set[Path], searcher: str) -> None:
    if is_grid_dict(value) or (isinstance(value, Domain) and value.is_grid()):
        raise ValueError(
            f"{searcher}: `{path_str(path)}` uses grid_search, which {searcher} cannot "
            "search. Use tune.choice([...]) instead."
        )
    if isinstance(value, Domain):
        params.append(_param(value, path, searcher))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _walk(item, (*path, key), params, constants, searcher)
    elif isinstance(value, (list, tuple)) and contains_unresolved(value):
        raise ValueError(
            f"{searcher}: `{path_str(path)}` is a list holding search domains, which "
            f"{searcher} cannot search. Put them in a dict instead, e.g. "
            "{'layer_0': tune.randint(...), 'layer_1': ...}."
        )
    elif path:
        constants.add(path)


def _param(domain: Domain, path: Path, searcher: str) -> Param:
    name = path_str(path)
    if domain.is_function():
        raise ValueError(
            f"{searcher}: `{name}` is a sample_from(...) domain, which {searcher} cannot "
            f"search. Use {SUPPORTED}; compute derived values inside the trainable."
        )
    sampler = domain.get_sampler()
    q = None
    if isinstance(sampler, Quantized):
        q, sampler = sampler.q, sampler.get_sampler()
    if isinstance(domain, Categorical) and isinstance(sampler, Uniform) and q is None:
        return Param(name, path, domain, "choice", sampler, None, math.nan, math.nan)
    numeric = isinstance(domain, (Float, Integer))
    if numeric and isinstance(sampler, (Uniform, LogUniform, Normal)):
        kind = "int" if isinstance(domain, Integer) else "float"
        if q is not None:
            low, high = aligned_bounds(domain.lower, domain.upper, q)  # type: ignore[attr-defined]
        elif kind == "int":
            low, high = domain.lower, domain.upper - 1  # type: ignore[attr-defined]
        else:
            low, high = domain.lower, domain.upper  # type: ignore[attr-defined]
        return Param(name, path, domain, kind, sampler, q, low, high)
    raise ValueError(
        f"{searcher}: `{name}` is a {type(domain).__name__} domain sampled with {sampler}, "
        f"which {searcher} cannot search. Use {SUPPORTED}."
    )


def _lookup(config: Mapping[str, Any], path: Path) -> tuple[bool, Any]:
    value: Any = config
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return False, None
        value = value[key]
    return True, value


def assign(config: dict[str, Any], path: Path, value: Any) -> None:
    """Set ``value`` at ``path`` in ``config``, creating the dicts on the way."""
    for key in path[:-1]:
        config = config.setdefault(key, {})
    config[path[-1]] = value


def unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Nest ``{"a/b": 1}`` into ``{"a": {"b": 1}}`` (for native spaces named by path).

    Values are turned into plain Python values (numpy scalars and arrays included).

    Example:
        >>> unflatten({"a/b": 1, "c": 2})
        {'a': {'b': 1}, 'c': 2}
    """
    nested: dict[str, Any] = {}
    for name, value in flat.items():
        path = tuple(name.split("/")) if isinstance(name, str) else (name,)
        assign(nested, path, to_plain(value))
    return nested


def flatten_point(point: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten nested dicts into ``/``-joined names (the inverse of :func:`unflatten`).

    Example:
        >>> flatten_point({"a": {"b": 1}, "c": 2})
        {'a/b': 1, 'c': 2}
    """
    flat: dict[str, Any] = {}
    for key, value in point.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            flat.update(flatten_point(value, f"{name}/"))
        else:
            flat[name] = value
    return flat


def to_plain(value: Any) -> Any:
    """numpy scalars to Python scalars and numpy arrays to lists; others unchanged."""
    if type(value).__module__ == "numpy":
        return value.tolist() if hasattr(value, "tolist") else value
    return value


def category_index(categories: Any, value: Any) -> int:
    """The index of ``value`` among ``categories`` (the same type first: True is not 1).

    Raises:
        ValueError: If ``value`` is none of them.

    Example:
        >>> category_index([1, True, "a"], True)
        1
    """
    for i, category in enumerate(categories):
        if type(category) is type(value) and _equal(category, value):
            return i
    for i, category in enumerate(categories):
        if _equal(category, value):
            return i
    raise ValueError(f"{value!r} is not one of the choices {list(categories)!r}")


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # e.g. arrays: ambiguous truth value
        return False


def check_plain_choice(param: Param, searcher: str) -> None:
    """Refuse a ``choice`` whose categories hold search domains (a conditional space).

    Raises:
        ValueError: Naming the key and saying what to do.
    """
    categories = list(param.domain.categories)  # type: ignore[attr-defined]
    if contains_unresolved(categories):
        raise ValueError(
            f"{searcher}: `{param.name}` is a choice of categories holding search domains "
            f"(a conditional space), which {searcher} cannot search. Flatten it into "
            "separate domains, or use HyperOptSearch, OptunaSearch (define-by-run) or TuneBOHB."
        )
