"""``ConcurrencyLimiter``: at most N trials of a searcher alive at once (as Ray's).

A trial is *live* from the moment its config is suggested until the searcher hears
that it completed (or failed), so pending trials count too. With ``batch=True`` no
slot is freed, and the wrapped searcher learns nothing, until every live trial of
the batch has completed; then it hears all of them at once, in completion order.

Example:
    >>> from fasttune.search.searcher import Searcher
    >>> class Count(Searcher):
    ...     def __init__(self):
    ...         super().__init__(metric="loss", mode="min")
    ...         self.n = 0
    ...     def suggest(self, trial_id):
    ...         self.n += 1
    ...         return {"x": self.n}
    >>> limiter = ConcurrencyLimiter(Count(), max_concurrent=2)
    >>> [limiter.suggest(t) for t in ("a", "b", "c")]
    [{'x': 1}, {'x': 2}, None]
    >>> limiter.on_trial_complete("a", {"loss": 0.5})
    >>> limiter.suggest("c"), sorted(limiter.live_trials)
    ({'x': 3}, ['b', 'c'])
"""

from __future__ import annotations

import copy
import logging
from numbers import Integral
from typing import Any

from fasttune._support.noop_hooks import forwarding_hook
from fasttune.search.search_algorithm import check_state_kind
from fasttune.search.search_generator import (
    _restore_own_or_wrapped,
    _restore_searcher,
    _saved_searcher,
    _set_searcher_properties,
)
from fasttune.search.searcher import Searcher

logger = logging.getLogger(__name__)

_STATE_KIND = "ConcurrencyLimiter/1"


class ConcurrencyLimiter(Searcher):
    """Wrap a searcher so that at most ``max_concurrent`` of its trials are live at once.

    :meth:`suggest` returns None (ask again later) while the limit is reached. If the
    wrapped searcher limits concurrency itself (its ``set_max_concurrency`` returns
    True), the limiter hands it ``max_concurrent`` and only passes calls through.

    Args:
        searcher: The searcher to limit.
        max_concurrent: Most live trials at once (an int >= 1).
        batch: If True, wait until the whole batch of live trials has completed
            before telling the wrapped searcher about any of them and suggesting more.

    Raises:
        TypeError: If ``searcher`` is not a :class:`Searcher` or ``max_concurrent`` is
            not an int.
        ValueError: If ``max_concurrent`` < 1.

    Example:
        >>> from fasttune.search.searcher import Searcher
        >>> class Zeros(Searcher):
        ...     def suggest(self, trial_id):
        ...         return {"x": 0}
        >>> limiter = ConcurrencyLimiter(Zeros(), max_concurrent=2, batch=True)
        >>> limiter.suggest("a"), limiter.suggest("b"), limiter.suggest("c")
        ({'x': 0}, {'x': 0}, None)
        >>> limiter.on_trial_complete("a", {"loss": 1.0})
        >>> limiter.suggest("c")  # "b" of the batch still runs
        >>> limiter.on_trial_complete("b", {"loss": 2.0})
        >>> limiter.suggest("c")
        {'x': 0}
    """

    def __init__(self, searcher: Searcher, max_concurrent: int, batch: bool = False):
        if not isinstance(searcher, Searcher):
            raise TypeError(
                "ConcurrencyLimiter: `searcher` must be a Searcher (e.g. OptunaSearch), got "
                f"{type(searcher).__name__}: {searcher!r}. To limit the default search "
                "algorithm, use BasicVariantGenerator(max_concurrent=...) or "
                "TuneConfig(max_concurrent_trials=...)."
            )
        self.searcher = searcher
        self.max_concurrent = _check_max_concurrent(max_concurrent)
        self.batch = bool(batch)
        self.live_trials: set[str] = set()
        self.num_unfinished_live_trials = 0
        self.cached_results: dict[str, tuple[dict[str, Any] | None, bool]] = {}
        self._limit_concurrency = True
        self._hand_limit_to_searcher()

    # metric and mode are the wrapped searcher's (the Tuner may set them later).
    @property
    def metric(self) -> Any:
        """The wrapped searcher's metric."""
        return self.searcher.metric

    @property
    def mode(self) -> Any:
        """The wrapped searcher's mode."""
        return self.searcher.mode

    def _hand_limit_to_searcher(self) -> None:
        # A searcher that limits concurrency itself keeps doing so; we step aside.
        self._limit_concurrency = not self.searcher.set_max_concurrency(self.max_concurrent)

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        """Take a new limit; returns True (this wrapper enforces it).

        Raises:
            TypeError: If ``max_concurrent`` is not an int.
            ValueError: If ``max_concurrent`` < 1.
        """
        self.max_concurrent = _check_max_concurrent(max_concurrent)
        if not self._limit_concurrency:
            self.searcher.set_max_concurrency(self.max_concurrent)
        return True

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        """Pass metric, mode and the space on to the wrapped searcher."""
        self._hand_limit_to_searcher()
        return _set_searcher_properties(self.searcher, metric, mode, config, **spec)

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        """The wrapped searcher's suggestion, or None while ``max_concurrent`` trials are live.

        Raises:
            ValueError: If ``trial_id`` is already live (ids must be unique).
        """
        if not self._limit_concurrency:
            return self.searcher.suggest(trial_id)
        if trial_id in self.live_trials:
            raise ValueError(
                f"ConcurrencyLimiter.suggest: trial id {trial_id!r} is already live; every "
                "suggestion needs a new trial id."
            )
        if len(self.live_trials) >= self.max_concurrent:
            logger.debug(
                "No suggestion for %s: %d/%d trials live.",
                trial_id,
                len(self.live_trials),
                self.max_concurrent,
            )
            return None
        suggestion = self.searcher.suggest(trial_id)
        if suggestion is not None and not _is_finished(suggestion):
            self.live_trials.add(trial_id)
            self.num_unfinished_live_trials += 1
        return suggestion

    @forwarding_hook("searcher")
    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        self.searcher.on_trial_result(trial_id, result)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        """Free the trial's slot and tell the wrapped searcher (in batch mode: later).

        Trials this limiter did not suggest are ignored, as are repeated completions.
        """
        if not self._limit_concurrency:
            self.searcher.on_trial_complete(trial_id, result=result, error=error)
            return
        if trial_id not in self.live_trials or trial_id in self.cached_results:
            return
        if not self.batch:
            self.live_trials.discard(trial_id)
            self.num_unfinished_live_trials -= 1
            self.searcher.on_trial_complete(trial_id, result=result, error=error)
            return
        self.cached_results[trial_id] = (result, error)
        self.num_unfinished_live_trials -= 1
        if self.num_unfinished_live_trials > 0:
            return
        cached, self.cached_results = self.cached_results, {}
        self.live_trials.clear()
        self.num_unfinished_live_trials = 0
        for done_id, (done_result, done_error) in cached.items():
            self.searcher.on_trial_complete(done_id, result=done_result, error=done_error)

    def add_evaluated_point(
        self,
        parameters: dict[str, Any],
        value: float,
        error: bool = False,
        pruned: bool = False,
        intermediate_values: list[float] | None = None,
    ) -> None:
        """Pass a point evaluated elsewhere on to the wrapped searcher."""
        self.searcher.add_evaluated_point(parameters, value, error, pruned, intermediate_values)

    def on_pause(self, trial_id: str) -> None:
        """Forward a pause to searchers that track it (e.g. TuneBOHB)."""
        hook = getattr(self.searcher, "on_pause", None)
        if hook is not None:
            hook(trial_id)

    def on_unpause(self, trial_id: str) -> None:
        """Forward an unpause to searchers that track it (e.g. TuneBOHB)."""
        hook = getattr(self.searcher, "on_unpause", None)
        if hook is not None:
            hook(trial_id)

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        """The live trials, the cached batch results and the wrapped searcher's state.

        ``max_concurrent`` and ``batch`` are settings, not state: the restoring
        instance's values apply.
        """
        return {
            "kind": _STATE_KIND,
            "live_trials": sorted(self.live_trials),
            "num_unfinished_live_trials": self.num_unfinished_live_trials,
            "cached_results": copy.deepcopy(self.cached_results),
            "searcher": _saved_searcher(self.searcher),
        }

    def restore(self, checkpoint_path: str) -> None:
        """Load a state written by :meth:`save`, or one of the wrapped searcher alone
        (as Ray Tune's wrappers save, and as a run's ``searcher-state-*.pkl`` holds)."""
        _restore_own_or_wrapped(self, checkpoint_path, _STATE_KIND)

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state` (the wrapped searcher included).

        Raises:
            ValueError: If ``state`` does not come from a ConcurrencyLimiter.
        """
        check_state_kind(state, _STATE_KIND, "ConcurrencyLimiter")
        self.live_trials = set(state["live_trials"])
        self.num_unfinished_live_trials = state["num_unfinished_live_trials"]
        self.cached_results = copy.deepcopy(state["cached_results"])
        _restore_searcher(self.searcher, state["searcher"])
        self._hand_limit_to_searcher()

    def __repr__(self) -> str:
        return (
            f"ConcurrencyLimiter({self.searcher!r}, max_concurrent={self.max_concurrent}, "
            f"batch={self.batch})"
        )


def _is_finished(suggestion: Any) -> bool:
    return isinstance(suggestion, str) and suggestion == Searcher.FINISHED


def _check_max_concurrent(max_concurrent: Any) -> int:
    if isinstance(max_concurrent, bool) or not isinstance(max_concurrent, Integral):
        raise TypeError(
            f"ConcurrencyLimiter: `max_concurrent` must be an int >= 1, got {max_concurrent!r}."
        )
    if max_concurrent < 1:
        raise ValueError(
            f"ConcurrencyLimiter: `max_concurrent` must be >= 1, got {max_concurrent}. "
            "Leave the searcher unwrapped to run without a limit."
        )
    return int(max_concurrent)
