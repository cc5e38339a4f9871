"""JSON encoding of results and configs that never fails on odd values.

numpy is never imported here: numpy values are recognised by the module of their
type and converted with their own ``tolist()``.
"""

from __future__ import annotations

import json
import numbers
from typing import Any

_JSON_KEY_TYPES = (str, int, float, bool, type(None))
_MAX_DEPTH = 100


class SafeFallbackEncoder(json.JSONEncoder):
    """A JSON encoder that turns values JSON does not know into something it does.

    numpy arrays become lists, numpy scalars and other numbers become Python ``int``
    or ``float``, a NaN numpy or non-builtin number becomes ``nan_str``, and anything
    else becomes its ``str()``. Builtin floats keep Python's handling (``NaN``,
    ``Infinity``), as in Ray Tune.

    Args:
        nan_str: What a NaN that needs conversion is written as.
        **kwargs: Passed on to :class:`json.JSONEncoder`.

    Example:
        >>> import json
        >>> json.dumps({"n": 1, "s": {1}}, cls=SafeFallbackEncoder)
        '{"n": 1, "s": "{1}"}'
    """

    def __init__(self, nan_str: str = "null", **kwargs: Any):
        super().__init__(**kwargs)
        self.nan_str = nan_str

    def default(self, o: Any) -> Any:
        try:
            if type(o).__module__ == "numpy" and hasattr(o, "tolist"):
                value = o.tolist()
                if isinstance(value, float) and value != value:
                    return self.nan_str
                return value
            if isinstance(o, numbers.Integral):
                return int(o)
            if isinstance(o, numbers.Number):
                value = float(o)  # type: ignore[arg-type]  # complex raises: stringified
                return self.nan_str if value != value else value
            return super().default(o)
        except Exception:
            return str(o)


def _stringify_keys(obj: Any, depth: int = 0) -> Any:
    """Copy ``obj`` with dict keys JSON cannot hold (tuples, objects) turned into str."""
    if depth > _MAX_DEPTH:
        return str(obj)
    if isinstance(obj, dict):
        return {
            (k if isinstance(k, _JSON_KEY_TYPES) else str(k)): _stringify_keys(v, depth + 1)
            for k, v in obj.items()
        }
    if isinstance(obj, (list, tuple)):
        return [_stringify_keys(v, depth + 1) for v in obj]
    return obj


_LINE_ENCODER = SafeFallbackEncoder()


def encode_result_line(result: Any) -> bytes:
    """Encode one result as a single JSON line (ending with a newline), as bytes.

    The output is ASCII (non-ASCII characters are escaped), so it never holds a raw
    newline before the terminating one.
    """
    try:
        text = _LINE_ENCODER.encode(result)
    except (TypeError, ValueError):
        text = _LINE_ENCODER.encode(_stringify_keys(result))
    return (text + "\n").encode("ascii")


def encode_config(config: dict[str, Any]) -> str:
    """Render a config as indented, key-sorted JSON, as Ray writes ``params.json``."""
    try:
        return json.dumps(config, indent=2, sort_keys=True, cls=SafeFallbackEncoder)
    except (TypeError, ValueError):
        # Keys of mixed types cannot be sorted; keys like tuples cannot be JSON keys.
        return json.dumps(_stringify_keys(config), indent=2, cls=SafeFallbackEncoder)


def to_builtin(obj: Any) -> Any:
    """Round-trip ``obj`` through :class:`SafeFallbackEncoder` to plain Python values."""
    return json.loads(encode_result_line(obj))
