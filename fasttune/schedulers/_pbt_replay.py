"""``PopulationBasedTrainingReplay``: train one trial on a PBT run's config schedule."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from fasttune import result as R
from fasttune.experiment.trial import Trial, TrialStatus
from fasttune.schedulers._pbt_explore import make_experiment_tag
from fasttune.schedulers._pbt_log import load_policy
from fasttune.schedulers.trial_scheduler import ControllerView, FIFOScheduler, TrialScheduler

logger = logging.getLogger(__name__)


class PopulationBasedTrainingReplay(FIFOScheduler):
    """Replay the config schedule that PBT found for one trial.

    PBT's result is a schedule of configs rather than one config. This scheduler
    trains a single trial from the schedule's initial config and, at each recorded
    ``training_iteration``, checkpoints it and continues from that checkpoint with
    the next config. The schedule is read from a ``pbt_policy_<trial_id>.txt`` file
    written by ``PopulationBasedTraining(log_config=True)``.

    Args:
        policy_file: Path to the policy file (``~`` is expanded).

    Raises:
        ValueError: The file does not exist or is not a policy file.

    Example:
        >>> import json, tempfile
        >>> row = ["0_lr=0.1", "1_lr=0.2", 3, 4, {"lr": 0.2}, {"lr": 0.16}]
        >>> with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        ...     _ = f.write(json.dumps(row) + "\\n")
        >>> replay = PopulationBasedTrainingReplay(f.name)
        >>> replay.config
        {'lr': 0.2}
        >>> replay.debug_string()
        'PopulationBasedTraining replay: Step 0, perturb 0'
    """

    _supports_buffered_results = False

    def __init__(self, policy_file: str | os.PathLike[str]):
        path = Path(policy_file).expanduser()
        if not path.exists():
            raise ValueError(f"Policy file not found: {path.as_posix()}")
        super().__init__()
        self.policy_file = path.as_posix()
        initial_config, self._policy = load_policy(self.policy_file)
        self.experiment_tag = f"replay_{os.path.basename(self.policy_file)}"
        self.config: dict[str, Any] | None = initial_config
        self.current_config = self.config
        self._trial_id: str | None = None
        self._current_step = 0
        self._num_perturbations = 0
        self._next_change = 0  # index into the policy
        self._pending: tuple[dict[str, Any], str] | None = None  # applied once paused

    def on_trial_add(self, tune_controller: ControllerView, trial: Trial) -> None:
        if self._trial_id is not None and self._trial_id != trial.trial_id:
            raise ValueError(
                "More than one trial was added to a PBT replay run, which would train the "
                "same schedule several times. Use TuneConfig(num_samples=1)."
            )
        self._trial_id = trial.trial_id
        if trial.config and self._policy:
            logger.warning(
                "The trial's config was replaced by the replayed schedule's initial config; "
                "did you start the PBT replay with a param_space?"
            )
        elif trial.config and not self._policy:
            self.config = trial.config  # only the initial policy: train with it
        elif not trial.config and not self._policy:
            raise ValueError(
                "No replay policy found and the trial has no config: pass a param_space to "
                "the Tuner, or do not use PBT replay for this run."
            )
        trial.set_config(dict(self.config or {}))

    def on_trial_result(
        self, tune_controller: ControllerView, trial: Trial, result: dict[str, Any]
    ) -> str:
        if R.TRAINING_ITERATION not in result or self._next_change >= len(self._policy):
            return TrialScheduler.CONTINUE
        step = result[R.TRAINING_ITERATION]
        self._current_step = step
        change_at, new_config = self._policy[self._next_change]
        if step < change_at:
            return TrialScheduler.CONTINUE
        logger.info(
            "Population Based Training replay is now at step %s. Configuration will be "
            "changed to %s.",
            step,
            new_config,
        )
        self._next_change += 1
        new_tag = make_experiment_tag(self.experiment_tag, new_config, new_config)
        self._pending = (new_config, new_tag)
        return TrialScheduler.PAUSE  # saves a checkpoint; the new config starts from it

    def choose_trial_to_run(self, tune_controller: ControllerView) -> Trial | None:
        if self._pending is not None:
            trial = next(
                (t for t in tune_controller.get_trials() if t.trial_id == self._trial_id), None
            )
            if trial is not None and trial.status in (TrialStatus.PAUSED, TrialStatus.PENDING):
                new_config, new_tag = self._pending
                self._pending = None
                if trial.checkpoint is None:
                    logger.warning("PBT replay: no checkpoint to continue from; config unchanged.")
                else:
                    tune_controller.exploit_trial(trial, trial.checkpoint, new_config, new_tag)
                    self.current_config = new_config
                    self._num_perturbations += 1
                return trial
        return super().choose_trial_to_run(tune_controller)

    def debug_string(self) -> str:
        return (
            f"PopulationBasedTraining replay: Step {self._current_step}, "
            f"perturb {self._num_perturbations}"
        )

    def get_state(self) -> dict[str, Any]:
        return {
            "trial_id": self._trial_id,
            "config": self.config,
            "current_config": self.current_config,
            "current_step": self._current_step,
            "num_perturbations": self._num_perturbations,
            "next_change": self._next_change,
            "pending": self._pending,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self._trial_id = state["trial_id"]
        self.config = state["config"]
        self.current_config = state["current_config"]
        self._current_step = state["current_step"]
        self._num_perturbations = state["num_perturbations"]
        self._next_change = state["next_change"]
        self._pending = state["pending"]
