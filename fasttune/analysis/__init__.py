"""``ExperimentAnalysis`` at Ray's import path, ``ray.tune.analysis``."""

from fasttune.results.experiment_analysis import ExperimentAnalysis

__all__ = ["ExperimentAnalysis"]
