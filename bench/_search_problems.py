"""The problems of ``bench_search.py``: test functions, a conditional space, a real model.

Every objective takes a config in one of the shapes the searchers hand back (nested
``{"model": {"type": ..., "x": ...}}`` or flat ``{"type": ..., "quad_x": ...}`` for
the conditional space) and returns one float.

Example:
    >>> round(branin({"x1": 3.14159265, "x2": 2.275}), 5)
    0.39789
    >>> conditional({"model": {"type": "wave", "y": 6.5}})
    0.0
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import fasttune as tune


@dataclass(frozen=True)
class Problem:
    """One benchmark problem.

    Attributes:
        name: Short name printed in the tables.
        metric: The result key the trainable reports.
        mode: ``"min"`` or ``"max"``.
        objective: config -> value.
        bounds: For box-shaped problems, name -> (low, high), all uniform; None for the
            conditional space.
        optimum: The best value there is, if known.
        budget: Trials per run (full mode, quick mode).
        seeds: Seeds per searcher (full mode, quick mode).
        options: Arguments for the objective that differ by mode (e.g. the data set).
    """

    name: str
    metric: str
    mode: str
    objective: Callable[..., float]
    bounds: dict[str, tuple[float, float]] | None
    optimum: float | None
    budget: tuple[int, int]
    seeds: tuple[int, int]
    options: tuple[dict[str, Any], dict[str, Any]] = field(default=({}, {}))

    @property
    def continuous(self) -> bool:
        return self.bounds is not None

    def param_space(self) -> dict[str, Any]:
        """The space as a Tuner ``param_space`` of fasttune domains."""
        if self.bounds is None:
            return conditional_space()
        return {key: tune.uniform(low, high) for key, (low, high) in self.bounds.items()}


# ---------------------------------------------------------------------- Branin


def branin(config: dict[str, Any]) -> float:
    """Branin-Hoo on [-5, 10] x [0, 15]; minimum 0.397887 (three global minima)."""
    x1, x2 = float(config["x1"]), float(config["x2"])
    b, c = 5.1 / (4 * math.pi**2), 5 / math.pi
    r, s, t = 6.0, 10.0, 1 / (8 * math.pi)
    return (x2 - b * x1**2 + c * x1 - r) ** 2 + s * (1 - t) * math.cos(x1) + s


# ---------------------------------------------------------------------- Hartmann-6

_H6_ALPHA = (1.0, 1.2, 3.0, 3.2)
_H6_A = (
    (10, 3, 17, 3.5, 1.7, 8),
    (0.05, 10, 17, 0.1, 8, 14),
    (3, 3.5, 1.7, 10, 17, 8),
    (17, 8, 0.05, 10, 0.1, 14),
)
_H6_P = (
    (0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886),
    (0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991),
    (0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650),
    (0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381),
)


def hartmann6(config: dict[str, Any]) -> float:
    """Hartmann 6-D on [0, 1]^6; minimum -3.32237."""
    x = [float(config[f"x{i}"]) for i in range(6)]
    total = 0.0
    for alpha, a_row, p_row in zip(_H6_ALPHA, _H6_A, _H6_P):
        inner = sum(a * (xi - p) ** 2 for a, xi, p in zip(a_row, x, p_row))
        total -= alpha * math.exp(-inner)
    return total


# ---------------------------------------------------------------------- conditional

# Three "model types", each with its own parameters (name -> (low, high)).
CONDITIONAL_BRANCHES: dict[str, dict[str, tuple[float, float]]] = {
    "quad": {"x": (-5.0, 5.0)},
    "wave": {"y": (0.0, 10.0)},
    "bowl": {"u": (0.0, 1.0), "v": (0.0, 1.0)},
}


def conditional_space() -> dict[str, Any]:
    """A nested choice: the model type, then that type's own parameters."""
    return {
        "model": tune.choice(
            [
                {"type": kind, **{k: tune.uniform(lo, hi) for k, (lo, hi) in params.items()}}
                for kind, params in CONDITIONAL_BRANCHES.items()
            ]
        )
    }


def conditional_branch(config: dict[str, Any]) -> tuple[str, dict[str, float]]:
    """(type, its parameters) from a nested or flat ``"<type>_<param>"`` config."""
    if "model" in config:
        chosen = dict(config["model"])
        kind = chosen.pop("type")
        return kind, {k: float(v) for k, v in chosen.items()}
    kind = config["type"]
    names = CONDITIONAL_BRANCHES[kind]
    return kind, {k: float(config[f"{kind}_{k}"]) for k in names}


def conditional(config: dict[str, Any]) -> float:
    """Minimum 0 (type "wave", y = 6.5, among local minima); "quad" >= 0.6, "bowl" >= 0.3."""
    kind, p = conditional_branch(config)
    if kind == "quad":
        return (p["x"] - 1.5) ** 2 + 0.6
    if kind == "wave":
        d = p["y"] - 6.5
        return 0.05 * d**2 + 0.4 * (1 - math.cos(3 * d))
    return (p["u"] - 0.3) ** 2 + (p["v"] - 0.7) ** 2 + 0.3


# ---------------------------------------------------------------------- a real model

_DATA: dict[str, Any] = {}


def svc_accuracy(config: dict[str, Any], dataset: str = "breast_cancer") -> float:
    """3-fold cross-validated accuracy of an RBF SVC (standardised features).

    ``log_C`` in [-2, 3] and ``log_gamma`` in [-5, -1] are base-10 logarithms, so the
    space is a uniform box every searcher (BayesOpt included) can take.
    """
    from sklearn import datasets
    from sklearn.model_selection import cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC

    if dataset not in _DATA:
        _DATA[dataset] = getattr(datasets, f"load_{dataset}")(return_X_y=True)
    X, y = _DATA[dataset]
    model = make_pipeline(
        StandardScaler(), SVC(C=10.0 ** config["log_C"], gamma=10.0 ** config["log_gamma"])
    )
    return float(cross_val_score(model, X, y, cv=3).mean())


PROBLEMS = [
    Problem(
        "branin",
        "value",
        "min",
        branin,
        {"x1": (-5.0, 10.0), "x2": (0.0, 15.0)},
        0.397887,
        budget=(60, 30),
        seeds=(10, 3),
    ),
    Problem(
        "hartmann6",
        "value",
        "min",
        hartmann6,
        {f"x{i}": (0.0, 1.0) for i in range(6)},
        -3.32237,
        budget=(80, 30),
        seeds=(10, 3),
    ),
    Problem(
        "conditional",
        "value",
        "min",
        conditional,
        None,
        0.0,
        budget=(60, 30),
        seeds=(10, 3),
    ),
    Problem(
        "svc",
        "accuracy",
        "max",
        svc_accuracy,
        {"log_C": (-2.0, 3.0), "log_gamma": (-5.0, -1.0)},
        None,
        budget=(40, 20),
        seeds=(5, 2),
        options=({"dataset": "digits"}, {"dataset": "breast_cancer"}),
    ),
]
