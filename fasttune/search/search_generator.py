"""``SearchGenerator``: a :class:`Searcher` seen as a :class:`SearchAlgorithm`.

It hands the Tuner's ``param_space`` to the searcher, asks it for one config per
trial, lays each suggestion over the constant part of the space, and stops after
``num_samples`` suggestions (or when the searcher says ``FINISHED``). As on Ray,
``sample_from`` values are not the searcher's: they are left out of the space it is
given and computed from each suggested config; and a config's keys keep the order of
``param_space``.

Example:
    >>> class Squares(Searcher):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.n = 0
    ...     def suggest(self, trial_id):
    ...         self.n += 1
    ...         return {"x": self.n ** 2}
    >>> gen = SearchGenerator(Squares())
    >>> gen.add_configurations({"epochs": 3}, num_samples=2)
    >>> [gen.next_suggestion(t).config for t in ("a", "b")], gen.is_finished()
    ([{'epochs': 3, 'x': 1}, {'epochs': 3, 'x': 4}], True)
"""

from __future__ import annotations

import copy
import logging
import os
import pickle
import tempfile
from typing import Any

import cloudpickle

from fasttune._support.noop_hooks import forwarding_hook
from fasttune.search._presets import check_num_samples
from fasttune.search._spec_paths import parse_spec_vars, resolve_nested_dict
from fasttune.search._spec_view import contains_unresolved, is_unresolved, path_str
from fasttune.search._suggested_config import (
    compute_functions,
    in_order,
    is_function,
    key_order,
    without_functions,
)
from fasttune.search.basic_variant import BasicVariantGenerator
from fasttune.search.search_algorithm import SearchAlgorithm, Suggestion, check_state_kind
from fasttune.search.searcher import Searcher
from fasttune.search.variant_generator import format_vars
from fasttune.storage.plugin_state import read_pickle

logger = logging.getLogger(__name__)

_STATE_KIND = "SearchGenerator/1"


class SearchGenerator(SearchAlgorithm):
    """Drive a :class:`Searcher` one suggestion per trial.

    Args:
        searcher: The searcher to wrap.

    Raises:
        TypeError: If ``searcher`` is not a :class:`Searcher`.
    """

    CKPT_FILE_TMPL = "search-gen-state-{}.pkl"

    def __init__(self, searcher: Searcher):
        if not isinstance(searcher, Searcher):
            raise TypeError(
                f"SearchGenerator: `searcher` must be a Searcher, got {type(searcher).__name__}."
            )
        self.searcher = searcher
        self._finished = False
        self._configured = False
        self._properties_set = False
        self._searcher_took_space = False
        self._base: dict[str, Any] = {}
        # The space's sample_from domains, computed from each suggested config, and the
        # space's key order (nested: a key's own order for a dict), kept by configs.
        self._functions: list[tuple[tuple[Any, ...], Any]] = []
        self._order: dict[str, Any] = {}
        self._num_samples = 1
        self._counter = 0
        self._warned_unsaved = False

    @property
    def metric(self) -> Any:
        return self.searcher.metric

    @property
    def mode(self) -> Any:
        return self.searcher.mode

    @property
    def total_samples(self) -> int:
        """``num_samples`` (-1: until the searcher finishes or the run is stopped)."""
        return self._num_samples

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any], **spec: Any
    ) -> bool:
        """Pass metric, mode and the space (less its ``sample_from`` values) to the
        searcher; returns what it returns."""
        config = without_functions(config)
        took = _set_searcher_properties(self.searcher, metric, mode, config, **spec)
        self._properties_set = True
        self._searcher_took_space = bool(took)
        return bool(took)

    def add_configurations(self, param_space: dict[str, Any] | None, num_samples: int = 1) -> None:
        """Take the space and the number of trials to suggest.

        Raises:
            RuntimeError: If called twice.
            TypeError: If ``param_space`` is not a dict or ``num_samples`` not an int.
            ValueError: If the space uses ``grid_search``, or holds domains the searcher
                did not take (it was built with its own space).
        """
        if self._configured:
            raise RuntimeError(
                "SearchGenerator.add_configurations() was already called; use a new "
                "search algorithm for each experiment."
            )
        space = {} if param_space is None else param_space
        if not isinstance(space, dict):
            raise TypeError(f"`param_space` must be a dict, got {type(space).__name__}.")
        check_num_samples(num_samples)
        name = type(self.searcher).__name__
        _, domain_vars, grid_vars = parse_spec_vars(space)
        functions = [(path, domain) for path, domain in domain_vars if is_function(domain)]
        domain_vars = [(path, domain) for path, domain in domain_vars if not is_function(domain)]
        if grid_vars:
            paths = ", ".join(f"`{path_str(path)}`" for path, _ in grid_vars)
            raise ValueError(
                f"`param_space` uses grid_search at {paths}, but {name} cannot expand grids: "
                "only the default search algorithm (BasicVariantGenerator) does. Use "
                "tune.choice([...]) instead, or leave `TuneConfig.search_alg` unset."
            )
        if not self._properties_set and space:
            self.set_search_properties(None, None, space)
        if domain_vars and not self._searcher_took_space:
            paths = ", ".join(f"`{path_str(path)}`" for path, _ in domain_vars)
            raise ValueError(
                f"`param_space` has search-space definitions ({paths}), but {name} did not "
                "take them: it was already built with its own search space. Define every "
                "parameter in one place: in the searcher's space, or in `param_space` "
                "with the searcher built without a space."
            )
        self._base = _constant_part(space)
        self._functions = functions
        self._order = key_order(space)
        self._num_samples = int(num_samples)
        self._configured = True

    def next_suggestion(self, trial_id: str) -> Suggestion | None:
        """Ask the searcher; None if it has nothing now or the search is over.

        Raises:
            RuntimeError: If :meth:`add_configurations` was not called.
            TypeError: If the searcher's ``suggest`` returns something other than a
                dict, None or ``Searcher.FINISHED``.
        """
        if not self._configured:
            raise RuntimeError(
                "SearchGenerator: call add_configurations() (or set_state()) before "
                "next_suggestion()."
            )
        if self.is_finished():
            return None
        suggested = self.searcher.suggest(trial_id)
        if isinstance(suggested, str) and suggested == Searcher.FINISHED:
            self.set_finished()
            return None
        if suggested is None:
            return None
        if not isinstance(suggested, dict):
            raise TypeError(
                f"{type(self.searcher).__name__}.suggest() must return a dict, None or "
                f"Searcher.FINISHED, got {type(suggested).__name__}: {suggested!r}."
            )
        config = _merged(copy.deepcopy(self._base), copy.deepcopy(suggested))
        compute_functions(config, self._functions)
        config = in_order(config, self._order)
        self._counter += 1
        flat = resolve_nested_dict(suggested)
        return Suggestion(
            config=config,
            tag=format_vars(resolve_nested_dict(config)),
            evaluated_params={path_str(path): value for path, value in flat.items()},
        )

    def is_finished(self) -> bool:
        return self._finished or 0 <= self._num_samples <= self._counter

    @forwarding_hook("searcher")
    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        self.searcher.on_trial_result(trial_id, result)

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        self.searcher.on_trial_complete(trial_id, result=result, error=error)

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        """Counters, the constant space, and the searcher's saved state (as bytes).

        The searcher is saved with its own ``save()`` (default: its ``get_state()``),
        so searchers that customise either are honoured.
        """
        return {
            **super().get_state(),
            "kind": _STATE_KIND,
            "configured": self._configured,
            "properties_set": self._properties_set,
            "searcher_took_space": self._searcher_took_space,
            "base": self._base,
            "functions": self._functions,
            "order": self._order,
            "num_samples": self._num_samples,
            "counter": self._counter,
            "searcher": self._searcher_state(),
        }

    def _searcher_state(self) -> bytes | None:
        try:
            return _saved_searcher(self.searcher)
        except Exception as error:  # any library may refuse to pickle; never crash a snapshot
            # A snapshot must not end the experiment; the searcher restarts on resume.
            if not self._warned_unsaved:
                self._warned_unsaved = True
                logger.warning(
                    "%s cannot save its state (%s: %s); after a resume it starts afresh. "
                    "Implement get_state()/set_state() (or save()/restore()) to keep it.",
                    type(self.searcher).__name__,
                    type(error).__name__,
                    error,
                )
            return None

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore the counters and the searcher.

        Raises:
            ValueError: If ``state`` does not come from a SearchGenerator.
        """
        check_state_kind(state, _STATE_KIND, "SearchGenerator")
        super().set_state(state)
        self._configured = state["configured"]
        self._properties_set = state["properties_set"]
        self._searcher_took_space = state["searcher_took_space"]
        self._base = state["base"]
        self._functions = state.get("functions", [])  # absent from states saved before
        self._order = state.get("order", {})
        self._num_samples = state["num_samples"]
        self._counter = state["counter"]
        if state["searcher"] is not None:
            _restore_searcher(self.searcher, state["searcher"])

    def save_to_dir(self, dirpath: str, session_str: str = "default") -> None:
        """Save this wrapper and, beside it, the searcher (``searcher-state-*.pkl``)."""
        self.searcher.save_to_dir(dirpath, session_str)
        super().save_to_dir(dirpath, session_str)


def ensure_search_algorithm(search_alg: Any) -> SearchAlgorithm:
    """Turn ``TuneConfig.search_alg`` into a :class:`SearchAlgorithm`.

    None gives a :class:`BasicVariantGenerator`; a :class:`Searcher` is wrapped in a
    :class:`SearchGenerator`; a :class:`SearchAlgorithm` is returned as is.

    Raises:
        TypeError: For anything else.

    Example:
        >>> type(ensure_search_algorithm(None)).__name__
        'BasicVariantGenerator'
    """
    if search_alg is None:
        return BasicVariantGenerator()
    if isinstance(search_alg, SearchAlgorithm):
        return search_alg
    if isinstance(search_alg, Searcher):
        return SearchGenerator(search_alg)
    raise TypeError(
        "`TuneConfig.search_alg` must be None, a Searcher (e.g. OptunaSearch) or a "
        "SearchAlgorithm (e.g. BasicVariantGenerator); got "
        f"{type(search_alg).__name__}: {search_alg!r}."
    )


def _set_searcher_properties(
    searcher: Searcher, metric: Any, mode: Any, config: dict[str, Any], **spec: Any
) -> bool:
    """Call ``set_search_properties``, also on searchers written without ``**spec``."""
    try:
        return searcher.set_search_properties(metric, mode, config, **spec)
    except TypeError as error:
        if not spec or "unexpected keyword argument" not in str(error):
            raise
        logger.warning(
            "%s.set_search_properties() does not accept **spec; update it to "
            "set_search_properties(metric, mode, config, **spec) -> bool.",
            type(searcher).__name__,
        )
        return searcher.set_search_properties(metric, mode, config)


def _constant_part(space: dict[str, Any]) -> dict[str, Any]:
    """``space`` without its domains (what every suggestion is laid over)."""
    constant: dict[str, Any] = {}
    for key, value in space.items():
        if is_unresolved(value):
            continue
        if isinstance(value, dict):
            constant[key] = _constant_part(value)
        elif not contains_unresolved(value):
            constant[key] = copy.deepcopy(value)
    return constant


def _merged(base: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge ``update`` into ``base`` (nested dicts merge; other values replace)."""
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merged(base[key], value)
        else:
            base[key] = value
    return base


def _saved_searcher(searcher: Searcher) -> bytes:
    """The searcher's state as its ``save()`` writes it.

    Raises:
        NotImplementedError: If the searcher cannot save.
    """
    if type(searcher).save is Searcher.save:  # default save(): skip the file
        return cloudpickle.dumps(searcher.get_state())
    with tempfile.TemporaryDirectory(prefix="fasttune-searcher-") as tmp:
        path = os.path.join(tmp, "searcher.pkl")
        searcher.save(path)
        if not os.path.exists(path):
            raise NotImplementedError(f"{type(searcher).__name__}.save() wrote no file.")
        with open(path, "rb") as f:
            return f.read()


def _restore_own_or_wrapped(wrapper: Any, checkpoint_path: str, kind: str) -> None:
    """Restore a wrapper (ConcurrencyLimiter, Repeater) from a file of its own state, or
    its wrapped searcher from a file of that searcher's: what a Ray Tune wrapper saves,
    and what a run writes to ``searcher-state-*.pkl`` in its experiment directory."""
    try:
        state = read_pickle(checkpoint_path)
    except Exception:  # the wrapped searcher's own format, not a pickle
        state = None
    if isinstance(state, dict) and state.get("kind") == kind:
        wrapper.set_state(state)
    else:
        wrapper.searcher.restore(checkpoint_path)


def _restore_searcher(searcher: Searcher, blob: bytes) -> None:
    if type(searcher).restore is Searcher.restore:
        searcher.set_state(pickle.loads(blob))
        return
    with tempfile.TemporaryDirectory(prefix="fasttune-searcher-") as tmp:
        path = os.path.join(tmp, "searcher.pkl")
        with open(path, "wb") as f:
            f.write(blob)
        searcher.restore(path)
