"""Local resource accounting: what this machine has and which trial holds what.

:func:`detect_total_resources` finds the machine's CPUs, GPUs, memory (bytes) and
custom resources; :func:`init` (re-exported as ``fasttune.init``, like
``ray.init(num_cpus=...)``) and ``FASTTUNE_*`` environment variables override
them. :class:`ResourceManager` answers whether a trial's request fits (now, or
ever) and which GPU ids it gets; the controller decides *when* to start trials.

Amounts are kept as integers (1/10000 of a unit, Ray's precision; memory in
bytes), so allocating and releasing never drifts.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Mapping, Sequence
from numbers import Real
from pathlib import Path
from typing import Any

from fasttune.execution.placement_groups import PlacementGroupFactory, normalize_resources
from fasttune.executors.base import Allocation
from fasttune.utils.gpu import detect_gpus

__all__ = [
    "ResourceManager",
    "detect_gpu_ids",
    "detect_total_resources",
    "init",
    "is_initialized",
    "parse_visible_devices",
    "shutdown",
]

_SCALE = 10_000  # resources are counted in 1/10000 of a unit, as in Ray
_BASIC = ("CPU", "GPU", "memory")
_ENV_VARS = {"CPU": "FASTTUNE_NUM_CPUS", "GPU": "FASTTUNE_NUM_GPUS", "memory": "FASTTUNE_MEMORY"}
_ENV_RESOURCES = "FASTTUNE_RESOURCES"
_INIT_ARGS = {"CPU": "num_cpus", "GPU": "num_gpus", "memory": "memory"}
_GIB = 1024**3

# ray.init arguments that mean nothing without a cluster: accepted silently ...
_QUIET_RAY_ARGS = frozenset(
    {"ignore_reinit_error", "include_dashboard", "dashboard_host", "dashboard_port",
     "configure_logging", "logging_level", "logging_format", "logging_config",
     "log_to_driver", "namespace"}
)  # fmt: skip
# ... or accepted with a warning, since the user expects them to do something.
_IGNORED_RAY_ARGS = frozenset(
    {"address", "object_store_memory", "local_mode", "labels", "job_config", "runtime_env",
     "storage"}
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
    num_cpus: float | None = None,
    num_gpus: int | None = None,
    memory: float | None = None,
    resources: Mapping[str, float] | None = None,
    **ray_kwargs: Any,
) -> None:
    """Declare this process's resources, as ``ray.init(num_cpus=...)`` does.

    Arguments left as None are detected (or read from ``FASTTUNE_NUM_CPUS``,
    ``FASTTUNE_NUM_GPUS``, ``FASTTUNE_MEMORY``, ``FASTTUNE_RESOURCES``, which these
    arguments override). A second call replaces the first.

    Args:
        num_cpus: CPUs trials may use together (fractions allowed).
        num_gpus: Whole number of GPUs; more than exist gives ids "0".."N-1".
        memory: Bytes of memory trials may ask for together.
        resources: Custom resources, e.g. ``{"TPU": 4}``.
        **ray_kwargs: Other ``ray.init`` arguments, accepted and ignored (with a
            warning for those that need a cluster, such as ``address``).

    Raises:
        ValueError: If an amount is negative, not a number, or GPUs are fractional.
        TypeError: For an argument ``ray.init`` does not have either.

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
            f"fasttune.init() got unexpected keyword arguments {unknown}; it takes num_cpus, "
            "num_gpus, memory and resources (and ignores other ray.init arguments)."
        )
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


def shutdown() -> None:
    """Forget the resources declared with :func:`init`."""
    global _init_overrides
    _init_overrides = None


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
    return [str(gpu["index"]) for gpu in detect_gpus()]


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


def _detect_cpus() -> float:
    """CPUs this process may run on."""
    try:
        return float(len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return float(os.cpu_count() or 1)


def _cgroup_memory_limit(root: str | Path = "/sys/fs/cgroup") -> int | None:
    """The container's memory limit in bytes (cgroup v2 or v1), or None if unlimited."""
    root = Path(root)
    for path in (root / "memory.max", root / "memory" / "memory.limit_in_bytes"):
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:  # v1 writes a huge number for "no limit"
            return int(text)
    return None


def _physical_memory() -> int:
    """Total physical memory in bytes (0 if it cannot be read)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        pass
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except Exception:  # not installed, or unsupported platform
        return 0


def _detect_memory() -> float:
    """Physical memory, or the container's limit when that is lower."""
    total, limit = _physical_memory(), _cgroup_memory_limit()
    if limit is not None and (total == 0 or limit < total):
        total = limit
    return float(total)


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
        "CPU": merged["CPU"] if "CPU" in merged else _detect_cpus(),
        "GPU": merged["GPU"] if "GPU" in merged else float(len(_visible_gpu_ids())),
        "memory": merged["memory"] if "memory" in merged else _detect_memory(),
    }
    total.update({k: v for k, v in merged.items() if k not in _BASIC})
    return total


# ------------------------------------------------------------------ accounting
def _scale(name: str) -> int:
    return 1 if name == "memory" else _SCALE


def _num(value: float) -> str:
    """A number without a needless ``.0``: 8, 0.5."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _label(name: str, amount: float) -> str:
    """``amount`` of ``name`` in words: "4 CPUs", "1 GPU", "2 of the custom resource 'TPU'"."""
    if name == "memory":
        return f"{_num(amount)} bytes ({amount / _GIB:.2f} GiB) of memory"
    if name in ("CPU", "GPU"):
        return f"{_num(amount)} {name}{'' if amount == 1 else 's'}"
    return f"{_num(amount)} of the custom resource {name!r}"


def _never_fits(name: str, asked: float, has: float, trial_name: str) -> str:
    """The message for a request that can never fit on this machine."""
    who = f"Trial {trial_name!r}" if trial_name else "A trial"
    key = {"CPU": "cpu", "GPU": "gpu"}.get(name, name)
    need = _num(asked)
    if name in _BASIC:
        declare = f"fasttune.init({_INIT_ARGS[name]}={need}) or {_ENV_VARS[name]}={need}"
    else:
        declare = (
            f"fasttune.init(resources={{{name!r}: {need}}}) or "
            f"{_ENV_RESOURCES}='{{\"{name}\": {need}}}'"
        )
    if has:
        lower = f"Lower the request to at most {_num(has)}"
    else:
        lower = f"Remove {key!r} from the request"
    none = "no GPU detected or declared" if name == "GPU" else "none"
    return (
        f"{who} asks for {_label(name, asked)}, but this machine has "
        f"{_label(name, has) if has else none}, so it can never start. {lower} "
        f"(tune.with_resources(trainable, {{{key!r}: ...}}) or resources_per_trial), or "
        f"declare more with {declare}."
    )


class ResourceManager:
    """Tracks which trial holds which resources on this machine.

    Requests are :class:`PlacementGroupFactory` objects (or anything
    :func:`normalize_resources` accepts); their bundles are summed. A GPU request
    below 1 shares a GPU (the fullest one it fits on); a request of k >= 1 must
    be whole and gets k wholly free GPUs. Not thread-safe: one controller owns it.

    Args:
        total: Resources of the machine; None detects them (see
            :func:`detect_total_resources`). Missing keys count as 0.
        gpu_ids: One id per GPU, handed to trials; defaults to the detected ids
            (or ``"0".."N-1"`` when ``total`` is given).

    Example:
        >>> rm = ResourceManager({"CPU": 2, "GPU": 1})
        >>> rm.try_allocate("a", PlacementGroupFactory([{"CPU": 1, "GPU": 0.5}])).gpu_ids
        ('0',)
        >>> rm.usage_string()
        'Logical resource usage: 1.0/2 CPUs, 0.5/1 GPUs'
    """

    def __init__(
        self, total: Mapping[str, float] | None = None, gpu_ids: Sequence[str] | None = None
    ) -> None:
        if total is None:
            total = detect_total_resources()
            if gpu_ids is None:
                gpu_ids = detect_gpu_ids(total["GPU"])
        checked = {"CPU": 0.0, "GPU": 0.0, "memory": 0.0}
        checked.update({k: _amount("ResourceManager(total=...)", k, v) for k, v in total.items()})
        num_gpus = int(checked["GPU"])
        ids = [str(i) for i in range(num_gpus)] if gpu_ids is None else [str(g) for g in gpu_ids]
        if len(ids) != num_gpus or len(set(ids)) != len(ids):
            raise ValueError(
                f"ResourceManager(gpu_ids={list(ids)!r}) must hold {num_gpus} distinct ids, one "
                f"per GPU of total={dict(total)!r}."
            )
        self._total = {k: round(v * _scale(k)) for k, v in checked.items()}
        self._used = dict.fromkeys(self._total, 0)
        self._gpu_ids = ids
        self._gpu_free = [_SCALE] * num_gpus  # free units of each GPU
        # trial id -> (allocation, units held, (GPU index, units) pairs)
        self._held: dict[str, tuple[Allocation, dict[str, int], list[tuple[int, int]]]] = {}

    # ------------------------------------------------------------ views
    @property
    def total(self) -> dict[str, float]:
        """The machine's resources (memory in bytes)."""
        return {k: v / _scale(k) for k, v in self._total.items()}

    @property
    def gpu_ids(self) -> tuple[str, ...]:
        """The id of each GPU, in allocation order."""
        return tuple(self._gpu_ids)

    @property
    def num_allocated(self) -> int:
        """Trials holding resources."""
        return len(self._held)

    def used(self) -> dict[str, float]:
        """Resources held by trials, per name."""
        return {k: v / _scale(k) for k, v in self._used.items()}

    def available(self) -> dict[str, float]:
        """Resources not held (GPU is the sum of free fractions, possibly split)."""
        return {k: (self._total[k] - self._used[k]) / _scale(k) for k in self._total}

    def allocation(self, trial_id: str) -> Allocation | None:
        """What ``trial_id`` holds, or None."""
        held = self._held.get(trial_id)
        return held[0] if held else None

    def usage_string(self) -> str:
        """Usage in Ray's words: ``"Logical resource usage: 2.0/8 CPUs, 0.5/1 GPUs"``."""

        def used(name: str) -> str:  # Ray prints 0 while no trial asks for a resource
            return str(self._used[name] / _SCALE) if self._used[name] else "0"

        text = (
            f"Logical resource usage: {used('CPU')}/{_num(self._total['CPU'] / _SCALE)} "
            f"CPUs, {used('GPU')}/{_num(self._total['GPU'] / _SCALE)} GPUs"
        )
        customs = ", ".join(
            f"{self._used[k] / _SCALE}/{self._total[k] / _SCALE} {k}"
            for k in self._total
            if k not in _BASIC
        )
        return f"{text} ({customs})" if customs else text

    def __repr__(self) -> str:
        return f"ResourceManager({self.usage_string()!r}, trials={self.num_allocated})"

    # ------------------------------------------------------------ requests
    def _request(self, pgf: Any, trial_name: str) -> dict[str, int]:
        """The summed request in units; raises if it is malformed or never fits."""
        who = f"Trial {trial_name!r}" if trial_name else "A trial"
        units: dict[str, int] = {}
        for name, amount in normalize_resources(pgf).required_resources.items():
            n = round(amount * _scale(name))
            if n == 0 and amount > 0:
                if name != "memory":
                    raise ValueError(
                        f"{who} asks for {amount!r} of {name!r}; amounts finer than 0.0001 are "
                        "not supported (as in Ray). Round the request."
                    )
                n = 1
            if n:
                units[name] = n
        gpus = units.get("GPU", 0)
        if gpus > _SCALE and gpus % _SCALE:
            raise ValueError(
                f"{who} asks for {gpus / _SCALE!r} GPUs; GPU requests above 1 must be whole "
                "numbers (as in Ray), since such a trial gets whole devices. Ask for "
                f"{gpus // _SCALE} or {gpus // _SCALE + 1} GPUs, or for a fraction below 1 to "
                "share a GPU (the bundles of a PlacementGroupFactory are summed)."
            )
        for name, n in units.items():
            has = self._total.get(name, 0)
            if n > has:
                raise ValueError(
                    _never_fits(name, n / _scale(name), has / _scale(name), trial_name)
                )
        return units

    def check_fits(self, pgf: PlacementGroupFactory | Any, trial_name: str = "") -> None:
        """Raise if the request could never fit, even on an idle machine.

        Raises:
            ValueError: Naming the resource, the amount asked and the amount this
                machine has, and how to lower the request or declare more.
        """
        self._request(pgf, trial_name)

    def _pick_gpus(self, units: int) -> list[tuple[int, int]] | None:
        """``(GPU index, units)`` pairs for a GPU request, or None if it does not fit now."""
        if units == 0:
            return []
        if units < _SCALE:  # best fit: the fullest GPU that still has room
            fits = [(free, i) for i, free in enumerate(self._gpu_free) if free >= units]
            return [(min(fits)[1], units)] if fits else None
        whole = [i for i, free in enumerate(self._gpu_free) if free == _SCALE]
        count = units // _SCALE
        return [(i, _SCALE) for i in whole[:count]] if len(whole) >= count else None

    def can_allocate(self, pgf: PlacementGroupFactory | Any) -> bool:
        """True if the request fits now (reserves nothing)."""
        units = self._request(pgf, "")
        if any(self._used[k] + n > self._total[k] for k, n in units.items() if k != "GPU"):
            return False
        return self._pick_gpus(units.get("GPU", 0)) is not None

    def try_allocate(self, trial_id: str, pgf: PlacementGroupFactory | Any) -> Allocation | None:
        """Reserve the request for ``trial_id`` if it fits now.

        Returns:
            The :class:`Allocation`, or None when the request does not fit now.

        Raises:
            ValueError: If it can never fit (see :meth:`check_fits`), is malformed,
                or ``trial_id`` already holds resources.
        """
        if trial_id in self._held:
            raise ValueError(f"Trial {trial_id!r} already holds resources; release them first.")
        units = self._request(pgf, trial_id)
        if any(self._used[k] + n > self._total[k] for k, n in units.items() if k != "GPU"):
            return None
        gpus = self._pick_gpus(units.get("GPU", 0))
        if gpus is None:
            return None
        for name, n in units.items():
            self._used[name] += n
        for index, n in gpus:
            self._gpu_free[index] -= n
        allocation = Allocation(
            cpu=units.get("CPU", 0) / _SCALE,
            gpu=units.get("GPU", 0) / _SCALE,
            gpu_ids=tuple(self._gpu_ids[i] for i, _ in gpus),
            memory=float(units.get("memory", 0)),
            custom={k: n / _SCALE for k, n in units.items() if k not in _BASIC},
        )
        self._held[trial_id] = (allocation, units, gpus)
        return allocation

    def release(self, trial_id: str) -> Allocation | None:
        """Free what ``trial_id`` holds; returns it (None if it held nothing)."""
        held = self._held.pop(trial_id, None)
        if held is None:
            return None
        allocation, units, gpus = held
        for name, n in units.items():
            self._used[name] -= n
        for index, n in gpus:
            self._gpu_free[index] += n
        return allocation
