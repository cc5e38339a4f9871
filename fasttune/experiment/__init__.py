"""Trial records (as ``ray.tune.experiment``)."""

from fasttune.experiment.trial import Trial, TrialStatus

__all__ = ["Trial", "TrialStatus"]
