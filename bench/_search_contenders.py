"""The searchers of ``bench_search.py``: each one through fasttune, and its library directly.

A :class:`Contender` builds fasttune's search algorithm for a problem (``build``) and
runs the same library without fasttune (``direct``) on the same budget and seed.
Both raise :class:`NotAvailable` when the pair cannot run (missing module or library,
a space the searcher does not take); the bench prints the reason.

``direct`` returns the best value and the library's own cost per trial: the wall time
of its loop minus the time spent in the objective, divided by the number of trials.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from _search_problems import CONDITIONAL_BRANCHES, Problem


class NotAvailable(Exception):
    """This searcher cannot run this problem here (the message says why)."""


@dataclass(frozen=True)
class Setup:
    """What a fasttune run of one searcher needs.

    Attributes:
        search_alg: The searcher (wrapped in a ConcurrencyLimiter by the bench) or a
            search algorithm (used as is).
        param_space: The Tuner's ``param_space`` ({} if the searcher has its own).
        scheduler: A scheduler the searcher needs (None: FIFO).
        iterations: How many times each trial reports its (fidelity-free) value.
    """

    search_alg: Any
    param_space: dict[str, Any]
    scheduler: Any = None
    iterations: int = 1


@dataclass(frozen=True)
class Contender:
    """A searcher: how to build it for fasttune, and how to run its library directly."""

    name: str
    build: Callable[[Problem, int], Setup]
    direct: Callable[[Problem, int, int, Callable[[dict], float]], tuple[float, float]]


def _import(module: str, name: str) -> Any:
    import importlib

    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as error:
        raise NotAvailable(f"{module}.{name}: {type(error).__name__}: {error}") from None


def _best(values: list[float], mode: str) -> float:
    return min(values) if mode == "min" else max(values)


def _sign(problem: Problem) -> float:
    """Multiply by this to minimise."""
    return 1.0 if problem.mode == "min" else -1.0


class _Clock:
    """Counts the time spent in the objective, to subtract it from a library's loop."""

    def __init__(self, objective: Callable[[dict], float]):
        self.objective, self.spent, self.values = objective, 0.0, []

    def __call__(self, config: dict[str, Any]) -> float:
        start = time.perf_counter()
        value = self.objective(config)
        self.spent += time.perf_counter() - start
        self.values.append(value)
        return value


def _timed(run: Callable[[_Clock], None], objective: Callable, n: int) -> tuple[list, float]:
    clock = _Clock(objective)
    with gc_paused():
        start = time.perf_counter()
        run(clock)
        elapsed = time.perf_counter() - start
    return clock.values, (elapsed - clock.spent) / n


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Collect, then keep the garbage collector off while timing (as ``timeit`` does).

    The bench process accumulates objects; a collection landing in one loop and not
    the other would otherwise add milliseconds to one side.
    """
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


# ---------------------------------------------------------------------- random


def _random_build(problem: Problem, seed: int) -> Setup:
    from fasttune.search.basic_variant import BasicVariantGenerator

    return Setup(BasicVariantGenerator(random_state=seed), problem.param_space())


def _random_direct(problem: Problem, seed: int, n: int, objective: Callable) -> tuple[float, float]:
    def run(f: _Clock) -> None:
        rng = np.random.RandomState(seed)
        for _ in range(n):
            if problem.bounds is not None:
                f({k: rng.uniform(lo, hi) for k, (lo, hi) in problem.bounds.items()})
            else:
                kind = list(CONDITIONAL_BRANCHES)[rng.randint(len(CONDITIONAL_BRANCHES))]
                params = CONDITIONAL_BRANCHES[kind]
                f({"model": {"type": kind, **{k: rng.uniform(*b) for k, b in params.items()}}})

    values, overhead = _timed(run, objective, n)
    return _best(values, problem.mode), overhead


# ---------------------------------------------------------------------- optuna


def _optuna_define_by_run(trial: Any) -> None:
    kind = trial.suggest_categorical("type", list(CONDITIONAL_BRANCHES))
    for name, (low, high) in CONDITIONAL_BRANCHES[kind].items():
        trial.suggest_float(f"{kind}_{name}", low, high)


def _optuna_build(problem: Problem, seed: int) -> Setup:
    OptunaSearch = _import("fasttune.search.optuna", "OptunaSearch")
    _quiet_optuna()
    if problem.continuous:
        searcher = OptunaSearch(metric=problem.metric, mode=problem.mode, seed=seed)
        return Setup(searcher, problem.param_space())
    searcher = OptunaSearch(
        space=_optuna_define_by_run, metric=problem.metric, mode=problem.mode, seed=seed
    )
    return Setup(searcher, {})


def _quiet_optuna() -> None:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def _optuna_direct(problem: Problem, seed: int, n: int, objective: Callable) -> tuple[float, float]:
    import optuna

    _quiet_optuna()
    direction = "minimize" if problem.mode == "min" else "maximize"
    study = optuna.create_study(direction=direction, sampler=optuna.samplers.TPESampler(seed=seed))
    distributions = None
    if problem.bounds is not None:
        distributions = {
            k: optuna.distributions.FloatDistribution(lo, hi)
            for k, (lo, hi) in problem.bounds.items()
        }

    def run(f: _Clock) -> None:
        for _ in range(n):
            if distributions is not None:
                trial = study.ask(distributions)
            else:
                trial = study.ask()
                _optuna_define_by_run(trial)
            study.tell(trial, f(trial.params))

    values, overhead = _timed(run, objective, n)
    return _best(values, problem.mode), overhead


# ---------------------------------------------------------------------- hyperopt


def _hyperopt_build(problem: Problem, seed: int) -> Setup:
    HyperOptSearch = _import("fasttune.search.hyperopt", "HyperOptSearch")
    logging.getLogger("hyperopt").setLevel(logging.WARNING)
    searcher = HyperOptSearch(metric=problem.metric, mode=problem.mode, random_state_seed=seed)
    return Setup(searcher, problem.param_space())


def _hyperopt_space(problem: Problem) -> Any:
    from hyperopt import hp

    if problem.bounds is not None:
        return {k: hp.uniform(k, lo, hi) for k, (lo, hi) in problem.bounds.items()}
    branches = [
        {"type": kind, **{k: hp.uniform(f"{kind}_{k}", *b) for k, b in params.items()}}
        for kind, params in CONDITIONAL_BRANCHES.items()
    ]
    return {"model": hp.choice("model", branches)}


def _hyperopt_direct(
    problem: Problem, seed: int, n: int, objective: Callable
) -> tuple[float, float]:
    from hyperopt import Trials, fmin, tpe

    logging.getLogger("hyperopt").setLevel(logging.WARNING)
    sign = _sign(problem)

    def run(f: _Clock) -> None:
        fmin(
            lambda config: sign * f(config),
            _hyperopt_space(problem),
            algo=tpe.suggest,  # 20 random startup trials, gamma 0.25: Ray's defaults
            max_evals=n,
            trials=Trials(),
            rstate=np.random.default_rng(seed),
            show_progressbar=False,
        )

    values, overhead = _timed(run, objective, n)
    return _best(values, problem.mode), overhead


# ---------------------------------------------------------------------- bayesopt


def _bayesopt_build(problem: Problem, seed: int) -> Setup:
    if not problem.continuous:
        raise NotAvailable("BayesOptSearch takes continuous spaces only")
    BayesOptSearch = _import("fasttune.search.bayesopt", "BayesOptSearch")
    searcher = BayesOptSearch(metric=problem.metric, mode=problem.mode, random_state=seed)
    return Setup(searcher, problem.param_space())


def _bayesopt_direct(
    problem: Problem, seed: int, n: int, objective: Callable
) -> tuple[float, float]:
    if problem.bounds is None:
        raise NotAvailable("bayes_opt takes continuous spaces only")
    from bayes_opt import BayesianOptimization

    sign = _sign(problem)

    def run(f: _Clock) -> None:
        optimizer = BayesianOptimization(
            f=lambda **params: -sign * f(params),  # bayes_opt maximises
            pbounds=dict(problem.bounds),
            random_state=seed,
            verbose=0,
        )
        # 10 random steps first, then UCB (kappa 2.576): BayesOptSearch's defaults.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            optimizer.maximize(init_points=min(10, n), n_iter=max(0, n - 10))

    values, overhead = _timed(run, objective, n)
    return _best(values, problem.mode), overhead


# ---------------------------------------------------------------------- nevergrad


def _nevergrad_parametrization(problem: Problem) -> Any:
    import nevergrad as ng

    if problem.bounds is not None:
        return ng.p.Dict(
            **{k: ng.p.Scalar(lower=lo, upper=hi) for k, (lo, hi) in problem.bounds.items()}
        )
    branches = [
        ng.p.Dict(type=kind, **{k: ng.p.Scalar(lower=lo, upper=hi) for k, (lo, hi) in p.items()})
        for kind, p in CONDITIONAL_BRANCHES.items()
    ]
    return ng.p.Dict(model=ng.p.Choice(branches))


def _nevergrad_build(problem: Problem, seed: int) -> Setup:
    NevergradSearch = _import("fasttune.search.nevergrad", "NevergradSearch")
    import nevergrad as ng

    np.random.seed(seed)  # nevergrad seeds its parametrization from numpy's global generator
    if problem.continuous:
        searcher = NevergradSearch(
            optimizer=ng.optimizers.OnePlusOne, metric=problem.metric, mode=problem.mode
        )
        return Setup(searcher, problem.param_space())
    searcher = NevergradSearch(
        optimizer=ng.optimizers.OnePlusOne,
        space=_nevergrad_parametrization(problem),
        metric=problem.metric,
        mode=problem.mode,
    )
    return Setup(searcher, {})


def _nevergrad_direct(
    problem: Problem, seed: int, n: int, objective: Callable
) -> tuple[float, float]:
    import nevergrad as ng

    sign = _sign(problem)

    def run(f: _Clock) -> None:
        np.random.seed(seed)
        parametrization = _nevergrad_parametrization(problem)
        optimizer = ng.optimizers.OnePlusOne(parametrization=parametrization, budget=n)
        for _ in range(n):
            candidate = optimizer.ask()
            optimizer.tell(candidate, sign * f(candidate.value))

    values, overhead = _timed(run, objective, n)
    return _best(values, problem.mode), overhead


# ---------------------------------------------------------------------- BOHB


def _config_space(problem: Problem, seed: int) -> Any:
    import ConfigSpace as CS

    space = CS.ConfigurationSpace(seed=seed)
    if problem.bounds is not None:
        space.add(
            [CS.UniformFloatHyperparameter(k, lo, hi) for k, (lo, hi) in problem.bounds.items()]
        )
        return space
    kind = CS.CategoricalHyperparameter("type", list(CONDITIONAL_BRANCHES))
    space.add(kind)
    for branch, params in CONDITIONAL_BRANCHES.items():
        for name, (lo, hi) in params.items():
            hyper = CS.UniformFloatHyperparameter(f"{branch}_{name}", lo, hi)
            space.add([hyper, CS.EqualsCondition(hyper, kind, branch)])
    return space


BOHB_MAX_T = 3


def _bohb_build(problem: Problem, seed: int) -> Setup:
    """TuneBOHB with HyperBandForBOHB, as it is meant to run.

    Like Ray's, TuneBOHB learns only from results that HyperBandForBOHB stamps with a
    budget, so a one-result trainable under FIFO would leave it sampling its prior.
    Here each trial reports its value ``BOHB_MAX_T`` times (the objectives have no
    fidelity: every iteration reports the same value), so N trials are still N
    configurations, and BOHB sees them at budgets 1 and 3.
    """
    TuneBOHB = _import("fasttune.search.bohb", "TuneBOHB")
    HyperBandForBOHB = _import("fasttune.schedulers.hb_bohb", "HyperBandForBOHB")
    # Paused trials restart from scratch (no checkpoints): harmless here, as every
    # iteration reports the same value.
    logging.getLogger("fasttune.schedulers.hyperband").setLevel(logging.ERROR)
    np.random.seed(seed)  # BOHB's model samples from numpy's global generator
    scheduler = HyperBandForBOHB(
        metric=problem.metric, mode=problem.mode, max_t=BOHB_MAX_T, reduction_factor=3
    )
    if problem.continuous:
        searcher = TuneBOHB(metric=problem.metric, mode=problem.mode, seed=seed)
        return Setup(searcher, problem.param_space(), scheduler, BOHB_MAX_T)
    space = _config_space(problem, seed)
    searcher = TuneBOHB(space=space, metric=problem.metric, mode=problem.mode, seed=seed)
    return Setup(searcher, {}, scheduler, BOHB_MAX_T)


def _bohb_direct(problem: Problem, seed: int, n: int, objective: Callable) -> tuple[float, float]:
    try:
        from hpbandster.core.dispatcher import Job
        from hpbandster.optimizers.config_generators.bohb import BOHB
    except ImportError as error:
        raise NotAvailable(f"hpbandster: {error}") from None
    sign = _sign(problem)

    def run(f: _Clock) -> None:
        np.random.seed(seed)
        generator = BOHB(configspace=_config_space(problem, seed))
        for index in range(n):
            config, _ = generator.get_config(budget=1)
            job = Job((0, 0, index), budget=1, config=config)
            job.result, job.exception = {"loss": sign * f(config)}, None
            generator.new_result(job)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        values, overhead = _timed(run, objective, n)
    return _best(values, problem.mode), overhead


# ---------------------------------------------------------------------- zoopt


def _zoopt_build(problem: Problem, seed: int) -> Setup:
    if not problem.continuous:
        raise NotAvailable("ZOOptSearch takes no conditional spaces")
    ZOOptSearch = _import("fasttune.search.zoopt", "ZOOptSearch")
    # ZOOpt sizes its first sample set by the budget: the full-mode budget on both sides
    searcher = ZOOptSearch(
        budget=problem.budget[0], metric=problem.metric, mode=problem.mode, seed=seed
    )
    return Setup(searcher, problem.param_space())


def _zoopt_direct(problem: Problem, seed: int, n: int, objective: Callable) -> tuple[float, float]:
    if problem.bounds is None:
        raise NotAvailable("ZOOpt takes no conditional spaces")
    from zoopt import Dimension2, Parameter, ValueType
    from zoopt.algos.opt_algorithms.racos.sracos import SRacosTune

    sign, names = _sign(problem), list(problem.bounds)
    dims = [(ValueType.CONTINUOUS, [lo, hi], 1e-12) for lo, hi in problem.bounds.values()]

    def run(f: _Clock) -> None:
        # SRacosTune (what Ray's and fasttune's ZOOptSearch drive) by hand, one sample at a
        # time; its wait after the first sample set is lifted as ZOOptSearch does
        np.random.seed(seed)
        racos = SRacosTune(
            dimension=Dimension2(dims), parameter=Parameter(budget=problem.budget[0]),
            parallel_num=1,
        )  # fmt: skip
        for _ in range(n):
            solution = racos.suggest()
            if solution is None:
                racos.semaphore = 1
                solution = racos.suggest()
            racos.complete(solution, sign * f(dict(zip(names, solution.get_x()))))

    values, overhead = _timed(run, objective, n)
    return _best(values, problem.mode), overhead


# ---------------------------------------------------------------------- ax


def _ax_build(problem: Problem, seed: int) -> Setup:
    if not problem.continuous:
        raise NotAvailable("AxSearch takes no conditional spaces")
    AxSearch = _import("fasttune.search.ax", "AxSearch")
    _quiet_ax()
    searcher = AxSearch(metric=problem.metric, mode=problem.mode, random_seed=seed)
    return Setup(searcher, problem.param_space())


def _quiet_ax() -> None:
    """Ax sets INFO on each of its loggers (not just ``ax``), whatever ``verbose_logging``."""
    import ax.service.ax_client  # noqa: F401  (creates its loggers)

    for name in list(logging.root.manager.loggerDict):
        if name.split(".")[0] in ("ax", "botorch", "gpytorch"):
            logging.getLogger(name).setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module=r"(ax|botorch|gpytorch|linear_operator)(\.|$)")


def _ax_direct(problem: Problem, seed: int, n: int, objective: Callable) -> tuple[float, float]:
    if problem.bounds is None:
        raise NotAvailable("Ax takes no conditional spaces here")
    AxClient = _import("ax.service.ax_client", "AxClient")
    ObjectiveProperties = _import("ax.service.ax_client", "ObjectiveProperties")
    _quiet_ax()

    def run(f: _Clock) -> None:
        # AxClient's default generation strategy (Sobol points, then BoTorch), as AxSearch's
        client = AxClient(random_seed=seed, verbose_logging=False)
        client.create_experiment(
            parameters=[
                {"name": k, "type": "range", "bounds": [lo, hi], "value_type": "float"}
                for k, (lo, hi) in problem.bounds.items()
            ],
            objectives={problem.metric: ObjectiveProperties(minimize=problem.mode == "min")},
        )
        for _ in range(n):
            parameters, index = client.get_next_trial()
            value = f(parameters)
            client.complete_trial(trial_index=index, raw_data={problem.metric: (value, None)})

    values, overhead = _timed(run, objective, n)
    return _best(values, problem.mode), overhead


# ---------------------------------------------------------------------- hebo


def _hebo_build(problem: Problem, seed: int) -> Setup:
    if not problem.continuous:
        raise NotAvailable("HEBOSearch takes no conditional spaces")
    HEBOSearch = _import("fasttune.search.hebo", "HEBOSearch")
    # Batches of one, as below (in the Tuner the ConcurrencyLimiter sets the batch size)
    searcher = HEBOSearch(
        metric=problem.metric, mode=problem.mode, random_state_seed=seed, max_concurrent=1
    )
    return Setup(searcher, problem.param_space())


def _hebo_direct(problem: Problem, seed: int, n: int, objective: Callable) -> tuple[float, float]:
    if problem.bounds is None:
        raise NotAvailable("HEBO takes no conditional spaces here")
    HEBO = _import("hebo.optimizers.hebo", "HEBO")
    DesignSpace = _import("hebo.design_space.design_space", "DesignSpace")
    import torch

    sign = _sign(problem)

    def run(f: _Clock) -> None:
        # HEBOSearch's seeding: numpy's and torch's generators, and the Sobol scramble
        np.random.seed(seed)
        torch.manual_seed(seed)
        space = DesignSpace().parse(
            [
                {"name": k, "type": "num", "lb": lo, "ub": hi}
                for k, (lo, hi) in problem.bounds.items()
            ]
        )
        optimizer = HEBO(space, scramble_seed=seed)
        for _ in range(n):
            suggestion = optimizer.suggest(n_suggestions=1)
            config = {k: float(v) for k, v in suggestion.iloc[0].items()}
            optimizer.observe(suggestion, np.array([[sign * f(config)]]))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        values, overhead = _timed(run, objective, n)
    return _best(values, problem.mode), overhead


CONTENDERS = [
    Contender("random", _random_build, _random_direct),
    Contender("optuna", _optuna_build, _optuna_direct),
    Contender("hyperopt", _hyperopt_build, _hyperopt_direct),
    Contender("bayesopt", _bayesopt_build, _bayesopt_direct),
    Contender("nevergrad", _nevergrad_build, _nevergrad_direct),
    Contender("bohb", _bohb_build, _bohb_direct),
    Contender("zoopt", _zoopt_build, _zoopt_direct),
    Contender("ax", _ax_build, _ax_direct),
    Contender("hebo", _hebo_build, _hebo_direct),
]
