"""Trial records (as ``ray.tune.experiment``)."""

from fasttune.experiment.experiment import Experiment
from fasttune.experiment.trial import Trial, TrialStatus

__all__ = ["Experiment", "Trial", "TrialStatus"]
