"""fasttune search spaces as ConfigSpace spaces (what BOHB's model is built on).

Each searched key becomes one hyperparameter named by its key path joined with ``/``:

- ``uniform``/``loguniform`` -> ``UniformFloatHyperparameter`` (``log=True``);
- ``randint``/``lograndint`` -> ``UniformIntegerHyperparameter`` over
  ``[lower, upper - 1]`` (``upper`` stays excluded);
- ``randn(mean, sd)`` -> ``NormalFloatHyperparameter`` bounded to ``mean ± 5 sd``
  (ConfigSpace 1.x requires bounds; the cut removes under a millionth of the mass);
- quantized domains (``quniform``, ``qrandint``...) -> a float hyperparameter over
  the first and last multiple of ``q`` widened by half a step, rounded to the step
  when decoded (ConfigSpace 1.x has no ``q``), so each multiple is equally likely;
- ``choice`` -> ``CategoricalHyperparameter`` over the values themselves, or over
  their indices when ConfigSpace cannot hold them as distinct choices (``[1, True]``).

:class:`ConfigSpaceCodec` turns BOHB's raw values into configs and points into raw
values, so the space keeps no information ConfigSpace cannot express.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasttune._support.imports import import_optional
from fasttune.search._flat_space import FlatSpace, Param, flatten_point, to_plain, unflatten
from fasttune.search._samplers import Normal

_NORMAL_SDS = 5.0


def import_configspace() -> Any:
    """The ``ConfigSpace`` module, or an ImportError naming ``pip install "fasttune[bohb]"``."""
    return import_optional("ConfigSpace", extra="bohb", feature="TuneBOHB")


class ConfigSpaceCodec:
    """A ConfigSpace space and the way between its values and fasttune configs.

    Args:
        space: The searched parameters (from ``flatten_space``).
        seed: Seed of the space's own sampler (None: random).

    Example:
        >>> from fasttune.search._flat_space import flatten_space
        >>> from fasttune.search.sample import choice, randint
        >>> spec = {"n": randint(1, 4), "c": choice([1, True])}
        >>> codec = ConfigSpaceCodec(flatten_space(spec, "TuneBOHB"))
        >>> codec.space["n"].upper, codec.space["c"].choices
        (3, (0, 1))
        >>> codec.decode({"n": 2, "c": 1})
        {'n': 2, 'c': True}
    """

    def __init__(self, space: FlatSpace, seed: int | None = None):
        cs = import_configspace()
        self.flat = space
        self.by_index: set[str] = set()
        self.space = cs.ConfigurationSpace(seed=seed)
        for param in space.params:
            _add(self.space, self._hyperparameter(cs, param))

    def _hyperparameter(self, cs: Any, param: Param) -> Any:
        name = param.name
        if param.kind == "choice":
            categories = list(param.domain.categories)  # type: ignore[attr-defined]
            try:
                return cs.CategoricalHyperparameter(name, categories)
            except (ValueError, TypeError):  # e.g. 1 and True: equal, so not distinct
                self.by_index.add(name)
                return cs.CategoricalHyperparameter(name, list(range(len(categories))))
        if isinstance(param.sampler, Normal):
            mu, sd = float(param.sampler.mean), float(param.sampler.sd)
            low, high = mu - _NORMAL_SDS * sd, mu + _NORMAL_SDS * sd
            return cs.NormalFloatHyperparameter(name, mu=mu, sigma=sd, lower=low, upper=high)
        if param.q is not None:
            low, high = float(param.low) - param.q / 2, float(param.high) + param.q / 2
            if param.log:
                low = max(low, float(param.low) / 2)  # a log range must stay above 0
            return cs.UniformFloatHyperparameter(name, lower=low, upper=high, log=param.log)
        if param.kind == "int":
            return cs.UniformIntegerHyperparameter(
                name, lower=int(param.low), upper=int(param.high), log=param.log
            )
        return cs.UniformFloatHyperparameter(
            name, lower=float(param.low), upper=float(param.high), log=param.log
        )

    def decode(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """BOHB's ``{name: raw value}`` as a nested config, each value in its domain."""
        decoded = {}
        for param in self.flat.params:
            raw = to_plain(values[param.name])
            if param.kind == "choice":
                categories = param.domain.categories  # type: ignore[attr-defined]
                index = int(raw) if param.name in self.by_index else _index_of(categories, raw)
                raw = categories[index]
            decoded[param.name] = raw
        return self.flat.decode(decoded)

    def encode_point(self, point: Mapping[str, Any], searcher: str) -> dict[str, Any]:
        """A config as ConfigSpace values (checked against the domains).

        Raises:
            ValueError: A searched key is missing or holds a value outside its domain.
        """
        flat = self.flat.encode_point(point, searcher)
        raw: dict[str, Any] = {}
        for param in self.flat.params:
            value = flat[param.name]
            if param.kind == "choice":
                categories = param.domain.categories  # type: ignore[attr-defined]
                index = _index_of(categories, value)
                value = index if param.name in self.by_index else categories[index]
            elif param.kind == "int" and param.q is None:
                value = int(value)
            else:
                value = float(value)
            raw[param.name] = value
        return raw


def native_point(space: Any, point: Mapping[str, Any], searcher: str) -> dict[str, Any]:
    """A config as values of a native ConfigSpace space (``/``-joined names), checked.

    Raises:
        ValueError: If the point does not fit the space.
    """
    cs = import_configspace()
    flat = flatten_point(point)
    names = list(space.keys())
    values = {name: flat[name] for name in names if name in flat}
    try:
        cs.Configuration(space, values=values)
    except Exception as error:  # ConfigSpace raises several types for a bad value
        raise ValueError(
            f"{searcher}: a point of `points_to_evaluate` does not fit the ConfigSpace space "
            f"({error}). Point: {dict(point)!r}."
        ) from None
    return values


def native_config(values: Mapping[str, Any]) -> dict[str, Any]:
    """BOHB's values for a native space as a nested config of plain Python values."""
    return unflatten(values)


def _add(space: Any, hyperparameter: Any) -> None:
    add = getattr(space, "add", None) or space.add_hyperparameter  # ConfigSpace < 1.0
    add(hyperparameter)


def _index_of(categories: list[Any], value: Any) -> int:
    for i, category in enumerate(categories):  # same type first: True is not 1
        if type(category) is type(value) and _equal(category, value):
            return i
    for i, category in enumerate(categories):
        if _equal(category, value):
            return i
    raise ValueError(f"{value!r} is not one of the choices {categories!r}.")


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # e.g. arrays: ambiguous truth value
        return False
