"""What this machine has: CPUs, GPUs, memory (bytes) and custom resources.

:func:`detect_total_resources` detects them; :func:`init` (re-exported as
``fasttune.init``, like ``ray.init(num_cpus=...)``) and ``FASTTUNE_*`` environment
variables override them. Overrides are validated here, with messages that name
the argument or variable; :mod:`fasttune._internal.resources` does the accounting.
:func:`init` also takes a Ray cluster's ``address``, recorded by
:mod:`fasttune._support.cluster_address`.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Mapping
from numbers import Real
from typing import Any

from fasttune._support.cluster_address import (
    LOCAL,
    check_address,
    ready_ray_connection,
    require_ray,
    set_address,
)
from fasttune._support.machine_limits import detect_cpus, detect_memory

__all__ = [
    "detect_gpu_ids",
    "detect_total_resources",
    "init",
    "is_initialized",
    "parse_visible_devices",
    "shutdown",
]

_BASIC = ("CPU", "GPU", "memory")
_ENV_VARS = {"CPU": "FASTTUNE_NUM_CPUS", "GPU": "FASTTUNE_NUM_GPUS", "memory": "FASTTUNE_MEMORY"}
_ENV_RESOURCES = "FASTTUNE_RESOURCES"
_INIT_ARGS = {"CPU": "num_cpus", "GPU": "num_gpus", "memory": "memory"}

# ray.init arguments that mean nothing without a cluster: accepted silently ...
_QUIET_RAY_ARGS = frozenset(
    {"ignore_reinit_error", "include_dashboard", "dashboard_host", "dashboard_port",
     "configure_logging", "logging_level", "logging_format", "logging_config",
     "log_to_driver", "namespace"}
)  # fmt: skip
# ... or accepted with a warning, since the user expects them to do something.
_IGNORED_RAY_ARGS = frozenset(
    {"object_store_memory", "local_mode", "labels", "job_config", "runtime_env", "storage"}
)  # fmt: skip

_init_overrides: dict[str, float] | None = None


# ------------------------------------------------------------------ validation
def _amount(where: str, name: str, value: Any) -> float:
    """``value`` as a float >= 0, or a ValueError naming ``where`` and ``name``."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ValueError(f"{where}: {name!r} must be a number, got {value!r}.")
    amount = float(value)
    if not math.isfinite(amount) or amount < 0:
        raise ValueError(f"{where}: {name!r} must be a finite number >= 0, got {value!r}.")
    if name in ("GPU", "num_gpus", "FASTTUNE_NUM_GPUS") and not amount.is_integer():
        raise ValueError(
            f"{where}: {name!r} must be a whole number of GPUs, got {value!r}. Trials may ask "
            "for a fraction of a GPU, but a machine has whole GPUs."
        )
    return amount


def _check_custom(where: str, resources: Any) -> dict[str, float]:
    """Validate a dict of custom resource name to amount."""
    if not isinstance(resources, Mapping):
        raise ValueError(
            f"{where} must be a dict of custom resource name to amount, e.g. {{'TPU': 4}}, "
            f"got {resources!r}."
        )
    out = {}
    for name, value in resources.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}: resource names must be non-empty strings, got {name!r}.")
        if name in _BASIC or name in ("cpu", "gpu"):
            basic = name.upper() if name in ("cpu", "gpu") else name
            raise ValueError(
                f"{where} may not contain {name!r}; declare it with fasttune.init("
                f"{_INIT_ARGS[basic]}=...) or {_ENV_VARS[basic]} instead."
            )
        out[name] = _amount(where, name, value)
    return out


def _check_overrides(overrides: Mapping[str, Any]) -> dict[str, float]:
    """Validate a ``detect_total_resources(overrides=...)`` dict; None values are dropped."""
    basic = {k: v for k, v in overrides.items() if k in _BASIC and v is not None}
    custom = {k: v for k, v in overrides.items() if k not in _BASIC and v is not None}
    out = {k: _amount("detect_total_resources(overrides=...)", k, v) for k, v in basic.items()}
    out.update(_check_custom("detect_total_resources(overrides=...)", custom))
    return out


def _env_overrides(environ: Mapping[str, str]) -> dict[str, float]:
    """Overrides read from the ``FASTTUNE_*`` environment variables."""
    out: dict[str, float] = {}
    for key, var in _ENV_VARS.items():
        text = environ.get(var, "").strip()
        if not text:
            continue
        try:
            value = float(text)
        except ValueError:
            raise ValueError(
                f"{var}={text!r} is not a number; set it to a number such as 4, or unset it."
            ) from None
        out[key] = _amount("environment", var, value)
    text = environ.get(_ENV_RESOURCES, "").strip()
    if text:
        try:
            custom = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(
                f"{_ENV_RESOURCES}={text!r} is not valid JSON ({e}); set it to a JSON object "
                "such as '{\"TPU\": 4}', or unset it."
            ) from None
        out.update(_check_custom(_ENV_RESOURCES, custom))
    return out


# ------------------------------------------------------------------ init / shutdown
def init(
    address: str | None = None,
    *,
    num_cpus: float | None = None,
    num_gpus: int | None = None,
    memory: float | None = None,
    resources: Mapping[str, float] | None = None,
    **ray_kwargs: Any,
) -> None:
    """Choose where trials run and declare this machine's resources, as ``ray.init`` does.

    Without ``address``, trials run in worker processes of this machine, whose
    resources are detected; arguments left as None are detected (or read from
    ``FASTTUNE_NUM_CPUS``, ``FASTTUNE_NUM_GPUS``, ``FASTTUNE_MEMORY``,
    ``FASTTUNE_RESOURCES``, which these arguments override). A second call replaces
    the first.

    With a Ray ``address`` (or ``FASTTUNE_ADDRESS``), trials run as actors on that
    Ray cluster, whose resources are the cluster's. If this process already called
    ``ray.init()``, that connection is used (and left open), and Ray builds its
    serialization context now rather than in ``fit()`` (~0.2 s: it imports pyarrow and
    pydantic, as ``from ray import tune`` does); otherwise ``Tuner.fit`` connects and
    disconnects at its end. Ray is imported only then.

    Args:
        address: ``"auto"`` (the cluster this machine belongs to), ``"ray://host:10001"``
            (Ray Client), ``"host:6379"``, or ``"local"`` to force local worker processes
            even when ``FASTTUNE_ADDRESS`` is set or Ray is connected.
        num_cpus: CPUs trials may use together (fractions allowed); local only.
        num_gpus: Whole number of GPUs; more than exist gives ids "0".."N-1"; local only.
        memory: Bytes of memory trials may ask for together; local only.
        resources: Custom resources, e.g. ``{"TPU": 4}``; local only.
        **ray_kwargs: Other ``ray.init`` arguments. With a Ray address they are passed to
            ``ray.init`` (``namespace``, ``runtime_env``...); locally they are ignored
            (with a warning for those that need a cluster, such as ``runtime_env``).

    Raises:
        ValueError: If an amount is negative, not a number, or GPUs are fractional;
            if the address is not a non-empty string; if resources are declared
            together with a Ray address (the cluster has its own).
        TypeError: For an argument ``ray.init`` does not have either.
        MissingDependencyError: For a Ray address when ``ray`` is not installed.

    Example:
        >>> init(num_cpus=2, num_gpus=0)
        >>> detect_total_resources()["CPU"]
        2.0
        >>> shutdown()
    """
    global _init_overrides
    unknown = sorted(
        k for k in ray_kwargs if k not in _QUIET_RAY_ARGS | _IGNORED_RAY_ARGS and k[:1] != "_"
    )
    if unknown:
        raise TypeError(
            f"fasttune.init() got unexpected keyword arguments {unknown}; it takes address, "
            "num_cpus, num_gpus, memory and resources (and other ray.init arguments)."
        )
    if address is not None:
        address = check_address("fasttune.init(address=...)", address)
    if address is not None and address != LOCAL:
        given = {"num_cpus": num_cpus, "num_gpus": num_gpus, "memory": memory}
        declared = [k for k, v in given.items() if v is not None]
        if resources:
            declared.append("resources")
        if declared:
            raise ValueError(
                f"fasttune.init(address={address!r}) runs trials on a Ray cluster, whose "
                f"resources are the cluster's, so {declared} cannot be given with it. "
                "Declare them where the cluster's nodes start (ray start --num-cpus=... "
                "--num-gpus=... --resources='{...}'), or use address='local'."
            )
        require_ray(f"fasttune.init(address={address!r})")
        _init_overrides = {}
        set_address(address, ray_kwargs)
        ready_ray_connection()  # a connection the process has: ready for fit() now
        return
    ignored = sorted(k for k in ray_kwargs if k in _IGNORED_RAY_ARGS and ray_kwargs[k])
    if ignored:
        warnings.warn(
            f"fasttune.init ignores {ignored}: trials run as local processes on this machine, "
            "with no Ray cluster.",
            UserWarning,
            stacklevel=2,
        )
    values = {"CPU": num_cpus, "GPU": num_gpus, "memory": memory}
    checked = {
        k: _amount("fasttune.init", _INIT_ARGS[k], v) for k, v in values.items() if v is not None
    }
    checked.update(_check_custom("fasttune.init(resources=...)", resources or {}))
    _init_overrides = checked
    set_address(address, {})


def shutdown() -> None:
    """Forget the address and resources declared with :func:`init`."""
    global _init_overrides
    _init_overrides = None
    set_address(None, {})


def is_initialized() -> bool:
    """True between :func:`init` and :func:`shutdown`."""
    return _init_overrides is not None


# ------------------------------------------------------------------ detection
def parse_visible_devices(value: str) -> list[str]:
    """The GPU ids in a ``CUDA_VISIBLE_DEVICES`` value.

    Entries are stripped and empty ones skipped; as in CUDA, an invalid entry
    (``-1``, ``NoDevFiles``) hides itself and every entry after it.

    Example:
        >>> parse_visible_devices("2, 3")
        ['2', '3']
        >>> parse_visible_devices("-1"), parse_visible_devices("")
        ([], [])
    """
    ids: list[str] = []
    for entry in (e.strip() for e in value.split(",")):
        if not entry:
            continue
        if entry.startswith("-") or entry == "NoDevFiles":
            break
        ids.append(entry)
    return ids


def _visible_gpu_ids() -> list[str]:
    """Ids from ``CUDA_VISIBLE_DEVICES`` when set, else the detected GPUs' indices."""
    value = os.environ.get("CUDA_VISIBLE_DEVICES")
    if value is not None:
        return parse_visible_devices(value)
    return [str(gpu["index"]) for gpu in _detect_gpus()]


def detect_gpu_ids(num_gpus: float | None = None) -> list[str]:
    """The GPU ids trials are given, for a machine declared to have ``num_gpus``.

    Args:
        num_gpus: The declared GPU count, or None for every visible GPU.

    Returns:
        The first ``num_gpus`` visible ids, or ``"0".."N-1"`` when more GPUs are
        declared than are visible.
    """
    visible = _visible_gpu_ids()
    if num_gpus is None:
        return visible
    count = int(num_gpus)
    return visible[:count] if count <= len(visible) else [str(i) for i in range(count)]


def detect_total_resources(overrides: Mapping[str, Any] | None = None) -> dict[str, float]:
    """This machine's resources, with declared overrides applied.

    Precedence: ``overrides`` > :func:`init` > ``FASTTUNE_*`` variables > detection.

    Args:
        overrides: Amounts keyed ``"CPU"``, ``"GPU"``, ``"memory"`` or a custom
            resource name; None values are ignored.

    Returns:
        Keys ``CPU``, ``GPU`` and ``memory`` (bytes), then custom resources.

    Raises:
        ValueError: If an override is malformed.

    Example:
        >>> detect_total_resources({"CPU": 3, "GPU": 0, "TPU": 2})["TPU"]
        2.0
    """
    merged = _env_overrides(os.environ)
    merged.update(_init_overrides or {})
    merged.update(_check_overrides(overrides or {}))
    total = {
        "CPU": merged["CPU"] if "CPU" in merged else detect_cpus(),
        "GPU": merged["GPU"] if "GPU" in merged else float(len(_visible_gpu_ids())),
        "memory": merged["memory"] if "memory" in merged else detect_memory(),
    }
    total.update({k: v for k, v in merged.items() if k not in _BASIC})
    return total


# The GPUs found, by the PATH they were looked up with (a process's GPUs do not change;
# nvidia-smi takes 0.05-1 s on a GPU machine, and a run asks for them twice).
_detected_gpus: dict[str | None, list[dict[str, Any]]] = {}


def _detect_gpus() -> list[dict[str, Any]]:
    path = os.environ.get("PATH")
    found = _detected_gpus.get(path)
    if found is None:
        from fasttune.utils.gpu import detect_gpus  # nvidia-smi or NVML: only when needed

        found = _detected_gpus[path] = detect_gpus()
    return found
