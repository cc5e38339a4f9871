"""Where trials run: this machine, or a Ray cluster.

``fasttune.init(address=...)`` (see :mod:`fasttune._support.resource_detection`) and
the ``FASTTUNE_ADDRESS`` environment variable choose, as ``ray.init(address=...)`` and
``RAY_ADDRESS`` do for Ray. :func:`ray_target` tells the Tuner which executor to use;
nothing here imports Ray.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fasttune._support.imports import MissingDependencyError

__all__ = ["ENV_ADDRESS", "LOCAL", "RayTarget", "check_address", "ray_target", "require_ray"]

LOCAL = "local"
"""The address that forces local worker processes, whatever else is configured."""

ENV_ADDRESS = "FASTTUNE_ADDRESS"

RAY_ENV_ADDRESS = "RAY_ADDRESS"
"""Ray's own: the cluster of a job submitted with ``ray job submit``."""

RAY_INSTALL_HINT = 'pip install "fasttune[ray]"'

_address: str | None = None  # set by fasttune.init(address=...)
_ray_init_kwargs: dict[str, Any] = {}


@dataclass(frozen=True)
class RayTarget:
    """The Ray cluster trials run on.

    Attributes:
        address: What ``ray.init(address=...)`` gets ("auto", "ray://host:10001",
            "host:6379"), or None for the connection this process already has.
        init_kwargs: Further ``ray.init`` arguments (``namespace``, ``runtime_env``...),
            used only when fasttune opens the connection itself.
    """

    address: str | None
    init_kwargs: Mapping[str, Any] = field(default_factory=dict)


def check_address(where: str, value: Any) -> str:
    """``value`` as an address, or a ValueError naming ``where``."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(
            f"{where} must be a Ray address such as 'auto' or 'ray://host:10001', or 'local' "
            f"for this machine's worker processes; got {value!r}."
        )
    return value.strip()


def require_ray(where: str) -> None:
    """Raise :class:`MissingDependencyError` if ``ray`` is not installed (imports nothing)."""
    if not _ray_installed():
        raise MissingDependencyError(
            f"{where} runs trials on a Ray cluster, which needs the optional package 'ray', "
            f"which is not installed. Install it with: {RAY_INSTALL_HINT}"
        )


def set_address(address: str | None, ray_init_kwargs: Mapping[str, Any]) -> None:
    """Record ``fasttune.init(address=...)`` (None forgets it)."""
    global _address, _ray_init_kwargs
    _address = address
    _ray_init_kwargs = dict(ray_init_kwargs)


def ready_ray_connection() -> bool:
    """If this process is connected to Ray, have Ray build its serialization context
    now; True if it was connected.

    Ray builds it on the first object the process sends (in ``fit()``, the first
    trial's actor start), importing pyarrow and pydantic when they are installed
    (~0.2 s here, before any actor can start). Ray Tune's own import
    (``from ray import tune``) imports both, so its user pays them before ``fit()``;
    ``import fasttune`` does not, and ``fasttune.init(address=...)``, where the script
    says it runs on Ray, pays them instead. A put of ``None`` is the cheapest public
    call that builds the context.
    """
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return False  # fit() connects (its ray.init takes seconds anyway)
    try:
        ray.put(None)
    except Exception:  # a broken connection: fit() says so, clearly
        return False
    return True


def ray_target() -> RayTarget | None:
    """The Ray cluster to run on, or None for local worker processes.

    In order: ``fasttune.init(address=...)``, then ``FASTTUNE_ADDRESS`` ("local" in
    either forces local workers), then a Ray connection this process already opened
    with ``ray.init()`` (looked up without importing Ray), then ``RAY_ADDRESS`` when
    Ray is installed (``ray job submit`` sets it, and Ray Tune's ``fit()`` connects
    there). Otherwise local.
    """
    address = _address
    kwargs = _ray_init_kwargs
    if address is None:
        address = os.environ.get(ENV_ADDRESS, "").strip() or None
        kwargs = {}
    if address is not None:
        return None if address == LOCAL else RayTarget(address, dict(kwargs))
    ray = sys.modules.get("ray")
    is_initialized = getattr(ray, "is_initialized", None)
    if callable(is_initialized) and is_initialized():
        return RayTarget(None)
    ray_address = os.environ.get(RAY_ENV_ADDRESS, "").strip()
    if ray_address and ray_address != LOCAL and _ray_installed():
        return RayTarget(ray_address)
    return None


def _ray_installed() -> bool:
    """Whether ``import ray`` can work (a test may block it: ``sys.modules["ray"] = None``)."""
    return sys.modules.get("ray", False) is not None and importlib.util.find_spec("ray") is not None
