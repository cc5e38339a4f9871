"""``Experiment``: a named experiment specification (as ``ray.tune.Experiment``).

An ``Experiment`` holds what ``tune.run`` calls the experiment's own arguments (the
trainable, its config, stop criteria, samples, storage, checkpoints); ``tune.run`` and
``tune.run_experiments`` take it in place of those arguments, and
``BasicVariantGenerator.add_configurations`` takes it to make trials from.

Example:
    >>> from fasttune.search.sample import grid_search
    >>> exp = Experiment("sweep", "my_trainable", config={"lr": grid_search([0.1, 0.01])},
    ...                  stop={"training_iteration": 3})
    >>> exp.name, exp.spec["num_samples"], exp.stop
    ('sweep', 1, {'training_iteration': 3})
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasttune._support.numeric import is_int

# The arguments of tune.run that belong to an Experiment (and its JSON spec's keys).
FIELDS = (
    "stop",
    "time_budget_s",
    "config",
    "resources_per_trial",
    "num_samples",
    "storage_path",
    "checkpoint_config",
    "max_failures",
    "trial_name_creator",
    "trial_dirname_creator",
    "log_to_file",
    "local_dir",
    "keep_checkpoints_num",
    "checkpoint_score_attr",
    "checkpoint_freq",
    "checkpoint_at_end",
)


class Experiment:
    """One experiment: a trainable, its config and how its trials run and stop.

    Args:
        name: The experiment's name (its folder under the storage path).
        run: The trainable: a function, a ``Trainable`` class or a registered name.
        stop: Stop criteria, as ``tune.run(stop=...)``.
        time_budget_s: Wall-clock budget of the experiment, in seconds.
        config: The search space (``param_space``).
        resources_per_trial: Resources of each trial.
        num_samples: Samples of the space (``-1``: until stopped).
        storage_path: Where the experiment folder goes (``local_dir``: Ray's older name).
        checkpoint_config: A ``CheckpointConfig``.
        max_failures: Retries of a failing trial.
        **rest: The remaining arguments of ``tune.run`` for an experiment
            (``trial_name_creator``, ``trial_dirname_creator``, ``log_to_file``,
            ``keep_checkpoints_num``, ``checkpoint_score_attr``, ``checkpoint_freq``,
            ``checkpoint_at_end``).

    Raises:
        TypeError: If ``name`` is not a string, ``run`` is missing, ``config`` is not a
            dict, or an unknown argument is given.
        ValueError: If ``num_samples`` is not an int >= 1 or -1.
    """

    def __init__(
        self,
        name: str,
        run: Any,
        *,
        stop: Any = None,
        time_budget_s: float | None = None,
        config: dict[str, Any] | None = None,
        resources_per_trial: Any = None,
        num_samples: int = 1,
        storage_path: str | None = None,
        checkpoint_config: Any = None,
        max_failures: int = 0,
        **rest: Any,
    ):
        if not isinstance(name, str) or not name:
            raise TypeError(f"Experiment: `name` must be a non-empty string, got {name!r}.")
        if run is None:
            raise TypeError(
                "Experiment: `run` must be a trainable (a function, a Trainable class or a "
                "registered name), got None."
            )
        if config is not None and not isinstance(config, Mapping):
            raise TypeError(
                f"Experiment: `config` must be a dict, got {type(config).__name__}: {config!r}."
            )
        if not is_int(num_samples) or (num_samples < 1 and num_samples != -1):
            raise ValueError(
                f"Experiment: `num_samples` must be an int >= 1 (or -1: until stopped), got "
                f"{num_samples!r}."
            )
        unknown = sorted(set(rest) - set(FIELDS))
        if unknown:
            raise TypeError(
                f"Experiment: unknown argument(s) {unknown}; it takes {['name', 'run', *FIELDS]}."
            )
        self._name = name
        self._run = run
        self._spec: dict[str, Any] = {
            "stop": stop,
            "time_budget_s": time_budget_s,
            "config": dict(config or {}),
            "resources_per_trial": resources_per_trial,
            "num_samples": int(num_samples),
            "storage_path": storage_path,
            "checkpoint_config": checkpoint_config,
            "max_failures": max_failures,
            **rest,
        }

    @classmethod
    def from_json(cls, name: str, spec: Mapping[str, Any]) -> Experiment:
        """An Experiment from Ray's dict form, ``{"run": ..., "config": ..., ...}``.

        Raises:
            TypeError: If ``spec`` is not a dict, lacks ``"run"`` or has unknown keys.
        """
        if not isinstance(spec, Mapping) or "run" not in spec:
            raise TypeError(
                f"Experiment {name!r}: the spec must be a dict with a 'run' key (the "
                f"trainable), got {spec!r}."
            )
        rest = {key: value for key, value in spec.items() if key != "run"}
        return cls(name, spec["run"], **rest)

    @property
    def name(self) -> str:
        """The experiment's name."""
        return self._name

    @property
    def run(self) -> Any:
        """The trainable."""
        return self._run

    @property
    def spec(self) -> dict[str, Any]:
        """The experiment's arguments, ``run`` included (a copy)."""
        return {"run": self._run, **self._spec}

    @property
    def stop(self) -> Any:
        """The stop criteria (a dict, a ``Stopper`` or a function; None: no criteria)."""
        return self._spec["stop"]

    @property
    def trainable_name(self) -> str:
        """The trainable's name, as trials record it."""
        run = self._run
        if isinstance(run, str):
            return run
        return str(getattr(run, "__name__", None) or type(run).__name__)

    def run_kwargs(self) -> dict[str, Any]:
        """The experiment's arguments as ``tune.run`` takes them (``name`` included)."""
        return {"name": self._name, **self._spec}

    def __repr__(self) -> str:
        return f"Experiment(name={self._name!r}, run={self.trainable_name!r})"


def as_experiment_list(experiments: Any) -> list[Experiment]:
    """One Experiment, a list of them, or Ray's ``{name: spec}`` dict, as a list.

    Raises:
        TypeError: For anything else.
    """
    if isinstance(experiments, Experiment):
        return [experiments]
    if isinstance(experiments, Mapping):
        return [
            spec if isinstance(spec, Experiment) else Experiment.from_json(name, spec)
            for name, spec in experiments.items()
        ]
    if isinstance(experiments, (list, tuple)) and all(
        isinstance(e, Experiment) for e in experiments
    ):
        return list(experiments)
    raise TypeError(
        "Expected an Experiment, a list of Experiments or a dict of name -> spec, got "
        f"{type(experiments).__name__}: {experiments!r}."
    )
