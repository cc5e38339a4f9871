"""Search quality: the best value each searcher finds in N trials, through fasttune and direct.

For every problem (Branin, Hartmann-6, a conditional space, an SVC cross-validated on
a scikit-learn data set) and every searcher (random search and each integration), the
script prints one line:

- **fasttune**: the median (and min..max over seeds) of the best value found by a
  ``fasttune.Tuner`` run of N trials in real worker processes, the searcher wrapped
  in ``ConcurrencyLimiter(max_concurrent=--concurrency)`` (1 by default, so that the
  run is sequential like the reference);
- **direct**: the same library driven by hand on the same space, budget and seeds
  (``study.ask/tell``, ``hyperopt.fmin``, ``BayesianOptimization.maximize``,
  nevergrad ``ask/tell``, hpbandster's BOHB config generator, ZOOpt's
  ``SRacosTune.suggest/complete``, Ax's ``AxClient.get_next_trial/complete_trial``,
  ``HEBO.suggest/observe``);
- **overhead**: milliseconds per trial spent in fasttune's searcher (``suggest``,
  ``on_trial_result`` and ``on_trial_complete``, called in-process without the
  runner) next to the library's own (its loop's wall time minus the objective's),
  both for the first seed.

A searcher whose module or library is missing prints ``not available: <reason>``.
The driver's linear algebra runs on one thread (threadpoolctl, if installed): on a
2-core machine BayesOpt's threaded Gaussian-process fits otherwise swing 3x in time.
``--budget`` and ``--seeds`` override every problem's N and number of seeds (Ax's and
HEBO's model fits take seconds per trial on two cores).
Run: ``.venv/bin/python bench/bench_search.py [--quick] [--markdown docs/SEARCH_QUALITY.md]``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import statistics
import sys
import tempfile
import time
import warnings
from typing import Any

import _search_contenders
import _search_problems
import cloudpickle
from _search_contenders import CONTENDERS, Contender, NotAvailable, Setup, gc_paused
from _search_problems import PROBLEMS, Problem

import fasttune as tune

# Workers unpickle the objectives by value: they need not find these modules.
cloudpickle.register_pickle_by_value(_search_problems)
cloudpickle.register_pickle_by_value(_search_contenders)

MARKERS = "<!-- bench_search:{}:begin -->", "<!-- bench_search:{}:end -->"


def run_tuner(
    problem: Problem,
    setup: Setup,
    n: int,
    objective: Any,
    concurrency: int,
    storage: str,
    name: str,
) -> float:
    """Best value of one Tuner run of ``n`` trials."""
    from fasttune.search.concurrency_limiter import ConcurrencyLimiter
    from fasttune.search.searcher import Searcher

    search_alg = setup.search_alg
    if isinstance(search_alg, Searcher):
        search_alg = ConcurrencyLimiter(search_alg, max_concurrent=concurrency)
    metric, iterations = problem.metric, setup.iterations

    def trainable(config: dict[str, Any]) -> None:
        value = objective(config)
        for _ in range(iterations):
            tune.report({metric: value})

    grid = tune.Tuner(
        trainable,
        param_space=setup.param_space,
        tune_config=tune.TuneConfig(
            search_alg=search_alg, scheduler=setup.scheduler, num_samples=n
        ),
        run_config=tune.RunConfig(storage_path=storage, name=name, verbose=0),
    ).fit()
    values = [r.metrics[metric] for r in grid if r.metrics and metric in r.metrics]
    if grid.num_errors or len(values) != n:
        first = grid.errors[0] if grid.errors else "missing results"
        raise RuntimeError(f"{grid.num_errors} errors, {len(values)}/{n} values: {first}")
    return min(values) if problem.mode == "min" else max(values)


def inprocess_overhead(problem: Problem, setup: Setup, n: int, objective: Any) -> float:
    """Seconds per trial in the searcher's calls, without the runner.

    Each trial is ``suggest``, then its final result to ``on_trial_result`` and
    ``on_trial_complete``; the result carries the budget HyperBandForBOHB would add
    (other searchers ignore it), so that TuneBOHB learns as it does in the Tuner run.
    """
    from fasttune.search.search_algorithm import SearchAlgorithm

    search_alg, param_space = setup.search_alg, setup.param_space
    spent = 0.0
    if isinstance(search_alg, SearchAlgorithm):  # the default generator
        search_alg.add_configurations(param_space, n)
        suggest = lambda trial_id: search_alg.next_suggestion(trial_id).config  # noqa: E731
    else:
        if param_space:
            search_alg.set_search_properties(None, None, param_space)
        suggest = search_alg.suggest
    with gc_paused():
        for index in range(n):
            spent += _one_trial(problem, search_alg, suggest, f"t{index:05d}", objective)
    return spent / n


def _one_trial(
    problem: Problem, search_alg: Any, suggest: Any, trial_id: str, objective: Any
) -> float:
    """Run one trial through the searcher; the seconds spent in the searcher."""
    start = time.perf_counter()
    config = suggest(trial_id)
    spent = time.perf_counter() - start
    result = {
        problem.metric: objective(config),
        "training_iteration": 1,
        "hyperband_info": {"budget": 1},
    }
    start = time.perf_counter()
    search_alg.on_trial_result(trial_id, result)
    search_alg.on_trial_complete(trial_id, result)
    return spent + time.perf_counter() - start


def _summary(values: list[float]) -> str:
    return f"{statistics.median(values):.4g} [{min(values):.4g}, {max(values):.4g}]"


def measure(problem: Problem, contender: Contender, args: Any, storage: str) -> dict[str, Any]:
    """Run one (problem, searcher) pair; a dict of figures, or ``{"skip": reason}``."""
    mode_index = 1 if args.quick else 0
    n = args.budget or problem.budget[mode_index]
    num_seeds = args.seeds or problem.seeds[mode_index]
    concurrency = args.concurrency
    objective = functools.partial(problem.objective, **problem.options[mode_index])
    seeds = list(range(num_seeds))
    started = time.perf_counter()
    try:
        fasttune_best = []
        for seed in seeds:
            setup = contender.build(problem, seed)
            name = f"{problem.name}-{contender.name}-{seed}"
            best = run_tuner(problem, setup, n, objective, concurrency, storage, name)
            fasttune_best.append(best)
        overhead = inprocess_overhead(problem, contender.build(problem, seeds[0]), n, objective)
        direct = [contender.direct(problem, seed, n, objective) for seed in seeds]
    except NotAvailable as reason:
        return {"skip": f"not available: {reason}"}
    except Exception as error:  # one broken integration must not end the bench
        return {"skip": f"FAILED: {type(error).__name__}: {str(error)[:300]}"}
    return {
        "n": n,
        "seeds": num_seeds,
        "fasttune": fasttune_best,
        "direct": [best for best, _ in direct],
        "overhead_ms": overhead * 1e3,
        "library_ms": direct[0][1] * 1e3,  # the same seed as fasttune's figure
        "seconds": time.perf_counter() - started,
    }


def line(problem: Problem, contender: Contender, figures: dict[str, Any]) -> str:
    head = f"{problem.name:<12} {contender.name:<10}"
    if "skip" in figures:
        return f"{head} {figures['skip']}"
    return (
        f"{head} N={figures['n']:<3} seeds={figures['seeds']:<2} "
        f"fasttune {_summary(figures['fasttune']):<30} "
        f"direct {_summary(figures['direct']):<30} "
        f"overhead {figures['overhead_ms']:.2f} ms vs {figures['library_ms']:.2f} ms/trial "
        f"({figures['seconds']:.1f} s)"
    )


def _markers(quick: bool) -> tuple[str, str]:
    mode = "quick" if quick else "full"
    return MARKERS[0].format(mode), MARKERS[1].format(mode)


def _flags(args: Any) -> str:
    """The command line's options that shape the table (not ``--markdown``)."""
    flags = " --quick" if args.quick else ""
    for name in ("problems", "searchers", "budget", "seeds"):
        if getattr(args, name):
            flags += f" --{name} {getattr(args, name)}"
    return flags + (f" --concurrency {args.concurrency}" if args.concurrency != 1 else "")


def markdown(rows: list[tuple[Problem, Contender, dict[str, Any]]], args: Any, wall: float) -> str:
    begin, end = _markers(args.quick)
    out = [
        begin,
        "",
        f"`bench/bench_search.py{_flags(args)}` "
        f"({time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs, "
        f"Python {sys.version.split()[0]}, {wall:.0f} s in all).",
        "",
        "| problem | searcher | N | seeds | fasttune best: median [min, max] "
        "| direct library: median [min, max] | fasttune ms/trial | library ms/trial |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for problem, contender, f in rows:
        if "skip" in f:
            out.append(f"| {problem.name} | {contender.name} | | | {f['skip']} | | | |")
            continue
        out.append(
            f"| {problem.name} | {contender.name} | {f['n']} | {f['seeds']} | "
            f"{_summary(f['fasttune'])} | {_summary(f['direct'])} | "
            f"{f['overhead_ms']:.2f} | {f['library_ms']:.2f} |"
        )
    out += ["", end]
    return "\n".join(out)


def write_markdown(path: str, table: str, quick: bool) -> None:
    """Replace this mode's table between its markers in ``path`` (other text stays)."""
    begin, end = _markers(quick)
    text = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            text = f.read()
    if begin in text and end in text:
        before, rest = text.split(begin, 1)
        text = before + table + rest.split(end, 1)[1]
    else:
        text = (text or "# Search quality\n\n") + table + "\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _one_blas_thread() -> contextlib.AbstractContextManager[Any]:
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext()
    return threadpool_limits(limits=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small budgets (~2 minutes)")
    parser.add_argument("--problems", default="", help="comma-separated problem names")
    parser.add_argument("--searchers", default="", help="comma-separated searcher names")
    parser.add_argument("--concurrency", type=int, default=1, help="live trials per searcher")
    parser.add_argument("--budget", type=int, default=0, help="trials per run (N) for all problems")
    parser.add_argument("--seeds", type=int, default=0, help="seeds per searcher for all problems")
    parser.add_argument("--markdown", default="", help="write the table into this file")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=RuntimeWarning, module="statsmodels")
    tune.init(num_cpus=2)
    problems = [p for p in PROBLEMS if not args.problems or p.name in args.problems.split(",")]
    contenders = [
        c for c in CONTENDERS if not args.searchers or c.name in args.searchers.split(",")
    ]
    rows = []
    started = time.perf_counter()
    with _one_blas_thread(), tempfile.TemporaryDirectory(prefix="fasttune-search-") as storage:
        for problem in problems:
            for contender in contenders:
                figures = measure(problem, contender, args, storage)
                rows.append((problem, contender, figures))
                print(line(problem, contender, figures), flush=True)
    wall = time.perf_counter() - started
    print(f"total {wall:.1f} s")
    if args.markdown:
        write_markdown(args.markdown, markdown(rows, args, wall), args.quick)


if __name__ == "__main__":
    main()
