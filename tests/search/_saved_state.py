"""The searcher state a run saved, as the searcher itself would restore it."""

from __future__ import annotations

import pickle
from typing import Any

from fasttune._internal.experiment_state import ExperimentStateStore


def unwrap_limiter(state: Any) -> Any:
    """The wrapped searcher's state when ``state`` is a ConcurrencyLimiter's.

    ``TuneConfig(max_concurrent_trials=N)`` wraps a Searcher in a ConcurrencyLimiter,
    as Ray does, so the run saves the limiter's state around the searcher's.
    """
    if isinstance(state, dict) and state.get("kind") == "ConcurrencyLimiter/1":
        return pickle.loads(state["searcher"])
    return state


def saved_searcher_state(path: str) -> Any:
    """The searcher's saved state in the experiment at ``path``."""
    return unwrap_limiter(pickle.loads(ExperimentStateStore(path).load().search_state["searcher"]))
