"""Local resource accounting: which trial holds what on this machine.

:class:`ResourceManager` answers whether a trial's request fits (now, or ever)
and which GPU ids it gets; the controller decides *when* to start trials. What
the machine has comes from :mod:`fasttune._support.resource_detection`, whose
public names (:func:`init`, :func:`detect_total_resources`, ...) are re-exported
here.

Amounts are kept as integers (1/10000 of a unit, Ray's precision; memory in
bytes), so allocating and releasing never drifts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fasttune._support.resource_detection import (
    _BASIC,
    _ENV_RESOURCES,
    _ENV_VARS,
    _INIT_ARGS,
    _amount,
    detect_gpu_ids,
    detect_total_resources,
    init,
    is_initialized,
    parse_visible_devices,
    shutdown,
)
from fasttune._support.resource_words import describe_amount as _label
from fasttune._support.resource_words import format_number as _num
from fasttune.execution.placement_groups import PlacementGroupFactory, normalize_resources
from fasttune.executors.base import Allocation

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


# ------------------------------------------------------------------ accounting
def _scale(name: str) -> int:
    return 1 if name == "memory" else _SCALE


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
        self._units_cache: dict[PlacementGroupFactory, dict[str, int]] = {}

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
        if isinstance(pgf, PlacementGroupFactory):
            cached = self._units_cache.get(pgf)
            if cached is None:
                cached = self._units_cache[pgf] = self._units(pgf, trial_name)
            return cached
        return self._units(pgf, trial_name)

    def _units(self, pgf: Any, trial_name: str) -> dict[str, int]:
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
