"""Walking a spec by path: split it into resolved values, domains and grid axes; set values.

A path is a tuple of keys from the top of the spec: dict keys, and ints for list
or tuple positions (``("layers", 0, "units")``).
"""

from __future__ import annotations

from typing import Any

from fasttune.search._domains import Categorical, Domain
from fasttune.search._spec_view import is_grid_dict

Path = tuple[Any, ...]
PathValues = list[tuple[Path, Any]]


def parse_spec_vars(spec: dict[str, Any]) -> tuple[PathValues, PathValues, PathValues]:
    """Split a spec into resolved values, domains to sample and grid axes.

    Returns:
        ``(resolved_vars, domain_vars, grid_vars)``, each a list of ``(path, value)``;
        grid axes are :class:`Categorical` grid domains, sorted by path.

    Example:
        >>> from fasttune.search.sample import grid_search
        >>> resolved, domains, grids = parse_spec_vars({"a": 1, "b": grid_search([1, 2])})
        >>> resolved, [path for path, _ in grids]
        ([(('a',), 1)], [('b',)])
    """
    resolved: PathValues = []
    domains: PathValues = []
    grids: PathValues = []
    _split(spec, (), resolved, domains, grids)
    grids.sort(key=lambda item: path_sort_key(item[0]))
    return resolved, domains, grids


def _split(
    value: Any, path: Path, resolved: PathValues, domains: PathValues, grids: PathValues
) -> None:
    if is_grid_dict(value):
        grids.append((path, Categorical(value["grid_search"]).grid()))
    elif isinstance(value, Domain):
        (grids if value.is_grid() else domains).append((path, value))
    elif isinstance(value, dict):
        for key, item in value.items():
            _split(item, (*path, key), resolved, domains, grids)
    elif isinstance(value, (list, tuple)) and path:
        for index, item in enumerate(value):
            _split(item, (*path, index), resolved, domains, grids)
    elif path:
        resolved.append((path, value))


def path_sort_key(path: Path) -> tuple[tuple[int, Any], ...]:
    """Sort key equal to plain tuple order, but safe when int and str keys meet."""
    return tuple((0, part) if isinstance(part, int) else (1, str(part)) for part in path)


def assign_value(spec: Any, path: Path, value: Any) -> None:
    """Set the value at ``path`` in ``spec``, rebuilding any tuples on the way.

    Raises:
        ValueError: If ``spec`` itself is a tuple (it cannot be changed in place).

    Example:
        >>> spec = {"a": {"b": [0, 0]}}
        >>> assign_value(spec, ("a", "b", 1), 5)
        >>> spec
        {'a': {'b': [0, 5]}}
    """
    if isinstance(spec, tuple):
        raise ValueError("assign_value: cannot assign into a tuple at the top of the spec.")
    _assigned(spec, path, value)


def _assigned(container: Any, path: Path, value: Any) -> Any:
    key = path[0]
    child = value if len(path) == 1 else _assigned(container[key], path[1:], value)
    if isinstance(container, tuple):
        return (*container[:key], child, *container[key + 1 :])
    container[key] = child
    return container


def get_value(spec: Any, path: Path) -> Any:
    for key in path:
        spec = spec[key]
    return spec


def resolve_nested_dict(nested_dict: dict[str, Any]) -> dict[Path, Any]:
    """Flatten nested dicts to ``{path_tuple: value}`` (the input of :func:`format_vars`).

    Example:
        >>> resolve_nested_dict({"a": {"b": 1}, "c": 2})
        {('a', 'b'): 1, ('c',): 2}
    """
    flat: dict[Path, Any] = {}
    for key, value in nested_dict.items():
        if isinstance(value, dict):
            for sub_path, sub_value in resolve_nested_dict(value).items():
                path = (key, *sub_path)  # not in the brackets: that is 3.11 syntax to mypy
                flat[path] = sub_value
        else:
            flat[(key,)] = value
    return flat
