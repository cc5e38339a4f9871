"""``Searcher``: the base class of suggestion algorithms (as ``ray.tune.search.Searcher``).

A searcher proposes one config per trial (:meth:`Searcher.suggest`) and learns from
the results it is told about. fasttune wraps it in a
:class:`~fasttune.search.search_generator.SearchGenerator`, which the experiment
controller drives; the searcher itself never starts or stops anything.

Example:
    >>> class Counter(Searcher):
    ...     def __init__(self):
    ...         super().__init__(metric="loss", mode="min")
    ...         self.n = 0
    ...     def suggest(self, trial_id):
    ...         self.n += 1
    ...         return {"x": self.n}
    >>> searcher = Counter()
    >>> searcher.suggest("t1"), searcher.mode
    ({'x': 1}, 'min')
"""

from __future__ import annotations

import logging
import os
import uuid
import warnings
from collections.abc import Sequence
from typing import Any

from fasttune import result as R
from fasttune._support.metric_mode import MetricModeMixin, validate_metric_mode
from fasttune._support.noop_hooks import noop_hook
from fasttune.storage.filesystem import get_fs_and_path, is_url
from fasttune.storage.plugin_state import newest_matching, read_pickle, write_pickle

logger = logging.getLogger(__name__)


def _no_evaluated_points(searcher: Searcher) -> str:
    return (
        f"{type(searcher).__name__} does not support add_evaluated_point(); pass known "
        "configs as `points_to_evaluate` instead, or use a searcher that implements it."
    )


class Searcher(MetricModeMixin):
    """Base class for algorithms that suggest one config per trial.

    Subclasses override :meth:`suggest`, and usually :meth:`on_trial_complete` to
    learn from the final result. To accept the Tuner's ``param_space`` they
    override :meth:`set_search_properties` and return True.

    Args:
        metric: The result key to optimise (or a list of keys).
        mode: ``"min"`` or ``"max"`` (or a list, one per metric).

    Raises:
        ValueError: If ``mode`` is not ``"min"``/``"max"``, or does not match ``metric``.
    """

    FINISHED = "FINISHED"
    CKPT_FILE_TMPL = "searcher-state-{}.pkl"

    def __init__(self, metric: str | list[str] | None = None, mode: str | list[str] | None = None):
        validate_metric_mode(metric, mode)
        self._metric = metric
        self._mode = mode

    # ------------------------------------------------------------------ search
    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        """Receive the Tuner's metric, mode and ``param_space``.

        Args:
            metric: ``TuneConfig.metric``.
            mode: ``TuneConfig.mode``.
            config: The Tuner's ``param_space`` (may hold domains to convert).
            **spec: Further experiment settings, for forward compatibility.

        Returns:
            True if the searcher took them; False (the default) if it keeps its own
            space, e.g. because it was constructed with one.
        """
        return False

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        """Return the config for a new trial.

        Args:
            trial_id: The id later passed to :meth:`on_trial_result` and
                :meth:`on_trial_complete`.

        Returns:
            A config dict; None when nothing can be suggested right now (asked again
            later); or :attr:`FINISHED` when the search is over.
        """
        raise NotImplementedError(
            f"{type(self).__name__} must implement suggest(trial_id) -> dict | None | "
            "Searcher.FINISHED."
        )

    @noop_hook
    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        """Hear an intermediate result (may lack the metric or hold NaN)."""

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        """Hear that a trial ended, with its last result (None or ``error=True`` on failure)."""

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        """Return True if the searcher limits concurrency itself (default: False)."""
        return False

    # ------------------------------------------------------------------ outside knowledge
    def add_evaluated_point(
        self,
        parameters: dict[str, Any],
        value: float,
        error: bool = False,
        pruned: bool = False,
        intermediate_values: list[float] | None = None,
    ) -> None:
        """Tell the searcher about a point evaluated outside this experiment.

        Raises:
            NotImplementedError: Unless the subclass supports it.
        """
        raise NotImplementedError(_no_evaluated_points(self))

    def add_evaluated_trials(self, trials_or_analysis: Any, metric: str) -> None:
        """Feed finished trials to :meth:`add_evaluated_point`.

        Args:
            trials_or_analysis: A ``Trial``, a list of them, or an object with a
                ``trials`` attribute (an experiment analysis).
            metric: The result key that holds each trial's objective value.

        Raises:
            NotImplementedError: If :meth:`add_evaluated_point` is not implemented.
            TypeError: If ``trials_or_analysis`` is none of the accepted forms.
        """
        from fasttune.experiment.trial import Trial, TrialStatus

        if type(self).add_evaluated_point is Searcher.add_evaluated_point:
            raise NotImplementedError(_no_evaluated_points(self))
        if isinstance(trials_or_analysis, Trial):
            trials: Sequence[Any] = [trials_or_analysis]
        elif isinstance(trials_or_analysis, (list, tuple)):
            trials = trials_or_analysis
        elif hasattr(trials_or_analysis, "trials"):
            trials = trials_or_analysis.trials
        else:
            raise TypeError(
                "add_evaluated_trials: `trials_or_analysis` must be a Trial, a list of "
                f"Trials or an experiment analysis, got {type(trials_or_analysis).__name__}."
            )
        any_with_metric = False
        for trial in trials:
            last = trial.last_result or {}
            if metric not in last:
                continue
            done = bool(last.get(R.DONE, False))
            terminated = trial.status == TrialStatus.TERMINATED
            any_with_metric = any_with_metric or (terminated and done)
            self.add_evaluated_point(
                parameters=trial.config,
                value=last[metric],
                error=trial.status == TrialStatus.ERROR,
                pruned=terminated and not done,
                intermediate_values=None,
            )
        if not any_with_metric:
            warnings.warn(
                f"add_evaluated_trials: no finished trial reported {metric!r}; check the "
                "metric name.",
                stacklevel=2,
            )

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        """The searcher's state (default: a copy of its attributes)."""
        return dict(self.__dict__)

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`get_state` returned."""
        self.__dict__.update(state)

    def save(self, checkpoint_path: str) -> None:
        """Write :meth:`get_state` to the file ``checkpoint_path`` (atomically)."""
        write_pickle(checkpoint_path, self.get_state())

    def restore(self, checkpoint_path: str) -> None:
        """Load the state written by :meth:`save`."""
        self.set_state(read_pickle(checkpoint_path))

    def save_to_dir(self, checkpoint_dir: str, session_str: str = "default") -> bool:
        """Save to ``checkpoint_dir/searcher-state-<session_str>.pkl``.

        Returns:
            False (with a warning) if the searcher cannot save, True otherwise.
        """
        file_name = self.CKPT_FILE_TMPL.format(session_str)
        target = f"{os.fspath(checkpoint_dir).rstrip('/')}/{file_name}"
        # A user's save() may write in place; stage it beside the target, then rename.
        staged = target
        if not is_url(target):
            fs, inner_dir = get_fs_and_path(checkpoint_dir)
            fs.makedirs(inner_dir)
            staged = os.path.join(inner_dir, f".{uuid.uuid4().hex[:12]}-tmp-{file_name}")
        try:
            self.save(staged)
            if staged != target:
                os.replace(staged, get_fs_and_path(target)[1])
        except NotImplementedError:
            logger.warning("%r does not implement save(); its state is not saved.", self)
            return False
        finally:
            if staged != target and os.path.lexists(staged):
                os.remove(staged)
        return True

    def restore_from_dir(self, checkpoint_dir: str) -> None:
        """Restore from the newest ``searcher-state-*.pkl`` in ``checkpoint_dir``.

        Raises:
            RuntimeError: If there is none.
        """
        path = newest_matching(checkpoint_dir, self.CKPT_FILE_TMPL.format("*"))
        if path is None:
            raise RuntimeError(
                f"No searcher state ({self.CKPT_FILE_TMPL.format('*')}) found in "
                f"{checkpoint_dir!r}; pass the experiment directory that was saved to."
            )
        self.restore(path)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(metric={self._metric!r}, mode={self._mode!r})"
