"""Per-trial checkpoint bookkeeping: which checkpoints exist and which to keep."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fasttune.checkpoint import Checkpoint
from fasttune.utils.util import flatten_dict


@dataclass
class TrackedCheckpoint:
    """A persisted checkpoint and the metrics of the result it was taken at."""

    dir_name: str
    metrics: dict[str, Any] = field(default_factory=dict)
    order: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"dir_name": self.dir_name, "metrics": self.metrics, "order": self.order}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrackedCheckpoint:
        return cls(data["dir_name"], dict(data.get("metrics") or {}), int(data.get("order", 0)))


logger = logging.getLogger(__name__)
# Score attributes already warned about (once per process, not once per checkpoint).
_warned_unreported: set[str] = set()


class CheckpointManager:
    """Keeps a trial's checkpoints within ``num_to_keep``.

    With a score attribute, the ``num_to_keep`` best checkpoints are kept, plus the
    latest one (needed to resume). Without one, the latest ``num_to_keep`` are kept.

    Args:
        trial_dir: The trial's directory; checkpoints are subdirectories of it.
        num_to_keep: Maximum kept (None keeps all).
        score_attribute: Result key ranking checkpoints (may be nested with ``/``).
        score_order: ``"max"`` or ``"min"``.
        folder_name: When given, the trial's directory is ``trial_dir/folder_name``,
            joined when used: a driver holds every trial's manager to the end, and a
            trial directory's path of its own cost ~130 bytes per trial.
    """

    # Slots, no ``__dict__``, and an empty tuple until a first checkpoint: ~250 bytes
    # less per trial than attributes in a dict and an empty list (tracemalloc).
    __slots__ = (
        "_checkpoints",
        "_name",
        "_order",
        "_parent",
        "num_to_keep",
        "score_attribute",
        "score_order",
    )

    def __init__(
        self,
        trial_dir: str,
        num_to_keep: int | None = None,
        score_attribute: str | None = None,
        score_order: str = "max",
        *,
        folder_name: str | None = None,
    ):
        self._parent = trial_dir
        self._name = folder_name
        self.num_to_keep = num_to_keep
        self.score_attribute = score_attribute
        self.score_order = score_order
        self._checkpoints: Sequence[TrackedCheckpoint] = ()
        self._order = 0

    @property
    def trial_dir(self) -> str:
        """The trial's directory: checkpoints are its subdirectories."""
        if self._name is None:
            return self._parent
        return os.path.join(self._parent, self._name)

    @trial_dir.setter
    def trial_dir(self, path: str) -> None:
        self._parent, self._name = path, None

    # ------------------------------------------------------------------ queries
    def _checkpoint(self, tracked: TrackedCheckpoint) -> Checkpoint:
        return Checkpoint(os.path.join(self.trial_dir, tracked.dir_name))

    @property
    def registered(self) -> int:
        """How many checkpoints were registered, deleted ones included (a change count)."""
        return self._order

    @property
    def latest(self) -> TrackedCheckpoint | None:
        return max(self._checkpoints, key=lambda c: c.order, default=None)

    @property
    def latest_checkpoint(self) -> Checkpoint | None:
        latest = self.latest
        return None if latest is None else self._checkpoint(latest)

    @property
    def checkpoints(self) -> list[Checkpoint]:
        """Kept checkpoints, oldest first."""
        return [self._checkpoint(c) for c in sorted(self._checkpoints, key=lambda c: c.order)]

    def _score(self, tracked: TrackedCheckpoint) -> float:
        value = flatten_dict(tracked.metrics).get(self.score_attribute)  # type: ignore[arg-type]
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            return -math.inf
        if math.isnan(value):
            return -math.inf
        return float(value) if self.score_order == "max" else -float(value)

    def latest_up_to(self, attribute: str, value: float) -> Checkpoint | None:
        """The newest kept checkpoint registered with ``attribute`` (a flattened result
        key) at most ``value``, or None."""
        found: TrackedCheckpoint | None = None
        for tracked in self._checkpoints:
            at = flatten_dict(tracked.metrics).get(attribute)
            if (
                isinstance(at, (int, float))
                and not isinstance(at, bool)
                and at <= value
                and (found is None or tracked.order > found.order)
            ):
                found = tracked
        return None if found is None else self._checkpoint(found)

    def metrics_of(self, dir_name: str) -> dict[str, Any] | None:
        """The metrics checkpoint ``dir_name`` was registered with, or None if unknown."""
        for tracked in self._checkpoints:
            if tracked.dir_name == dir_name:
                return tracked.metrics
        return None

    def best_checkpoints(self) -> list[tuple[Checkpoint, dict[str, Any]]]:
        """``(checkpoint, metrics)`` pairs, oldest first; with a score, worst first and
        best last (as Ray Tune orders ``Result.best_checkpoints``), ties oldest first."""
        tracked = sorted(self._checkpoints, key=lambda c: c.order)
        if self.score_attribute is not None:
            tracked = sorted(tracked, key=self._score)  # stable: ties stay oldest first
            if self.num_to_keep is not None:
                tracked = tracked[-self.num_to_keep :]
        return [(self._checkpoint(c), c.metrics) for c in tracked]

    # ------------------------------------------------------------------ updates
    def register(self, dir_name: str, metrics: dict[str, Any]) -> list[str]:
        """Record a new checkpoint; return the directory names that should be deleted."""
        self._order += 1
        self._checkpoints = [
            *(c for c in self._checkpoints if c.dir_name != dir_name),
            TrackedCheckpoint(dir_name, dict(metrics), self._order),
        ]
        attribute = self.score_attribute
        if attribute is not None and attribute not in _warned_unreported:
            flat = flatten_dict(metrics)
            if attribute not in flat:
                _warned_unreported.add(attribute)
                logger.warning(
                    "CheckpointConfig(checkpoint_score_attribute=%r) is not among the metrics "
                    "reported with the checkpoints (e.g. %s); they are ranked as if it were "
                    "missing, so the newest are kept. Report %r with each checkpoint, or fix "
                    "the name.",
                    attribute,
                    sorted(k for k in flat if not k.startswith(("config/", "__")))[:12],
                    attribute,
                )
        return self._evict()

    def _evict(self) -> list[str]:
        if self.num_to_keep is None or len(self._checkpoints) <= self.num_to_keep:
            return []
        latest = self.latest
        if self.score_attribute is None:
            ranked = sorted(self._checkpoints, key=lambda c: c.order, reverse=True)
        else:
            ranked = sorted(
                self._checkpoints, key=lambda c: (self._score(c), c.order), reverse=True
            )
        keep = ranked[: self.num_to_keep]
        if latest is not None and latest not in keep:
            keep.append(latest)
        removed = [c.dir_name for c in self._checkpoints if c not in keep]
        self._checkpoints = [c for c in self._checkpoints if c in keep]
        return removed

    def delete_files(self, dir_names: list[str]) -> None:
        import shutil

        for name in dir_names:
            shutil.rmtree(os.path.join(self.trial_dir, name), ignore_errors=True)

    # ------------------------------------------------------------------ state
    def to_json(self) -> dict[str, Any]:
        return {"order": self._order, "checkpoints": [c.to_json() for c in self._checkpoints]}

    def load_json(self, data: dict[str, Any] | None) -> None:
        if not data:
            return
        self._order = int(data.get("order", 0))
        self._checkpoints = [TrackedCheckpoint.from_json(c) for c in data.get("checkpoints", [])]
