"""The search algorithm and scheduler a run uses, from its ``TuneConfig``.

Names become plugins as Ray creates them (``create_searcher``/``create_scheduler``);
``max_concurrent_trials`` wraps a searcher in a ``ConcurrencyLimiter`` (or limits the
default generator's live trials); both plugins are
told the metric and mode, and a conflict between them and ``TuneConfig`` is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fasttune.tune_config import TuneConfig

if TYPE_CHECKING:
    from fasttune.search.search_algorithm import SearchAlgorithm


def _limit_concurrency(search_alg: Any, limit: int | None) -> Any:
    """A Searcher wrapped in a ConcurrencyLimiter of ``max_concurrent_trials``, as Ray does.

    Raises:
        ValueError: When the searcher already is a ConcurrencyLimiter with another limit.
    """
    from fasttune.search.concurrency_limiter import ConcurrencyLimiter
    from fasttune.search.searcher import Searcher

    if not limit or not isinstance(search_alg, Searcher):
        return search_alg
    if isinstance(search_alg, ConcurrencyLimiter):
        if search_alg.max_concurrent != limit:
            raise ValueError(
                f"TuneConfig(max_concurrent_trials={limit}) conflicts with the search_alg, a "
                f"ConcurrencyLimiter(max_concurrent={search_alg.max_concurrent}): set the "
                "limit in one place only (e.g. max_concurrent_trials=None)."
            )
        return search_alg
    return ConcurrencyLimiter(search_alg, max_concurrent=limit)


def configure_plugins(
    tune_config: TuneConfig, param_space: dict[str, Any], stop: Any = None
) -> tuple[Any, Any, str | None, str | None]:
    """The search algorithm and scheduler, told the metric/mode; plus the resolved metric/mode.

    The search algorithm also hears ``num_samples``, ``stop`` and ``time_budget_s`` as
    ``set_search_properties(..., **spec)`` keywords, as Ray's does.

    Raises:
        ValueError: metric/mode conflicts between TuneConfig and a plugin, or a plugin
            that needs a metric gets none.
    """
    from fasttune.schedulers import FIFOScheduler
    from fasttune.search.search_generator import ensure_search_algorithm

    metric, mode = tune_config.metric, tune_config.mode
    scheduler = _plugin_instance("scheduler", tune_config.scheduler)
    if scheduler is None:
        scheduler = FIFOScheduler()
    search_alg: SearchAlgorithm
    requested_search = _limit_concurrency(
        _plugin_instance("search_alg", tune_config.search_alg), tune_config.max_concurrent_trials
    )
    if requested_search is None:
        from fasttune.search.basic_variant import BasicVariantGenerator

        # As Ray's default generator: a trial is created only when one of the
        # max_concurrent_trials slots is free, not ahead of time (schedulers such as
        # HyperBand fill their brackets with the trials that exist).
        search_alg = BasicVariantGenerator(
            max_concurrent=tune_config.max_concurrent_trials or 0,
            random_state=tune_config.seed,
        )
    else:
        search_alg = ensure_search_algorithm(requested_search)
    for kind, plugin in (("scheduler", scheduler), ("search_alg", search_alg)):
        own_metric = getattr(plugin, "metric", None)
        own_mode = getattr(plugin, "mode", None)
        if metric and own_metric and own_metric != metric:
            raise ValueError(
                f"TuneConfig(metric={metric!r}) conflicts with the {kind}'s own "
                f"metric={own_metric!r}: set the metric in one place only."
            )
        if mode and own_mode and own_mode != mode:
            raise ValueError(
                f"TuneConfig(mode={mode!r}) conflicts with the {kind}'s own mode={own_mode!r}: "
                "set the mode in one place only."
            )
    if not scheduler.set_search_properties(metric, mode):
        raise ValueError(
            f"The scheduler {type(scheduler).__name__} could not take metric={metric!r} and "
            f"mode={mode!r} from TuneConfig; set them on the scheduler or in TuneConfig."
        )
    # False only means "the searcher keeps its own space"; conflicts raise in
    # add_configurations (as Ray behaves).
    spec = {
        "num_samples": tune_config.num_samples,
        "stop": stop,
        "time_budget_s": tune_config.time_budget_s,
    }
    # Nothing to tell (no space, no metric, no mode): not called, as Ray does not call
    # it without a space; a searcher's own metric stays as it was.
    if param_space or metric or mode:
        try:
            search_alg.set_search_properties(metric, mode, param_space, **spec)
        except TypeError as error:  # a user's SearchAlgorithm written without **spec
            if "unexpected keyword argument" not in str(error):
                raise
            search_alg.set_search_properties(metric, mode, param_space)
    if not metric:
        from fasttune.result import DEFAULT_METRIC

        for plugin in (scheduler, search_alg):
            own = getattr(plugin, "metric", None)
            # DEFAULT_METRIC is the placeholder for "no metric given"; a list is a
            # multi-objective searcher's, which the runner does not rank by.
            if isinstance(own, str) and own != DEFAULT_METRIC:
                metric = own
                break
    if not mode:
        modes = (getattr(scheduler, "mode", None), getattr(search_alg, "mode", None))
        mode = next((m for m in modes if isinstance(m, str)), None)
    return search_alg, scheduler, metric, mode


def _plugin_instance(parameter: str, value: Any) -> Any:
    """``TuneConfig.<parameter>`` as a plugin instance: a name is created as Ray does
    (``create_searcher``/``create_scheduler``); a class instead of an instance is refused.

    Raises:
        TypeError: ``value`` is a class.
        ValueError: ``value`` is a name no plugin has.
    """
    if isinstance(value, type):
        raise TypeError(
            f"TuneConfig({parameter}={value.__name__}) is a class; pass an instance, e.g. "
            f"TuneConfig({parameter}={value.__name__}(...))."
        )
    if isinstance(value, str):
        if parameter == "scheduler":
            from fasttune.schedulers import create_scheduler

            return create_scheduler(value)
        from fasttune.search import create_searcher

        return create_searcher(value)
    return value
