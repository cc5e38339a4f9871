"""Trainables for the PBT, PB2 and resource end-to-end tests.

Kept apart from the test modules so that worker processes unpickling them do not
import pytest.
"""

from __future__ import annotations

import json
import os
import tempfile

import fasttune as tune


class Climber(tune.Trainable):
    """Climbs by ``lr`` per step; remembers which trial started the model it trains."""

    def setup(self, config):
        self.value = 0.0
        self.origin = self.trial_id

    def step(self):
        self.value += self.config["lr"]
        return {"score": self.value, "lr": self.config["lr"], "origin": self.origin}

    def save_checkpoint(self, checkpoint_dir):
        return {"value": self.value, "origin": self.origin}

    def load_checkpoint(self, checkpoint):
        self.value, self.origin = checkpoint["value"], checkpoint["origin"]

    def reset_config(self, new_config):
        return True


class ResourceReporter(tune.Trainable):
    """Counts steps and reports the CPUs it was given."""

    def setup(self, config):
        self.n = 0

    def step(self):
        self.n += 1
        return {"n": self.n, "cpus": self.trial_resources.required_resources.get("CPU")}

    def save_checkpoint(self, checkpoint_dir):
        return {"n": self.n}

    def load_checkpoint(self, checkpoint):
        self.n = checkpoint["n"]


def resource_reporting_fn(config):
    """The function-API twin of :class:`ResourceReporter`."""
    start = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with open(os.path.join(checkpoint.path, "n.json")) as f:
            start = json.load(f)
    for n in range(start + 1, config["steps"] + 1):
        directory = tempfile.mkdtemp()
        with open(os.path.join(directory, "n.json"), "w") as f:
            json.dump(n, f)
        cpus = tune.get_context().get_trial_resources().required_resources.get("CPU")
        tune.report({"n": n, "cpus": cpus}, checkpoint=tune.Checkpoint.from_directory(directory))
