"""``SearchAlgorithm``: what the experiment controller asks for trial configs.

The controller calls, in order::

    alg.set_search_properties(metric, mode, param_space)   # may raise ValueError
    alg.add_configurations(param_space, num_samples)       # or alg.set_state(s) on resume
    while not alg.is_finished():
        suggestion = alg.next_suggestion(trial_id)          # None: nothing right now
        ...
    alg.on_trial_result(trial_id, result) / alg.on_trial_complete(trial_id, result, error)

It returns decisions (a :class:`Suggestion` or None) and never drives the loop.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from fasttune._support.metric_mode import MetricModeMixin
from fasttune._support.noop_hooks import noop_hook
from fasttune.storage.plugin_state import newest_matching, read_pickle, write_pickle


@dataclass(frozen=True)
class Suggestion:
    """One trial to create.

    Attributes:
        config: The resolved config.
        tag: The experiment-tag suffix, e.g. ``"a=1,lr=0.0100"`` (the controller
            prepends ``f"{index}_"``); empty when nothing varies.
        evaluated_params: The sampled/searched values, keyed ``"a/b"`` (for display).
    """

    config: dict[str, Any]
    tag: str
    evaluated_params: dict[str, Any]


def check_state_kind(state: Any, kind: str, owner: str) -> None:
    """Check that ``state`` was saved by ``owner.get_state()``, which tags it ``kind``.

    Raises:
        ValueError: If ``state`` is not a dict whose ``"kind"`` is ``kind``.
    """
    if not isinstance(state, dict) or state.get("kind") != kind:
        raise ValueError(f"{owner}.set_state: `state` was not produced by {owner}.get_state().")


class SearchAlgorithm(MetricModeMixin):
    """Base of whatever produces trial configs: the default generator or a wrapped searcher.

    Subclasses implement :meth:`add_configurations`, :meth:`next_suggestion`,
    :meth:`get_state` and :meth:`set_state` (calling ``super()`` for the shared part).
    """

    CKPT_FILE_TMPL = "search-alg-state-{}.pkl"

    _finished: bool = False

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        """Receive the Tuner's metric, mode and ``param_space``.

        Returns:
            False if a metric (or mode) was already set and another is given, else True.

        Raises:
            ValueError: If ``mode`` is not ``"min"``/``"max"``.
        """
        return self._take_metric_mode(metric, mode)

    @property
    def total_samples(self) -> int:
        """Number of trials this algorithm will create; -1 if unknown or unbounded."""
        return -1

    def add_configurations(self, param_space: dict[str, Any] | None, num_samples: int) -> None:
        """Take the Tuner's ``param_space`` and ``num_samples`` (-1: until stopped)."""
        raise NotImplementedError(f"{type(self).__name__} must implement add_configurations().")

    def next_suggestion(self, trial_id: str) -> Suggestion | None:
        """The config for trial ``trial_id``, or None if there is none right now.

        None with :meth:`is_finished` False means "ask again later" (e.g. waiting
        on results); once :meth:`is_finished` is True, no more will come.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement next_suggestion().")

    @noop_hook
    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        """Hear an intermediate result of a trial this algorithm suggested."""

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        """Hear that a trial ended (``error=True`` if it failed)."""

    def is_finished(self) -> bool:
        """True once no more suggestions will come (trials may still be running)."""
        return self._finished

    def set_finished(self) -> None:
        """Mark the algorithm as finished."""
        self._finished = True

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        """Picklable state (cloudpickle: spaces may hold lambdas)."""
        return {"finished": self._finished, "metric": self._metric, "mode": self._mode}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state`; the algorithm continues where it stopped."""
        self._finished = state["finished"]
        self._metric = state["metric"]
        self._mode = state["mode"]

    def has_checkpoint(self, dirpath: str) -> bool:
        """Whether ``dirpath`` holds a state saved by :meth:`save_to_dir`."""
        return newest_matching(dirpath, self.CKPT_FILE_TMPL.format("*")) is not None

    def save_to_dir(self, dirpath: str, session_str: str = "default") -> None:
        """Write :meth:`get_state` to ``dirpath`` atomically."""
        file_name = self.CKPT_FILE_TMPL.format(session_str)
        write_pickle(f"{os.fspath(dirpath).rstrip('/')}/{file_name}", self.get_state())

    def restore_from_dir(self, dirpath: str) -> None:
        """Restore the newest state saved in ``dirpath``.

        Raises:
            RuntimeError: If there is none.
        """
        path = newest_matching(dirpath, self.CKPT_FILE_TMPL.format("*"))
        if path is None:
            raise RuntimeError(
                f"No {type(self).__name__} state ({self.CKPT_FILE_TMPL.format('*')}) "
                f"found in {dirpath!r}."
            )
        self.set_state(read_pickle(path))
