"""PBT's explore step: new hyperparameters from a better trial's (as Ray Tune's PBT).

For each key of ``hyperparam_mutations`` the value is either *resampled* (with
``resample_probability``, or always for a list whose current value is not in it)
or *perturbed*: a value from a list moves to a neighbouring index (clipped at the
ends); a value drawn from a search-space domain or a function is multiplied by one
of the ``perturbation_factors``. As in Ray Tune, a perturbed continuous value is not
clipped to the domain's bounds (a list gives hard limits), and a value that was an
``int`` stays an ``int`` (truncated). ``custom_explore_fn`` runs last.

All randomness comes from one ``random``-like source, so seeding it (``random.seed``
for the default) makes the explore step reproducible.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from fasttune.search.sample import Domain, Function
from fasttune.search.variant_generator import format_vars

ExploreFn = Callable[[dict[str, Any]], dict[str, Any]]


class RandomSource(Protocol):
    """What explore needs from a random generator (``random`` or a ``random.Random``)."""

    def random(self) -> float: ...

    def choice(self, seq: Sequence[Any]) -> Any: ...


def validate_mutations(mutations: Mapping[str, Any], _path: tuple[str, ...] = ()) -> None:
    """Check every value of ``hyperparam_mutations`` (nested dicts included).

    Raises:
        TypeError: A value is not a list, tuple, dict, search-space domain or callable.
        ValueError: A value is a ``tune.sample_from`` or an empty list.

    Example:
        >>> validate_mutations({"lr": [0.1, 0.01], "opt": {"momentum": [0.9, 0.99]}})
        >>> validate_mutations({"lr": 0.1})
        Traceback (most recent call last):
        ...
        TypeError: hyperparam_mutations['lr'] must be a list, tuple, dict, search space \
(tune.uniform, ...) or callable, got 0.1 (float).
    """
    for key, value in mutations.items():
        path = (*_path, str(key))
        where = f"hyperparam_mutations[{'/'.join(path)!r}]"
        if isinstance(value, Function):
            raise ValueError(
                f"{where} is a tune.sample_from, which PBT cannot resample or perturb. Use "
                "tune.uniform, tune.loguniform, a list of values or a plain callable."
            )
        if isinstance(value, Mapping):
            validate_mutations(value, path)
        elif isinstance(value, (list, tuple)):
            if not value:
                raise ValueError(f"{where} is an empty list; give the allowed values.")
        elif not (isinstance(value, Domain) or callable(value)):
            raise TypeError(
                f"{where} must be a list, tuple, dict, search space (tune.uniform, ...) or "
                f"callable, got {value!r} ({type(value).__name__})."
            )


def explore(
    config: dict[str, Any],
    mutations: Mapping[str, Any],
    resample_probability: float,
    perturbation_factors: Sequence[float],
    custom_explore_fn: ExploreFn | None,
    rng: RandomSource,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return a mutated copy of ``config`` and, per key, what was done to it.

    Args:
        config: The configuration to start from (the better trial's).
        mutations: ``hyperparam_mutations`` (validated).
        resample_probability: Chance of resampling a key instead of perturbing it.
        perturbation_factors: Factors a continuous value may be multiplied by.
        custom_explore_fn: Applied last to the whole new config, if given.
        rng: The random source (``random`` itself, or a seeded ``random.Random``).

    Returns:
        ``(new_config, operations)``; operations map each key to ``"resample"``,
        ``"shift left"``/``"shift right"`` (``" (noop)"`` at a list's end) or
        ``"* <factor>"`` (nested dicts for nested keys).

    Example:
        >>> import random
        >>> new, ops = explore({"lr": 0.1, "bs": 32}, {"bs": [16, 32, 64]}, 0.0, (1.2, 0.8),
        ...                    None, random.Random(0))
        >>> new["bs"] in (16, 64), new["lr"]
        (True, 0.1)
    """
    operations: dict[str, Any] = {}
    new_config = copy.deepcopy(config)
    for key, distribution in mutations.items():
        if isinstance(distribution, Mapping):
            nested, nested_ops = explore(
                config[key], distribution, resample_probability, perturbation_factors, None, rng
            )
            new_config[key] = nested
            operations[key] = nested_ops
        elif isinstance(distribution, (list, tuple)):
            if rng.random() < resample_probability or config[key] not in distribution:
                new_config[key] = rng.choice(distribution)
                operations[key] = "resample"
            else:
                shift = rng.choice([-1, 1])
                old = list(distribution).index(config[key])
                new = min(max(old + shift, 0), len(distribution) - 1)
                new_config[key] = distribution[new]
                side = "left" if shift == -1 else "right"
                operations[key] = f"shift {side}{' (noop)' if new == old else ''}"
        else:
            if rng.random() < resample_probability:
                if isinstance(distribution, Domain):
                    new_config[key] = _sample(distribution, rng)
                else:
                    new_config[key] = distribution()
                operations[key] = "resample"
            else:
                factor = rng.choice(perturbation_factors)
                new_config[key] = config[key] * factor
                operations[key] = f"* {factor}"
            if isinstance(config[key], int):
                new_config[key] = int(new_config[key])
    if custom_explore_fn is not None:
        new_config = custom_explore_fn(new_config)
        if new_config is None:
            raise ValueError("custom_explore_fn returned None; it must return the new config.")
    return new_config, operations


def _sample(domain: Domain, rng: RandomSource) -> Any:
    """Draw from ``domain`` with a seed taken from ``rng`` (so seeding ``rng`` is enough)."""
    return domain.sample(None, random_state=int(rng.random() * 2**32))


def fill_config(config: dict[str, Any], attr: str, space: Any, rng: RandomSource) -> None:
    """Set ``config[attr]`` by sampling ``space`` (a value missing from the initial config).

    Example:
        >>> import random
        >>> config = {}
        >>> fill_config(config, "bs", [32], random.Random(0))
        >>> config
        {'bs': 32}
    """
    if isinstance(space, Domain):
        config[attr] = _sample(space, rng)
    elif callable(space):
        config[attr] = space()
    elif isinstance(space, (list, tuple)):
        config[attr] = rng.choice(space)
    elif isinstance(space, Mapping):
        config[attr] = {}
        for key, value in space.items():
            fill_config(config[attr], key, value, rng)


def make_experiment_tag(orig_tag: str, config: Mapping[str, Any], keys: Any) -> str:
    """The experiment tag of a perturbed trial: ``<orig_tag>@perturbed[<key=value,...>]``.

    Example:
        >>> make_experiment_tag("0_lr=0.1000", {"lr": 0.08, "bs": 32}, {"lr": None})
        '0_lr=0.1000@perturbed[lr=0.0800]'
    """
    return f"{orig_tag}@perturbed[{format_vars({('config', k): config[k] for k in keys})}]"


def filter_mutated(config: Mapping[str, Any], mutations: Mapping[str, Any]) -> dict[str, Any]:
    """Only the (nested) keys of ``config`` that ``mutations`` names.

    Example:
        >>> filter_mutated({"a": {"b": 1, "c": 2}, "d": 3}, {"a": {"b": [1, 2]}})
        {'a': {'b': 1}}
    """
    out: dict[str, Any] = {}
    for key, value in config.items():
        if key not in mutations:
            continue
        if isinstance(value, Mapping) and isinstance(mutations[key], Mapping):
            out[key] = filter_mutated(value, mutations[key])
        else:
            out[key] = value
    return out


def summarize_changes(
    old: Mapping[str, Any], new: Mapping[str, Any], operations: Mapping[str, Any], indent: str = ""
) -> str:
    """Lines ``key : old --- (operation) --> new`` for the log.

    Example:
        >>> print(summarize_changes({"lr": 0.1}, {"lr": 0.12}, {"lr": "* 1.2"}), end="")
        lr : 0.1 --- (* 1.2) --> 0.12
    """
    lines = []
    for key, old_value in old.items():
        new_value = new.get(key)
        op = operations.get(key) if isinstance(operations, Mapping) else None
        if isinstance(old_value, Mapping) and isinstance(new_value, Mapping):
            nested = summarize_changes(old_value, new_value, op or {}, indent + "    ")
            lines.append(f"{indent}{key} :\n{nested}")
        else:
            arrow = f"--- ({op}) -->" if op else "----->"
            lines.append(f"{indent}{key} : {old_value} {arrow} {new_value}\n")
    return "".join(lines)
