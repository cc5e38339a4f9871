"""Plotly figures of an experiment, as ``optuna.visualization``.

Each function takes a :class:`~fasttune.ResultGrid`, an
:class:`~fasttune.ExperimentAnalysis`, an experiment folder (path or URL) or an
:class:`~fasttune.results.experiment_view.ExperimentView`, reads the experiment's
files and returns a ``plotly.graph_objects.Figure`` (``fig.show()`` in Jupyter,
:func:`write_figure` to save it). Needs ``pip install "fasttune[plot]"``.

Example:
    >>> from fasttune import visualization as vis  # doctest: +SKIP
    >>> vis.plot_learning_curves("~/ray_results/my_exp", metric="loss").show()  # doctest: +SKIP
"""

from fasttune.visualization._export import write_figure
from fasttune.visualization._importance import param_importances, plot_param_importances
from fasttune.visualization._plots import (
    plot_experiments_comparison,
    plot_learning_curves,
    plot_optimization_history,
    plot_parallel_coordinate,
    plot_slice,
)
from fasttune.visualization._schedulers import (
    pbt_exploits,
    plot_pbt_exploits,
    plot_stopping_points,
)
from fasttune.visualization._source import as_view

__all__ = [
    "as_view",
    "param_importances",
    "pbt_exploits",
    "plot_experiments_comparison",
    "plot_learning_curves",
    "plot_optimization_history",
    "plot_parallel_coordinate",
    "plot_param_importances",
    "plot_pbt_exploits",
    "plot_slice",
    "plot_stopping_points",
    "write_figure",
]
