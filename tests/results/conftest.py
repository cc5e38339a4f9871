"""Build real experiment directories: real Trainables, loggers, checkpoints and Trials."""

from __future__ import annotations

import datetime
import json
import os
import traceback
from collections.abc import Callable
from typing import Any

import pytest

from fasttune import Trainable
from fasttune._internal.checkpoint_manager import CheckpointManager
from fasttune.experiment.trial import Trial, TrialStatus
from fasttune.logger import CSVLogger, JsonLogger, UnifiedLogger
from fasttune.result import EXPR_ERROR_FILE
from fasttune.trainable.trial_info import TRIAL_INFO, TrialInfo


class Scripted(Trainable):
    """Reports ``config["scores"][i]`` as ``score`` at iteration ``i + 1``.

    Also reports a nested ``nested/loss`` (= -score) and can fail at an iteration.
    """

    def setup(self, config: dict[str, Any]) -> None:
        self.scores = config["scores"]
        self.fail_at = config.get("fail_at")

    def step(self) -> dict[str, Any]:
        i = self.iteration
        if self.fail_at == i + 1:
            raise ValueError(f"scripted failure at iteration {i + 1}")
        score = self.scores[i]
        return {
            "score": score,
            "nested": {"loss": -score, "info": {"step": i + 1}},
            "done": i + 1 == len(self.scores),
        }

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "state.json"), "w") as f:
            json.dump({"iteration": self.iteration}, f)


def run_trial(
    experiment_path: str,
    index: int,
    scores: list[float],
    *,
    checkpoint_every: int | None = None,
    fail_at: int | None = None,
    manager_kwargs: dict[str, Any] | None = None,
    experiment_hash: str = "abcde",
    **config: Any,
) -> Trial:
    """Run a ``Scripted`` trial to its end, as the controller would, and return its record."""
    config = {"scores": list(scores), "index": index, **config}
    if fail_at is not None:
        config["fail_at"] = fail_at
    trial = Trial(
        "Scripted",
        config=config,
        trial_id=f"{experiment_hash}_{index:05d}",
        experiment_tag=f"{index}_index={index}",
        experiment_path=experiment_path,
    )
    trial_dir = trial.init_local_path()
    os.makedirs(trial_dir, exist_ok=True)
    info = TrialInfo(trial.trial_id, str(trial), os.path.basename(experiment_path), trial_dir)

    def logger_creator(cfg: dict[str, Any]) -> UnifiedLogger:
        return UnifiedLogger(cfg, trial_dir, loggers=[JsonLogger, CSVLogger])

    trainable = Scripted({**config, TRIAL_INFO: info}, logger_creator=logger_creator)
    trial.checkpoint_manager = CheckpointManager(trial_dir, **(manager_kwargs or {}))
    trial.set_status(TrialStatus.RUNNING)
    try:
        while True:
            try:
                result = trainable.train()
            except Exception:
                trial.error_file = os.path.join(trial_dir, EXPR_ERROR_FILE)
                stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
                with open(trial.error_file, "w") as f:
                    f.write(f"Failure # 1 (occurred at {stamp})\n{traceback.format_exc()}")
                trial.set_status(TrialStatus.ERROR)
                break
            trial.update_last_result(result)
            if checkpoint_every and result["training_iteration"] % checkpoint_every == 0:
                path = trainable.save()
                evicted = trial.checkpoint_manager.register(os.path.basename(path), result)
                trial.checkpoint_manager.delete_files(evicted)
            if result["done"]:
                trial.set_status(TrialStatus.TERMINATED)
                break
    finally:
        trainable.stop()
    return trial


@pytest.fixture
def experiment_dir(tmp_path) -> str:
    path = tmp_path / "exp"
    path.mkdir()
    return str(path)


@pytest.fixture
def make_trial(experiment_dir) -> Callable[..., Trial]:
    """``make_trial(index, scores, **options)``: run one trial in the experiment dir."""

    def make(index: int, scores: list[float], **kwargs: Any) -> Trial:
        return run_trial(experiment_dir, index, scores, **kwargs)

    return make
