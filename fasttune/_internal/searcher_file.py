"""The searcher's own state file in the experiment directory, as Ray Tune leaves it.

Ray Tune saves ``searcher-state-<session>.pkl`` beside its experiment state at each
experiment checkpoint, and its docs restore a searcher from there with
``Searcher.restore_from_dir(<experiment path>)``. A run here restores from the search
state log instead (``search_state.pkl``); this file is written for that user pattern
only, with the searcher's own ``save()``.
"""

from __future__ import annotations

import logging
import time
from typing import Any

logger = logging.getLogger(__name__)


class SearcherFile:
    """Writes a run's searcher state to ``<experiment path>/searcher-state-<start>.pkl``.

    Args:
        experiment_path: The experiment directory (the local staging one when remote:
            storage gets it with the next sync).
    """

    def __init__(self, experiment_path: str):
        self._path = experiment_path
        # The run's start names its file (restore_from_dir takes the newest).
        self._session = time.strftime("%Y-%m-%d_%H-%M-%S")
        self._warned = False

    def save(self, search_alg: Any) -> None:
        """Save the user's searcher (the one inside a ``SearchGenerator``, and inside a
        ``ConcurrencyLimiter`` or ``Repeater``, whose class ``restore_from_dir`` is
        called on); nothing for the default generator. A searcher that cannot save
        is logged once, never raised: the run does not depend on this file."""
        from fasttune.search.searcher import Searcher

        searcher = getattr(search_alg, "searcher", None)
        if not isinstance(searcher, Searcher):
            return
        while isinstance(inner := getattr(searcher, "searcher", None), Searcher):
            searcher = inner
        try:
            searcher.save_to_dir(self._path, self._session)
        except Exception as error:
            if not self._warned:
                self._warned = True
                logger.warning(
                    "Could not save the searcher's state to the experiment directory "
                    "(%s: %s); Searcher.restore_from_dir will not find it there.",
                    type(error).__name__,
                    error,
                )
