"""What users get back from an experiment: ``Result``, ``ResultGrid``, ``ExperimentAnalysis``."""

from fasttune.results.experiment_analysis import ExperimentAnalysis
from fasttune.results.result import Result
from fasttune.results.result_grid import ResultGrid

__all__ = ["ExperimentAnalysis", "Result", "ResultGrid"]
