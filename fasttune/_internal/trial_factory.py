"""Turn the search algorithm's suggestions into ``Trial`` records with ids, names and dirs."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from fasttune._internal.checkpoint_manager import CheckpointManager
from fasttune.config import CheckpointConfig
from fasttune.experiment.trial import Trial, new_experiment_hash


class TrialFactory:
    """Creates the trials of one experiment.

    Args:
        trainable_name: Name used in trial names and directories.
        experiment_path: The experiment directory.
        resources_for: ``config -> PlacementGroupFactory`` for a trial's resources.
        stopping_criterion: Per-trial ``{metric: threshold}`` stop dict.
        checkpoint_config: Keeps/ranks checkpoints; frequency and at-end flags.
        max_failures: Retries allowed per trial.
        trial_name_creator: Optional ``trial -> str``.
        trial_dirname_creator: Optional ``trial -> str``.
    """

    def __init__(
        self,
        trainable_name: str,
        experiment_path: str,
        resources_for: Callable[[dict[str, Any]], Any],
        stopping_criterion: dict[str, Any],
        checkpoint_config: CheckpointConfig,
        checkpoint_at_end: bool,
        max_failures: int,
        trial_name_creator: Callable[[Trial], str] | None = None,
        trial_dirname_creator: Callable[[Trial], str] | None = None,
        experiment_hash: str | None = None,
    ):
        self.trainable_name = trainable_name
        self.experiment_path = experiment_path
        self.resources_for = resources_for
        # One dict for all trials, as Ray shares its experiment's ``stop`` dict (a copy
        # per trial was ~64 bytes each, held to the end).
        self.stopping_criterion = dict(stopping_criterion)
        self.checkpoint_config = checkpoint_config
        self.checkpoint_at_end = checkpoint_at_end
        self.max_failures = max_failures
        self.trial_name_creator = trial_name_creator
        self.trial_dirname_creator = trial_dirname_creator
        self.experiment_hash = experiment_hash or new_experiment_hash()

    def trial_id(self, index: int) -> str:
        return f"{self.experiment_hash}_{index:05d}"

    def create(self, trial_id: str, index: int, suggestion: Any) -> Trial:
        """A new PENDING trial for ``suggestion`` (its directory is made when it starts)."""
        tag = f"{index}_{suggestion.tag}" if suggestion.tag else str(index)
        trial = Trial(
            self.trainable_name,
            config=suggestion.config,
            trial_id=trial_id,
            experiment_tag=tag,
            evaluated_params=suggestion.evaluated_params,
            experiment_path=self.experiment_path,
            placement_group_factory=self.resources_for(suggestion.config),
            stopping_criterion=self.stopping_criterion,
            max_failures=self.max_failures,
            checkpoint_frequency=self.checkpoint_config.checkpoint_frequency,
            checkpoint_at_end=self.checkpoint_at_end,
        )
        if self.trial_name_creator is not None:
            trial.custom_trial_name = _checked_name(
                self.trial_name_creator(trial), "trial_name_creator"
            )
        if self.trial_dirname_creator is not None:
            trial.custom_dirname = _checked_name(
                self.trial_dirname_creator(trial), "trial_dirname_creator"
            )
        trial.init_local_path()  # first: its checkpoint manager shares the folder's name
        self.attach(trial)
        return trial

    def attach(self, trial: Trial) -> None:
        """Give a (new or restored) trial its checkpoint manager and runtime settings."""
        cc = self.checkpoint_config
        manager = CheckpointManager(
            self.experiment_path,
            cc.num_to_keep,
            cc.checkpoint_score_attribute,
            cc.checkpoint_score_order,
            folder_name=trial.relative_logdir or trial.create_dirname(),
        )
        if trial.checkpoint_manager is not None:
            manager.load_json(trial.checkpoint_manager.to_json())
        trial.checkpoint_manager = manager
        if trial.placement_group_factory is None:
            trial.placement_group_factory = self.resources_for(trial.config)
        trial.stopping_criterion = self.stopping_criterion
        trial.max_failures = self.max_failures


def _checked_name(name: Any, param: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(
            f"TuneConfig.{param} must return a non-empty string, it returned {name!r}."
        )
    if os.sep in name:
        raise ValueError(
            f"TuneConfig.{param} returned {name!r}, which contains {os.sep!r}; "
            "return a plain name without path separators."
        )
    return name
