"""PB2's GP-bandit step: pick new hyperparameters by time-varying GP-UCB.

The model is scikit-learn's ``GaussianProcessRegressor`` with the time-varying
kernel of the PB2 paper (Parker-Holder et al., 2020; after Bogunovic et al.,
2016): a squared-exponential kernel over (reward before, hyperparameters) times
``(1 - eps) ** (|t - t'| / 2)`` over time, which is an exponential (Matern 1/2)
kernel on the time column, plus observation noise. The acquisition function is
UCB: the mean of a GP fit on the observations plus ``kappa`` times the variance of
a GP that also holds the points other trials are trying now (with the same kernel
hyperparameters), so a batch spreads out; ``kappa`` grows with the data as in the
paper. It is maximised with L-BFGS-B (``scipy.optimize``) from 10 random starts.

scikit-learn and scipy are imported when first used, with an install hint.
"""

from __future__ import annotations

import functools
import math
import warnings
from typing import Any

import numpy as np

from fasttune._support.imports import import_optional

#: Fewer observations than this are all used; beyond, the window is chosen by likelihood.
MIN_WINDOW = 200
_RESTARTS = 10
_STEP = 1e-6  # finite-difference step of the acquisition's gradient


def _sklearn(name: str) -> Any:
    return import_optional(name, extra="pb2", feature="PB2")


@functools.cache
def _on_columns_class() -> type:
    kernels = _sklearn("sklearn.gaussian_process.kernels")
    base: Any = kernels.Kernel  # loaded at run time: mypy cannot see it as a class

    class OnColumns(base):
        """A scikit-learn kernel applied to some columns of the inputs only."""

        def __init__(self, kernel: Any, columns: tuple[int, ...]):
            self.kernel = kernel
            self.columns = columns

        @property
        def hyperparameters(self) -> list[Any]:
            return [
                kernels.Hyperparameter(
                    f"kernel__{h.name}", h.value_type, h.bounds, h.n_elements, h.fixed
                )
                for h in self.kernel.hyperparameters
            ]

        @property
        def theta(self) -> np.ndarray:
            return self.kernel.theta

        @theta.setter
        def theta(self, theta: np.ndarray) -> None:
            self.kernel.theta = theta

        @property
        def bounds(self) -> np.ndarray:
            return self.kernel.bounds

        def __call__(self, X: Any, Y: Any = None, eval_gradient: bool = False) -> Any:
            X = np.asarray(X)[:, list(self.columns)]
            if Y is not None:
                Y = np.asarray(Y)[:, list(self.columns)]
            return self.kernel(X, Y, eval_gradient=eval_gradient)

        def diag(self, X: Any) -> np.ndarray:
            return self.kernel.diag(np.asarray(X)[:, list(self.columns)])

        def is_stationary(self) -> bool:
            return self.kernel.is_stationary()

        def __repr__(self) -> str:
            return f"OnColumns({self.kernel!r}, columns={self.columns})"

    return OnColumns


def on_columns(kernel: Any, columns: tuple[int, ...]) -> Any:
    """``kernel`` (a scikit-learn kernel) applied to the input ``columns`` only.

    Example:
        >>> from sklearn.gaussian_process.kernels import RBF
        >>> k = on_columns(RBF(1.0), (0,))
        >>> float(k(np.array([[0.0, 5.0]]), np.array([[0.0, -5.0]]))[0, 0])
        1.0
    """
    return _on_columns_class()(kernel, columns)


def time_varying_kernel(dim: int) -> Any:
    """The PB2 kernel for inputs of ``dim`` columns, time first.

    The paper's ``(1 - eps) ** (|dt| / 2)`` with ``eps`` in ``(0, 0.5]`` is
    ``exp(-|dt| / l)`` with ``l = -2 / ln(1 - eps)``, so ``l >= 2 / ln 2``; it starts
    at ``eps = 0.1``. The squared-exponential length scale is bounded as Ray Tune's
    PB2 clips its own (to 1 in the ``exp(-d**2 / l)`` form).
    """
    kernels = _sklearn("sklearn.gaussian_process.kernels")
    longest = math.sqrt(0.5)
    features = kernels.RBF(length_scale=longest, length_scale_bounds=(2e-3, longest))
    time = kernels.Matern(
        length_scale=-2.0 / math.log(1.0 - 0.1),
        length_scale_bounds=(2 / math.log(2), 1e5),
        nu=0.5,
    )
    return kernels.ConstantKernel(1.0, (1e-5, 1e5)) * on_columns(
        features, tuple(range(1, dim))
    ) * on_columns(time, (0,)) + kernels.WhiteKernel(1.0, (1e-6, 1e1))


def normalize(data: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Scale each column to ``[0, 1]`` with respect to ``low`` and ``high``."""
    return (data - low) / (high - low + 1e-8)


def standardize(y: np.ndarray) -> np.ndarray:
    """Zero mean, unit variance, clipped to ``[-2, 2]``."""
    return np.clip((y - y.mean()) / (y.std() + 1e-8), -2, 2)


def fit_gp(x: np.ndarray, y: np.ndarray, kernel: Any = None) -> Any:
    """Fit a GP; with ``kernel`` given its hyperparameters are kept, else they are fitted."""
    gp = _sklearn("sklearn.gaussian_process").GaussianProcessRegressor(
        kernel=kernel if kernel is not None else time_varying_kernel(x.shape[1]),
        optimizer=None if kernel is not None else "fmin_l_bfgs_b",
        alpha=1e-8,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", _sklearn("sklearn.exceptions").ConvergenceWarning)
        try:
            return gp.fit(x, y)
        except np.linalg.LinAlgError:
            gp.set_params(alpha=1e-3)
            return gp.fit(x, y)


def _scaled(x_raw: np.ndarray, low: np.ndarray, high: np.ndarray, num_fixed: int) -> np.ndarray:
    fixed = x_raw[:, :num_fixed]
    lows = np.concatenate([fixed.min(axis=0), low])
    highs = np.concatenate([fixed.max(axis=0), high])
    return normalize(x_raw, lows, highs)


def window_length(
    x_raw: np.ndarray, y_raw: np.ndarray, low: np.ndarray, high: np.ndarray, num_fixed: int
) -> int:
    """How many recent observations to use.

    All of them below :data:`MIN_WINDOW`; beyond, the window of 200, 210, ... rows
    whose data is most likely under the GP (log marginal likelihood), as Ray Tune's
    PB2 chooses it. The kernel is fitted once, on the shortest window.
    """
    n = len(x_raw)
    if n < MIN_WINDOW:
        return n
    kernel = None
    scores = []
    for length in range(MIN_WINDOW, n + 1, 10):
        x = _scaled(x_raw[-length:], low, high, num_fixed)
        gp = fit_gp(x, standardize(y_raw[-length:]), kernel)
        kernel = gp.kernel_
        scores.append(gp.log_marginal_likelihood_value_)
    return MIN_WINDOW + 10 * int(np.argmax(scores))


def select_config(
    x_raw: np.ndarray,
    y_raw: np.ndarray,
    current: np.ndarray | None,
    newpoint: np.ndarray,
    low: np.ndarray,
    high: np.ndarray,
    rng: np.random.Generator,
    num_fixed: int = 2,
) -> np.ndarray:
    """New hyperparameters (between ``low`` and ``high``) maximising GP-UCB.

    Args:
        x_raw: Observations: time, reward before, then the hyperparameters.
        y_raw: Improvement rate of each observation.
        current: Hyperparameters other trials are already trying at this point
            (one row each), or None.
        newpoint: Time and reward before of the point to choose for (the donor's).
        low: Lower bound of each hyperparameter.
        high: Upper bound of each hyperparameter.
        rng: Source of the optimiser's random starts.
        num_fixed: Leading columns that are not hyperparameters.

    Returns:
        The chosen hyperparameters, as float32 (as Ray Tune's PB2).
    """
    length = window_length(x_raw, y_raw, low, high, num_fixed)
    x_raw, y_raw = x_raw[-length:], y_raw[-length:]
    fixed_cols = x_raw[:, :num_fixed]
    x = _scaled(x_raw, low, high, num_fixed)
    y = standardize(y_raw)
    fixed = normalize(newpoint, fixed_cols.min(axis=0), fixed_cols.max(axis=0))
    model = fit_gp(x, y)
    spread = model
    if current is not None and len(current):
        pending = np.hstack([np.tile(fixed, (len(current), 1)), normalize(current, low, high)])
        spread = fit_gp(
            np.vstack([x, pending]), np.concatenate([y, np.zeros(len(pending))]), model.kernel_
        )
    kappa = math.sqrt(0.2 + max(0.0, math.log(0.4 * len(x))))
    num_params = len(low)
    steps = np.vstack([np.zeros(num_params), _STEP * np.eye(num_params)])

    def ucb(params: np.ndarray) -> np.ndarray:
        """UCB at ``params`` and at a small step along each axis (one batch per model)."""
        points = np.hstack([np.tile(fixed, (len(steps), 1)), params + steps])
        if spread is model:
            mean, std = model.predict(points, return_std=True)
        else:
            mean = model.predict(points)
            _, std = spread.predict(points, return_std=True)
        return mean + kappa * std**2

    def negative_ucb(params: np.ndarray) -> tuple[float, np.ndarray]:
        values = ucb(params)
        return -values[0], -(values[1:] - values[0]) / _STEP

    minimize = _sklearn("scipy.optimize").minimize
    # found.x (scipy is untyped here); stays None only if every restart's value is NaN
    best: Any = None
    best_value = -math.inf
    for _ in range(_RESTARTS):
        found = minimize(
            negative_ucb,
            rng.uniform(0, 1, num_params),
            jac=True,
            bounds=[(0.0, 1.0)] * num_params,
            method="L-BFGS-B",
            options={"maxiter": 200, "maxfun": 200},
        )
        if -found.fun > best_value:
            best, best_value = found.x, -found.fun
    chosen = np.clip(best, 0.0, 1.0)
    return (chosen * (high - low) + low).astype(np.float32)
