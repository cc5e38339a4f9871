"""``MyTrainableClass``, the small Trainable of Ray Tune's examples (``ray.tune.utils``).

Its ``episode_reward_mean`` rises as ``height * tanh(timestep / width)``, so schedulers
such as HyperBand and PBT have something to compare; a checkpoint holds the timestep.

Example:
    >>> t = MyTrainableClass(config={"width": 2, "height": 3})
    >>> round(t.train()["episode_reward_mean"], 4)
    1.3864
    >>> t.stop()
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

from fasttune.trainable.trainable import Trainable

__all__ = ["MyTrainableClass"]


class MyTrainableClass(Trainable):
    """A Trainable whose reward follows ``height * tanh(timestep / width)``.

    Config keys: ``width`` (default 1) and ``height`` (default 1).
    """

    def setup(self, config: dict[str, Any]) -> None:
        self.timestep = 0

    def step(self) -> dict[str, Any]:
        self.timestep += 1
        value = math.tanh(float(self.timestep) / self.config.get("width", 1))
        return {"episode_reward_mean": value * self.config.get("height", 1)}

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "checkpoint"), "w") as f:
            json.dump({"timestep": self.timestep}, f)

    def load_checkpoint(self, checkpoint: Any) -> None:
        path = checkpoint if isinstance(checkpoint, str) else checkpoint.path
        with open(os.path.join(path, "checkpoint")) as f:
            self.timestep = json.load(f)["timestep"]
