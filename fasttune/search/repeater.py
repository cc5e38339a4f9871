"""``Repeater``: run each suggested config several times and report the mean (as Ray's).

Each config the wrapped searcher suggests is handed out ``repeat`` times, to
consecutive trials (a *group*), with the repeat's index under ``"__trial_index__"``
in the config (use it as a seed). The wrapped searcher only knows the group's first
trial; once every trial of the group has completed, it hears that one trial complete
with the metric averaged over the group.

``TuneConfig(num_samples=...)`` counts trials, repeats included: ``num_samples=15``
with ``repeat=5`` tries 3 configs. Trials of a last, incomplete group run, but the
searcher never hears about them.

Example:
    >>> from fasttune.search.searcher import Searcher
    >>> class Count(Searcher):
    ...     def __init__(self):
    ...         super().__init__(metric="loss", mode="min")
    ...         self.n, self.heard = 0, []
    ...     def suggest(self, trial_id):
    ...         self.n += 1
    ...         return {"x": self.n}
    ...     def on_trial_complete(self, trial_id, result=None, error=False):
    ...         self.heard.append((trial_id, result["loss"]))
    >>> inner = Count()
    >>> repeater = Repeater(inner, repeat=2)
    >>> [repeater.suggest(t) for t in ("a", "b", "c")]  # doctest: +NORMALIZE_WHITESPACE
    [{'x': 1, '__trial_index__': 0}, {'x': 1, '__trial_index__': 1},
     {'x': 2, '__trial_index__': 0}]
    >>> repeater.on_trial_complete("a", {"loss": 1.0})
    >>> repeater.on_trial_complete("b", {"loss": 3.0})
    >>> inner.heard
    [('a', 2.0)]
"""

from __future__ import annotations

import copy
import logging
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from fasttune._support.numeric import is_int, is_real
from fasttune.search.search_algorithm import check_state_kind
from fasttune.search.search_generator import (
    _restore_own_or_wrapped,
    _restore_searcher,
    _saved_searcher,
    _set_searcher_properties,
)
from fasttune.search.searcher import Searcher

logger = logging.getLogger(__name__)

TRIAL_INDEX = "__trial_index__"
"""The config key that holds a trial's index within its group of repeats."""

_STATE_KIND = "Repeater/1"


@dataclass
class _TrialGroup:
    """The trials that share one suggested config."""

    primary_trial_id: str
    config: dict[str, Any]
    trial_ids: list[str] = field(default_factory=list)
    # trial id -> (last result, error), for the trials that completed
    outcomes: dict[str, tuple[dict[str, Any] | None, bool]] = field(default_factory=dict)
    reported: bool = False


class Repeater(Searcher):
    """Repeat every suggestion ``repeat`` times and report the group's mean metric.

    Args:
        searcher: The searcher to wrap; it sees one trial per group.
        repeat: Trials per suggested config (an int >= 1).
        set_index: Put the repeat index (0 .. repeat-1) in each config under
            ``"__trial_index__"`` (:data:`TRIAL_INDEX`).

    Raises:
        TypeError: If ``searcher`` is not a :class:`Searcher` or ``repeat`` not an int.
        ValueError: If ``repeat`` < 1.

    Example:
        >>> from fasttune.search.searcher import Searcher
        >>> class One(Searcher):
        ...     def suggest(self, trial_id):
        ...         return {"lr": 0.1}
        >>> Repeater(One(), repeat=3, set_index=False).suggest("t1")
        {'lr': 0.1}
    """

    def __init__(self, searcher: Searcher, repeat: int = 1, set_index: bool = True):
        if not isinstance(searcher, Searcher):
            raise TypeError(
                "Repeater: `searcher` must be a Searcher (e.g. OptunaSearch), got "
                f"{type(searcher).__name__}: {searcher!r}."
            )
        if not is_int(repeat):
            raise TypeError(f"Repeater: `repeat` must be an int >= 1, got {repeat!r}.")
        if repeat < 1:
            raise ValueError(f"Repeater: `repeat` must be >= 1, got {repeat}.")
        self.searcher = searcher
        self.repeat = int(repeat)
        self._set_index = bool(set_index)
        self._groups: list[_TrialGroup] = []
        self._trial_id_to_group: dict[str, int] = {}

    @property
    def metric(self) -> Any:
        """The wrapped searcher's metric (the one averaged)."""
        return self.searcher.metric

    @property
    def mode(self) -> Any:
        """The wrapped searcher's mode."""
        return self.searcher.mode

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        """Pass metric, mode and the space on to the wrapped searcher.

        A ``num_samples`` in ``spec`` that is not a multiple of ``repeat`` is warned
        about (see :func:`warn_num_samples`).
        """
        if isinstance(spec.get("num_samples"), int):
            warn_num_samples(self, spec["num_samples"])
        return _set_searcher_properties(self.searcher, metric, mode, config, **spec)

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        """The current group's config, or a new one from the wrapped searcher.

        Returns:
            The config (with ``"__trial_index__"`` if ``set_index``); None or
            ``Searcher.FINISHED`` as the wrapped searcher returns them.

        Raises:
            TypeError: If the wrapped searcher suggests something other than a dict.
        """
        group = self._groups[-1] if self._groups else None
        if group is None or len(group.trial_ids) >= self.repeat:
            suggested = self.searcher.suggest(trial_id)
            if suggested is None or _is_finished(suggested):
                return suggested
            if not isinstance(suggested, dict):
                raise TypeError(
                    f"{type(self.searcher).__name__}.suggest() must return a dict, None or "
                    f"Searcher.FINISHED, got {type(suggested).__name__}: {suggested!r}."
                )
            group = _TrialGroup(trial_id, copy.deepcopy(suggested))
            self._groups.append(group)
        index = len(group.trial_ids)
        group.trial_ids.append(trial_id)
        self._trial_id_to_group[trial_id] = len(self._groups) - 1
        config = copy.deepcopy(group.config)
        if self._set_index:
            config[TRIAL_INDEX] = index
        return config

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        """Record the trial's outcome; when its group is complete, report the mean.

        The wrapped searcher hears the group's first trial id, with the result of a
        trial that did not fail and each metric replaced by its mean over the
        repeats that reported it (failed repeats and NaN values are left out). If no
        repeat produced the metric, it hears ``error=True``. Unknown trial ids and
        groups already reported are ignored.
        """
        index = self._trial_id_to_group.get(trial_id)
        if index is None:
            logger.debug("Repeater: trial %s is not one of its trials; ignored.", trial_id)
            return
        group = self._groups[index]
        if group.reported:
            return
        group.outcomes[trial_id] = (result, bool(error))
        if len(group.trial_ids) < self.repeat or len(group.outcomes) < self.repeat:
            return
        group.reported = True
        summary, failed = _summarize(group, self.searcher.metric)
        group.outcomes = {}  # no longer needed: keeps the saved state small
        self.searcher.on_trial_complete(group.primary_trial_id, result=summary, error=failed)

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

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        """The groups and the wrapped searcher's state (``repeat`` is a setting, not state)."""
        return {
            "kind": _STATE_KIND,
            "groups": [asdict(group) for group in self._groups],
            "searcher": _saved_searcher(self.searcher),
        }

    def restore(self, checkpoint_path: str) -> None:
        """Load a state written by :meth:`save`, or one of the wrapped searcher alone
        (as Ray Tune's wrappers save, and as a run's ``searcher-state-*.pkl`` holds)."""
        _restore_own_or_wrapped(self, checkpoint_path, _STATE_KIND)

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state` (the wrapped searcher included).

        Raises:
            ValueError: If ``state`` does not come from a Repeater.
        """
        check_state_kind(state, _STATE_KIND, "Repeater")
        self._groups = [_TrialGroup(**copy.deepcopy(group)) for group in state["groups"]]
        self._trial_id_to_group = {
            trial_id: index
            for index, group in enumerate(self._groups)
            for trial_id in group.trial_ids
        }
        _restore_searcher(self.searcher, state["searcher"])

    def __repr__(self) -> str:
        return f"Repeater({self.searcher!r}, repeat={self.repeat}, set_index={self._set_index})"


def warn_num_samples(search_alg: Any, num_samples: int) -> bool:
    """Warn if ``num_samples`` is not a multiple of a :class:`Repeater`'s ``repeat``.

    Looks through wrappers (``.searcher`` attributes), so a Repeater inside a
    ConcurrencyLimiter or a SearchGenerator is found.

    Returns:
        True if it warned.

    Example:
        >>> from fasttune.search.searcher import Searcher
        >>> warn_num_samples(Repeater(Searcher(), repeat=5), 15)
        False
    """
    searcher, seen = search_alg, 0
    while searcher is not None and seen < 16:  # wrappers are shallow; no cycles
        if isinstance(searcher, Repeater):
            if num_samples > 0 and num_samples % searcher.repeat:
                logger.warning(
                    "Repeater(repeat=%d) with num_samples=%d: num_samples counts trials, "
                    "repeats included, so the last %d trial(s) form an incomplete group the "
                    "searcher never hears about. Set num_samples to a multiple of %d (e.g. "
                    "%d for %d configs).",
                    searcher.repeat,
                    num_samples,
                    num_samples % searcher.repeat,
                    searcher.repeat,
                    searcher.repeat * max(1, num_samples // searcher.repeat),
                    max(1, num_samples // searcher.repeat),
                )
                return True
            return False
        searcher, seen = getattr(searcher, "searcher", None), seen + 1
    return False


def _is_finished(suggestion: Any) -> bool:
    return isinstance(suggestion, str) and suggestion == Searcher.FINISHED


def _value(result: dict[str, Any] | None, key: str) -> float | None:
    """``result[key]`` as a float, or None if missing, not a number, or NaN."""
    if not result or key not in result:
        return None
    value = result[key]
    if not is_real(value):
        return None
    value = float(value)
    return None if math.isnan(value) else value


def _summarize(group: _TrialGroup, metric: Any) -> tuple[dict[str, Any] | None, bool]:
    """(result to report, error) for a complete group."""
    ok = [group.outcomes[t][0] for t in group.trial_ids if not group.outcomes[t][1]]
    ok = [result for result in ok if result is not None]
    base = copy.deepcopy(ok[0]) if ok else copy.deepcopy(group.outcomes[group.primary_trial_id][0])
    if metric is None:
        return base, not ok
    keys = [metric] if isinstance(metric, str) else list(metric)
    summary = dict(base or {})
    for key in keys:
        values = [v for v in (_value(result, key) for result in ok) if v is not None]
        if not values:
            return base, True
        summary[key] = sum(values) / len(values)
    return summary, False
