"""What a Trainable knows about the trial it runs for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Keys the runner places in a trainable's config; the Trainable pops them on init.
TRIAL_INFO = "__trial_info__"
STDOUT_FILE = "__stdout_file__"
STDERR_FILE = "__stderr_file__"


@dataclass(frozen=True)
class TrialInfo:
    """Identity, location and resources of one trial, handed to its Trainable.

    Attributes:
        trial_id: Unique id of the trial within its experiment.
        trial_name: Readable name, e.g. ``train_fn_3a2b1_00001_1_lr=0.0100``.
        experiment_name: Name of the experiment directory.
        trial_dir: Directory of the trial's results and checkpoints.
        experiment_id: Id filled into every result as ``experiment_id``.
        resources: The trial's resources (a ``PlacementGroupFactory`` or a dict).
        checkpoint_index: Index the next reported checkpoint directory will get.
    """

    trial_id: str
    trial_name: str
    experiment_name: str = ""
    trial_dir: str | None = None
    experiment_id: str | None = None
    resources: Any = None
    checkpoint_index: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def pop_runner_keys(config: dict[str, Any]) -> tuple[TrialInfo | None, str | None, str | None]:
    """Remove the keys the runner placed in ``config``.

    Returns:
        The trial info, the stdout file and the stderr file (each None if absent).
    """
    return (
        config.pop(TRIAL_INFO, None),
        config.pop(STDOUT_FILE, None),
        config.pop(STDERR_FILE, None),
    )
