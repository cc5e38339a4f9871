"""A small controller view and trial factory for the PBT, PB2 and resource tests."""

from __future__ import annotations

from typing import Any

from fasttune import result as R
from fasttune._internal.checkpoint_manager import CheckpointManager
from fasttune.execution.placement_groups import normalize_resources
from fasttune.experiment.trial import Trial, TrialStatus


class RecordingView:
    """Implements the controller view: reads come from a list of trials; requests are
    recorded, and ``apply()`` carries them out on the trials the way the controller
    does (new config, tag, restore point, resources; the trial becomes PENDING)."""

    def __init__(
        self,
        trials: list[Trial],
        total: dict[str, float] | None = None,
        with_save: bool = False,
        search_alg: Any = None,
    ):
        self.trials = list(trials)
        self.search_alg = search_alg
        self.requests: list[tuple[str, Trial, dict[str, Any]]] = []
        if with_save:
            self.save_trial = self._save_trial
        if total is not None:
            self.get_total_resources = lambda: dict(total)

    def get_trials(self) -> list[Trial]:
        return list(self.trials)

    def get_live_trials(self) -> list[Trial]:
        return [t for t in self.trials if not t.is_finished()]

    def get_waiting_trials(self):
        return [t for t in self.trials if t.status in (TrialStatus.PENDING, TrialStatus.PAUSED)]

    def has_resources_for_trial(self, trial: Trial) -> bool:
        return True

    def pause_trial(self, trial: Trial, should_checkpoint: bool = True) -> None:
        self.requests.append(("pause", trial, {}))

    def stop_trial(self, trial: Trial) -> None:
        self.requests.append(("stop", trial, {}))

    def unpause_trial(self, trial: Trial) -> None:
        self.requests.append(("unpause", trial, {}))

    def exploit_trial(self, trial, checkpoint, new_config, new_experiment_tag=None) -> None:
        options = {"checkpoint": checkpoint, "config": new_config, "tag": new_experiment_tag}
        self.requests.append(("exploit", trial, options))

    def set_trial_resources(self, trial: Trial, resources: Any) -> None:
        self.requests.append(("resources", trial, {"resources": resources}))

    def _save_trial(self, trial: Trial) -> None:
        self.requests.append(("save", trial, {}))

    def of(self, action: str) -> list[tuple[Trial, dict[str, Any]]]:
        return [(t, o) for a, t, o in self.requests if a == action]

    def apply(self) -> None:
        for action, trial, options in self.requests:
            if action == "exploit":
                trial.set_config(options["config"])
                trial.set_experiment_tag(options["tag"])
                trial.restore_path = options["checkpoint"].path
                trial.set_status(TrialStatus.PENDING)
            elif action == "resources":
                trial.placement_group_factory = normalize_resources(options["resources"])
        self.requests.clear()


def make_trial(
    trial_id: str,
    config: dict[str, Any] | None = None,
    status: TrialStatus = TrialStatus.RUNNING,
    tag: str | None = None,
    checkpoint_dir: str | None = None,
    resources: Any = None,
    experiment_path: str | None = None,
) -> Trial:
    """A trial with a config, a status and (optionally) one checkpoint."""
    trial = Trial(
        "train",
        trial_id=trial_id,
        config=dict(config or {}),
        experiment_tag=tag if tag is not None else trial_id,
        experiment_path=experiment_path,
        placement_group_factory=normalize_resources(resources),
    )
    trial.relative_logdir = trial_id
    trial.checkpoint_manager = CheckpointManager(f"/ckpt/{trial_id}")
    if checkpoint_dir is not None:
        add_checkpoint(trial, checkpoint_dir, 0)
    trial.set_status(status)
    return trial


def add_checkpoint(trial: Trial, dir_name: str, iteration: int) -> None:
    trial.checkpoint_manager.register(dir_name, {R.TRAINING_ITERATION: iteration})


def result(iteration: int, score: float, **extra: Any) -> dict[str, Any]:
    return {R.TRAINING_ITERATION: iteration, "score": score, **extra}
