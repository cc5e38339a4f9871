"""Resource requests for trials (as ``ray.tune.execution.placement_groups``).

A :class:`PlacementGroupFactory` describes what one trial needs: a list of
resource *bundles* (the first one is for the trainable itself, the others for
workers it starts) and a placement *strategy*. The local executor only reads the
summed resources; the Ray executor turns the same object into a Ray placement
group. Nothing here imports Ray.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from numbers import Real
from typing import Any

__all__ = [
    "STRATEGIES",
    "PlacementGroupFactory",
    "normalize_resources",
    "resource_dict_to_pg_factory",
]

#: Placement strategies Ray understands, in the order of its documentation.
STRATEGIES: tuple[str, ...] = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")

# What a trial gets when it asks for nothing, as in Ray: one CPU.
_DEFAULT_SPEC: dict[str, float] = {"cpu": 1}

# Keys of a ``resources_per_trial`` dict that Ray 1.x understood and Ray 2.x
# silently treats as custom resources (so a trial asking for them never starts).
_REMOVED_KEYS = ("extra_cpu", "extra_gpu", "extra_memory", "extra_custom_resources")


def _check_amount(where: str, key: Any, value: Any) -> float:
    """Return ``value`` as a float, or raise if it is not a usable resource amount."""
    if not isinstance(key, str) or not key:
        raise ValueError(f"{where}: resource names must be non-empty strings, got {key!r}.")
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(
            f"{where}: the amount of {key!r} must be a number, got {value!r} "
            f"({type(value).__name__})."
        )
    amount = float(value)
    if math.isnan(amount) or math.isinf(amount) or amount < 0:
        raise ValueError(
            f"{where}: the amount of {key!r} must be a finite number >= 0, got {value!r}."
        )
    return amount


def _check_bundle(index: int, bundle: Any) -> dict[str, float]:
    """Validate one bundle and return it with float amounts and zero entries dropped."""
    where = f"PlacementGroupFactory(bundles=...): bundle {index}"
    if not isinstance(bundle, Mapping):
        raise ValueError(
            f"{where} must be a dict of resource name to amount, got {bundle!r} "
            f"({type(bundle).__name__})."
        )
    out: dict[str, float] = {}
    for key, value in bundle.items():
        amount = _check_amount(where, key, value)
        if key in ("cpu", "gpu"):
            raise ValueError(
                f"{where} has the key {key!r}; bundle keys are Ray resource names, which are "
                f"case-sensitive. Use {key.upper()!r} instead."
            )
        if amount != 0:
            out[key] = amount
    return out


def _freeze(value: Any) -> str:
    """A stable text form of extra placement-group arguments, for hashing."""
    return json.dumps(value, sort_keys=True, default=repr)


class PlacementGroupFactory:
    """The resources one trial needs: bundles of resources and a placement strategy.

    The first bundle is for the trainable itself (the "head"); further bundles are
    for workers the trainable starts. Amounts of zero are dropped. An empty head
    bundle (``{}``) means the trainable needs nothing itself, only its workers.

    Args:
        bundles: Non-empty list of dicts mapping a resource name (``"CPU"``,
            ``"GPU"``, ``"memory"`` or a custom resource) to an amount >= 0.
            Fractions are allowed, e.g. ``{"GPU": 0.5}``.
        strategy: How Ray places the bundles: ``"PACK"`` (few nodes, the default),
            ``"SPREAD"``, ``"STRICT_PACK"`` (one node) or ``"STRICT_SPREAD"``.
        *args: Extra positional arguments for ``ray.util.placement_group``
            (used only by the Ray executor).
        **kwargs: Extra keyword arguments for ``ray.util.placement_group``.

    Raises:
        ValueError: If the bundles or the strategy are malformed.

    Example:
        >>> pgf = PlacementGroupFactory([{"CPU": 1, "GPU": 0.5}, {"CPU": 2}])
        >>> pgf.required_resources
        {'CPU': 3.0, 'GPU': 0.5}
        >>> pgf.head_cpus
        1.0
    """

    def __init__(
        self,
        bundles: Sequence[Mapping[str, float]],
        strategy: str = "PACK",
        *args: Any,
        **kwargs: Any,
    ) -> None:
        if isinstance(bundles, (str, bytes, Mapping)) or not isinstance(bundles, Sequence):
            raise ValueError(
                "PlacementGroupFactory(bundles=...) must be a list of dicts, e.g. "
                f"[{{'CPU': 1}}], got {bundles!r} ({type(bundles).__name__})."
            )
        if len(bundles) == 0:
            raise ValueError(
                "PlacementGroupFactory(bundles=...) needs at least one bundle, got an empty "
                "list. Use [{'CPU': 1}] for a trial that needs one CPU."
            )
        if not isinstance(strategy, str) or strategy not in STRATEGIES:
            raise ValueError(
                f"PlacementGroupFactory(strategy=...) must be one of {', '.join(STRATEGIES)}, "
                f"got {strategy!r}."
            )
        checked = [_check_bundle(i, b) for i, b in enumerate(bundles)]
        self._head_bundle_is_empty = not checked[0]
        if self._head_bundle_is_empty:
            checked.pop(0)
            if not checked:
                raise ValueError(
                    "PlacementGroupFactory(bundles=...) asks for no resources at all: the head "
                    f"bundle is empty and there are no worker bundles (got {list(bundles)!r}). "
                    "Ask for at least one resource, e.g. [{'CPU': 1}]."
                )
        self._bundles: list[dict[str, float]] = checked
        self._strategy = strategy
        self._args = tuple(args)
        self._kwargs = dict(kwargs)

    @property
    def bundles(self) -> list[dict[str, float]]:
        """A copy of the non-empty bundles (an empty head bundle is left out)."""
        return [dict(b) for b in self._bundles]

    @property
    def strategy(self) -> str:
        """The placement strategy, e.g. ``"PACK"``."""
        return self._strategy

    @property
    def head_bundle_is_empty(self) -> bool:
        """True when the trainable itself needs nothing and only worker bundles remain."""
        return self._head_bundle_is_empty

    @property
    def head_cpus(self) -> float:
        """CPUs of the trainable's own bundle (0.0 if the head bundle is empty)."""
        if self._head_bundle_is_empty:
            return 0.0
        return self._bundles[0].get("CPU", 0.0)

    @property
    def required_resources(self) -> dict[str, float]:
        """Each resource summed over all bundles."""
        total: dict[str, float] = {}
        for bundle in self._bundles:
            for key, amount in bundle.items():
                total[key] = total.get(key, 0.0) + amount
        return total

    @property
    def placement_group_args(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The extra ``(args, kwargs)`` for ``ray.util.placement_group``."""
        return self._args, dict(self._kwargs)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict from which :meth:`from_json` rebuilds an equal factory."""
        bundles = self.bundles
        if self._head_bundle_is_empty:
            bundles.insert(0, {})
        return {
            "bundles": bundles,
            "strategy": self._strategy,
            "args": list(self._args),
            "kwargs": dict(self._kwargs),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PlacementGroupFactory:
        """Rebuild a factory from :meth:`to_json` output."""
        return cls(
            data["bundles"],
            data.get("strategy", "PACK"),
            *data.get("args", ()),
            **data.get("kwargs", {}),
        )

    def _key(self) -> tuple[Any, ...]:
        # Computed once: a factory never changes after construction, and the resource
        # manager looks requests up by factory on every scheduling decision.
        key = self.__dict__.get("_cached_key")
        if key is None:
            bundles = tuple(tuple(sorted(b.items())) for b in self._bundles)
            key = self.__dict__["_cached_key"] = (
                bundles,
                self._strategy,
                self._head_bundle_is_empty,
                _freeze(list(self._args)),
                _freeze(self._kwargs),
            )
        return key

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PlacementGroupFactory):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        data = self.to_json()
        parts = [repr(data["bundles"]), f"strategy={self._strategy!r}"]
        parts += [repr(a) for a in self._args]
        parts += [f"{k}={v!r}" for k, v in self._kwargs.items()]
        return f"PlacementGroupFactory({', '.join(parts)})"


def _pop_either(spec: dict[str, Any], lower: str, upper: str) -> Any:
    """Pop ``lower`` or ``upper`` from ``spec``; both with different values is an error."""
    has_lower, has_upper = lower in spec, upper in spec
    low, up = spec.pop(lower, None), spec.pop(upper, None)
    if has_lower and has_upper and low != up:
        raise ValueError(
            f"resources: both {lower!r} ({low!r}) and {upper!r} ({up!r}) are given; "
            "keep only one of them."
        )
    if has_lower:
        return low
    return up if has_upper else 0.0


def resource_dict_to_pg_factory(spec: Mapping[str, Any] | None = None) -> PlacementGroupFactory:
    """Turn a ``resources_per_trial``-style dict into a one-bundle factory.

    Keys ``cpu``/``CPU``, ``gpu``/``GPU`` and ``memory`` become ``CPU``, ``GPU``
    and ``memory``; the entries of ``custom_resources`` and every other key are
    custom resources. As in Ray, ``None`` or ``{}`` means one CPU, while a dict
    that names other resources but no CPU asks for zero CPUs
    (``{"gpu": 1}`` gives ``{"GPU": 1.0}``).

    Args:
        spec: The resource dict, or None for the default of one CPU.

    Returns:
        A :class:`PlacementGroupFactory` with a single bundle.

    Raises:
        TypeError: If ``spec`` is not a dict.
        ValueError: If an amount is negative or not a number, or nothing is asked for.

    Example:
        >>> resource_dict_to_pg_factory({"cpu": 2, "gpu": 0.5}).bundles
        [{'CPU': 2.0, 'GPU': 0.5}]
    """
    if spec is not None and not isinstance(spec, Mapping):
        raise TypeError(
            f"resources must be a dict such as {{'cpu': 1, 'gpu': 1}}, got {spec!r} "
            f"({type(spec).__name__})."
        )
    rest = dict(spec or _DEFAULT_SPEC)
    for key in _REMOVED_KEYS:
        if key in rest:
            raise ValueError(
                f"resources: {key!r} is no longer supported (Ray 2 removed it). Describe the "
                "extra workers as further bundles: PlacementGroupFactory([{'CPU': 1}, "
                "{'CPU': 2}])."
            )
    cpus = _pop_either(rest, "cpu", "CPU")
    gpus = _pop_either(rest, "gpu", "GPU")
    memory = rest.pop("memory", 0.0)
    custom = rest.pop("custom_resources", None) or {}
    if not isinstance(custom, Mapping):
        raise ValueError(
            f"resources: 'custom_resources' must be a dict of name to amount, got {custom!r}."
        )
    bundle: dict[str, float] = {}
    for key, value in [*custom.items(), *rest.items()]:
        amount = _check_amount("resources", key, value)
        if key in bundle and bundle[key] != amount:
            raise ValueError(
                f"resources: {key!r} is given both in 'custom_resources' and as a key, with "
                "different amounts; keep only one."
            )
        bundle[key] = amount
    bundle["CPU"] = _check_amount("resources", "cpu", cpus)
    bundle["GPU"] = _check_amount("resources", "gpu", gpus)
    bundle["memory"] = _check_amount("resources", "memory", memory)
    if not any(bundle.values()):
        raise ValueError(
            f"resources={dict(spec or {})!r} asks for no resources at all; ask for at least "
            "one, e.g. {'cpu': 1}."
        )
    return PlacementGroupFactory([bundle])


def normalize_resources(resources: Any = None) -> PlacementGroupFactory:
    """Turn any accepted form of a trial's resource request into a factory.

    Args:
        resources: None (one CPU), a :class:`PlacementGroupFactory` (returned as
            is), a ``resources_per_trial``-style dict, or an object with an
            ``as_placement_group_factory()`` method (such as a ``ScalingConfig``).

    Returns:
        The equivalent :class:`PlacementGroupFactory`.

    Raises:
        TypeError: For any other kind of value.

    Example:
        >>> normalize_resources(None).required_resources
        {'CPU': 1.0}
        >>> normalize_resources({"gpu": 1}).required_resources
        {'GPU': 1.0}
    """
    if isinstance(resources, PlacementGroupFactory):
        return resources
    if resources is None or isinstance(resources, Mapping):
        return resource_dict_to_pg_factory(resources)
    convert = getattr(resources, "as_placement_group_factory", None)
    if callable(convert):
        result = convert()
        if isinstance(result, PlacementGroupFactory):
            return result
        raise TypeError(
            f"{type(resources).__name__}.as_placement_group_factory() returned {result!r}, "
            "not a PlacementGroupFactory."
        )
    raise TypeError(
        "resources must be None, a dict such as {'cpu': 2, 'gpu': 1}, or a "
        f"PlacementGroupFactory, got {resources!r} ({type(resources).__name__})."
    )
