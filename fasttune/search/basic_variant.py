"""``BasicVariantGenerator``: the default search algorithm (grid x random sampling).

Configs are produced lazily, one pass over the grid per sample, exactly as
:func:`~fasttune.search.variant_generator.expand_param_space` orders them, so
``num_samples=-1`` runs until stopped. The state records the random generator as
it was at the start of the current pass and how far into the pass it got; a
restored generator replays at most that one pass and continues without repeating
or losing a config.

Example:
    >>> from fasttune.search.sample import grid_search, randint
    >>> gen = BasicVariantGenerator(random_state=0)
    >>> gen.add_configurations({"a": grid_search([1, 2]), "b": randint(0, 9)}, num_samples=1)
    >>> [gen.next_suggestion(f"t{i}").tag[:3] for i in range(2)], gen.is_finished()
    (['a=1', 'a=2'], True)
"""

from __future__ import annotations

import copy
import math
import pickle
import random
from collections.abc import Iterator, Sequence
from numbers import Integral
from typing import Any

import cloudpickle

from fasttune.search._domains import Domain
from fasttune.search._presets import check_num_samples, count_variants, resolved_with_presets
from fasttune.search._rng import RandomState, as_random_source, fresh_generator
from fasttune.search._spec_paths import Path
from fasttune.search.search_algorithm import SearchAlgorithm, Suggestion, check_state_kind
from fasttune.search.variant_generator import (
    flatten_resolved_vars,
    format_vars,
    generate_variants,
)

_Variant = tuple[dict[Path, Any], dict[str, Any]]
_STATE_KIND = "BasicVariantGenerator/1"


class BasicVariantGenerator(SearchAlgorithm):
    """Expand the Tuner's ``param_space``: every grid combination, ``num_samples`` times.

    Args:
        points_to_evaluate: Configs (possibly partial) to run first; each replaces
            one of the ``num_samples`` passes.
        max_concurrent: Most trials of this generator alive at once (0: no limit).
        constant_grid_search: Sample random values once per pass and reuse them for
            every grid variant of that pass.
        random_state: An int seed, a numpy ``Generator``/``RandomState``, a
            ``random.Random``, or None: a private generator seeded from numpy's
            global one when numpy is imported (``np.random.seed`` makes runs
            repeatable), else from Python's ``random`` (``random.seed`` does).

    Raises:
        TypeError: If ``points_to_evaluate`` is not a list of dicts, or
            ``random_state`` is of an unsupported type.
        ValueError: If ``max_concurrent`` is negative.
    """

    CKPT_FILE_TMPL = "basic-variant-state-{}.pkl"

    def __init__(
        self,
        points_to_evaluate: Sequence[dict[str, Any]] | None = None,
        max_concurrent: int = 0,
        constant_grid_search: bool = False,
        random_state: RandomState = None,
    ):
        self._points = _check_points(points_to_evaluate)
        self.max_concurrent = _check_max_concurrent(max_concurrent)
        self._constant_grid_search = bool(constant_grid_search)
        self._rng: Any = as_random_source(random_state)._rng  # None: seeded at configure time
        self._finished = False
        self._configured = False
        self._space: dict[str, Any] = {}
        self._num_samples = 1
        self._num_passes: float = 0
        self._total_samples = 0
        self._live_trials: set[str] = set()
        self._handed_out = 0
        self._experiment: Any = None  # an Experiment given to add_configurations
        self._trial_prefix = ""  # next_trial's trial ids: "<prefix>_00000", ...
        # Position: pass index, generator as the pass began, items pulled from the pass.
        self._pass = -1
        self._pass_rng: Any = None  # the generator's state as the current pass began
        self._spec_blob: bytes | None = None  # (space, points), pickled once
        self._in_pass = 0
        self._variants: Iterator[_Variant] | None = None
        self._buffer: _Variant | None = None

    @property
    def total_samples(self) -> int:
        """Configs this generator will produce (-1 for ``num_samples=-1``)."""
        return self._total_samples

    def add_configurations(self, param_space: Any, num_samples: int = 1) -> None:
        """Take the search space and the number of passes over its grid.

        Args:
            param_space: The search space; or, as Ray's, an ``Experiment`` (or a list
                holding one), whose ``config`` and ``num_samples`` are taken and whose
                trials :meth:`next_trial` makes.
            num_samples: Passes over the grid (ignored with an ``Experiment``).

        Raises:
            RuntimeError: If called twice.
            TypeError: If ``param_space`` is not a dict or ``num_samples`` not an int.
            ValueError: If ``num_samples`` < -1, a point names a key not in the space,
                or several experiments are given.
        """
        from fasttune.experiment.experiment import Experiment

        if self._configured:
            raise RuntimeError(
                "BasicVariantGenerator.add_configurations() was already called; use a new "
                "generator for each experiment."
            )
        if isinstance(param_space, (list, tuple)) and any(
            isinstance(e, Experiment) for e in param_space
        ):
            if len(param_space) != 1:
                raise ValueError(
                    f"BasicVariantGenerator takes one Experiment, got {len(param_space)}; "
                    "use a generator per experiment."
                )
            param_space = param_space[0]
        if isinstance(param_space, Experiment):
            self._experiment = param_space
            param_space, num_samples = param_space.spec["config"], param_space.spec["num_samples"]
        space = {} if param_space is None else param_space
        if not isinstance(space, dict):
            raise TypeError(f"`param_space` must be a dict, got {type(space).__name__}.")
        passes = check_num_samples(num_samples)
        total = count_variants({"config": space, "num_samples": num_samples}, self._points)
        self._space = copy.deepcopy(space)
        self._num_samples = int(num_samples)
        self._num_passes = len(self._points) + max(passes - len(self._points), 0)
        self._total_samples = -1 if total == math.inf else int(total)
        if self._rng is None and _draws_at_random(self._space, self._points):
            # Seeded from the global state the user can have seeded, so a seed repeats
            # a run; numpy is not imported for it (~0.1 s) when the user has not.
            self._rng = fresh_generator()
        self._configured = True
        if self._total_samples == 0:
            self.set_finished()

    def next_suggestion(self, trial_id: str) -> Suggestion | None:
        """The next config, or None while ``max_concurrent`` trials are live or when done.

        Raises:
            RuntimeError: If :meth:`add_configurations` was not called.
            ValueError: If sampling a value fails.
        """
        if not self._configured:
            raise RuntimeError(
                "BasicVariantGenerator: call add_configurations() (or set_state()) before "
                "next_suggestion()."
            )
        if self._finished:
            return None
        if self.max_concurrent and len(self._live_trials) >= self.max_concurrent:
            return None
        variant = self._take()
        if variant is None:
            self.set_finished()
            return None
        self._handed_out += 1
        self._live_trials.add(trial_id)
        if 0 <= self._total_samples <= self._handed_out:
            # Counted all: confirm by peeking, so is_finished() is true right away.
            self._buffer = self._pull()
            if self._buffer is None:
                self.set_finished()
        resolved_vars, config = variant
        return Suggestion(config, format_vars(resolved_vars), flatten_resolved_vars(resolved_vars))

    def next_trial(self) -> Any:
        """A ``Trial`` for the next config of the Experiment given to
        :meth:`add_configurations` (None when there is none now), as Ray's.

        Raises:
            RuntimeError: If no Experiment was given.
        """
        from fasttune.experiment.trial import Trial, new_experiment_hash

        experiment = self._experiment
        if experiment is None:
            raise RuntimeError(
                "BasicVariantGenerator.next_trial() makes trials of an Experiment: pass "
                "one to add_configurations() first (or use next_suggestion())."
            )
        if not self._trial_prefix:
            self._trial_prefix = new_experiment_hash()
        trial_id = f"{self._trial_prefix}_{self._handed_out:05d}"
        suggestion = self.next_suggestion(trial_id)
        if suggestion is None:
            return None
        spec = experiment.spec
        stop = spec["stop"] if isinstance(spec["stop"], dict) else None
        tag = f"{self._handed_out - 1}_{suggestion.tag}" if suggestion.tag else ""
        return Trial(
            experiment.trainable_name,
            config=suggestion.config,
            trial_id=trial_id,
            experiment_tag=tag or str(self._handed_out - 1),
            evaluated_params=suggestion.evaluated_params,
            stopping_criterion=stop,
            max_failures=spec["max_failures"],
            checkpoint_frequency=spec.get("checkpoint_freq", 0),
            checkpoint_at_end=bool(spec.get("checkpoint_at_end")),
        )

    def on_trial_complete(
        self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False
    ) -> None:
        """Free the trial's ``max_concurrent`` slot (unknown ids are ignored)."""
        self._live_trials.discard(trial_id)

    # ------------------------------------------------------------------ iteration
    def _take(self) -> _Variant | None:
        if self._buffer is not None:
            variant, self._buffer = self._buffer, None
            return variant
        return self._pull()

    def _pull(self) -> _Variant | None:
        while True:
            if self._variants is None and not self._start_pass(self._pass + 1):
                return None
            assert self._variants is not None
            try:
                variant = next(self._variants)
            except StopIteration:
                self._variants = None
                continue
            self._in_pass += 1
            return variant

    def _start_pass(self, index: int) -> bool:
        if index >= self._num_passes:
            return False
        space = self._space
        if index < len(self._points):
            space = resolved_with_presets(space, self._points[index])
        self._pass = index
        self._pass_rng = _snapshot(self._rng)
        self._in_pass = 0
        self._variants = generate_variants(
            space, self._constant_grid_search, as_random_source(self._rng)
        )
        return True

    # ------------------------------------------------------------------ state
    def get_state(self) -> dict[str, Any]:
        """Everything needed to continue, the space included (pickled once, as bytes).

        ``max_concurrent`` is not part of it: the restoring instance's value applies.
        """
        started = self._pass >= 0
        return {
            **super().get_state(),
            "kind": _STATE_KIND,
            "configured": self._configured,
            "spec": self._spec(),
            "num_samples": self._num_samples,
            "constant_grid_search": self._constant_grid_search,
            "total_samples": self._total_samples,
            "handed_out": self._handed_out,
            "live_trials": sorted(self._live_trials),
            "pass": self._pass,
            "pass_rng": pickle.dumps(_restored(self._pass_rng) if started else self._rng),
            "in_pass": self._in_pass,
            "buffer": self._buffer,
        }

    def _spec(self) -> bytes:
        if self._spec_blob is None:
            self._spec_blob = cloudpickle.dumps((self._space, self._points))
        return self._spec_blob

    def set_state(self, state: dict[str, Any]) -> None:
        """Continue from ``state``: replays the current pass up to where it stopped.

        Raises:
            ValueError: If ``state`` does not come from a BasicVariantGenerator.
        """
        check_state_kind(state, _STATE_KIND, "BasicVariantGenerator")
        super().set_state(state)
        self._configured = state["configured"]
        self._spec_blob = state["spec"]
        self._space, self._points = pickle.loads(self._spec_blob)
        self._num_samples = state["num_samples"]
        self._constant_grid_search = state["constant_grid_search"]
        passes = check_num_samples(self._num_samples)
        self._num_passes = len(self._points) + max(passes - len(self._points), 0)
        self._total_samples = state["total_samples"]
        self._handed_out = state["handed_out"]
        self._live_trials = set(state["live_trials"])
        self._buffer = state["buffer"]
        self._rng = pickle.loads(state["pass_rng"])
        self._pass, self._variants, self._in_pass = state["pass"], None, 0
        if self._pass >= 0 and self._start_pass(self._pass):
            self._replay(state["in_pass"])

    def _replay(self, count: int) -> None:
        """Pull ``count`` items of the current pass again (same values, same draws)."""
        assert self._variants is not None
        for _ in range(count):
            try:
                next(self._variants)
            except StopIteration:
                self._variants = None
                return
            self._in_pass += 1


def _check_points(points: Sequence[dict[str, Any]] | None) -> list[dict[str, Any]]:
    if points is None:
        return []
    if isinstance(points, (str, bytes, dict)) or not isinstance(points, Sequence):
        raise TypeError(
            "`points_to_evaluate` must be a list of config dicts, got "
            f"{type(points).__name__}: {points!r}."
        )
    for index, point in enumerate(points):
        if not isinstance(point, dict):
            raise TypeError(
                f"`points_to_evaluate[{index}]` must be a dict, got {type(point).__name__}: "
                f"{point!r}."
            )
    return copy.deepcopy(list(points))


def _check_max_concurrent(max_concurrent: Any) -> int:
    if max_concurrent is None:
        return 0
    if isinstance(max_concurrent, bool) or not isinstance(max_concurrent, Integral):
        raise TypeError(f"`max_concurrent` must be an int, got {max_concurrent!r}.")
    if max_concurrent < 0:
        raise ValueError(f"`max_concurrent` must be >= 0 (0: no limit), got {max_concurrent}.")
    return int(max_concurrent)


def _snapshot(rng: Any) -> Any:
    """The generator's state, cheaply: a Generator's few ints, a ``random.Random``'s
    state tuple (8 us; its pickle takes 30), else a pickle."""
    if isinstance(rng, random.Random):
        return (random.Random, rng.getstate())
    bit_generator = getattr(rng, "bit_generator", None)
    if bit_generator is not None:
        return (type(bit_generator), bit_generator.state)
    return pickle.dumps(rng)  # a legacy RandomState: 2.5 KB of state


def _draws_at_random(space: Any, points: Sequence[Any]) -> bool:
    """Whether the space (or a point) holds a domain to sample: a grid of constants
    needs no generator, and then numpy is never imported."""
    stack = [space, list(points)]
    while stack:
        value = stack.pop()
        if isinstance(value, Domain):
            return True
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
    return False


def _restored(snapshot: Any) -> Any:
    """A generator in the state :func:`_snapshot` recorded."""
    if isinstance(snapshot, bytes):
        return pickle.loads(snapshot)
    generator_type, state = snapshot
    if generator_type is random.Random:
        generator = random.Random()
        generator.setstate(state)
        return generator
    import numpy as np

    bit_generator = generator_type()
    bit_generator.state = state
    return np.random.Generator(bit_generator)
