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


def _one_shot_encoder() -> Any:
    """The C encoder that ``json.dumps`` would build anew for every call, built once.

    ``JSONEncoder.encode`` makes a fresh C encoder (and a circular-reference memo) on
    each call; a result line is encoded for every result, so this one is kept. It
    skips the circular check: a self-referencing result fails with RecursionError
    and takes the checked path below. None where the C accelerator is missing.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython always has it
        return None
    return make(
        None,  # no circular-reference memo
        _LINE_ENCODER.default,
        json.encoder.encode_basestring_ascii,
        None,  # no indent
        ": ",
        ", ",
        False,  # sort_keys
        False,  # skipkeys
        True,  # allow_nan: NaN and Infinity as Python writes them, as Ray does
    )


_FAST_LINE_ENCODER = _one_shot_encoder()


def encode_result_line(result: Any) -> bytes:
    """Encode one result as a single JSON line (ending with a newline), as bytes.

    The output is ASCII (non-ASCII characters are escaped), so it never holds a raw
    newline before the terminating one.
    """
    if _FAST_LINE_ENCODER is not None and type(result) is dict:
        try:
            return ("".join(_FAST_LINE_ENCODER(result, 0)) + "\n").encode("ascii")
        except (TypeError, ValueError, RecursionError):
            pass  # odd keys or a cycle: the checked path says which
    try:
        text = _LINE_ENCODER.encode(result)
    except (TypeError, ValueError):
        text = _LINE_ENCODER.encode(_stringify_keys(result))
    return (text + "\n").encode("ascii")


def _flat_config_encoder() -> Any:
    """A C encoder writing a dict of plain values as ``json.dumps(..., indent=2,
    sort_keys=True)`` does but for the braces' line breaks: its item separator
    carries the newline and indent. ``json.dumps`` with an indent takes its pure-Python
    encoder, 7 us for a one-key config, once per trial start; this one, 1 us."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # pragma: no cover - CPython always has it
        return None
    return make(
        None,
        _LINE_ENCODER.default,
        json.encoder.encode_basestring_ascii,
        None,
        ": ",
        ",\n  ",
        True,  # sort_keys
        False,
        True,
    )


_FLAT_CONFIG_ENCODER = _flat_config_encoder()
_PLAIN_TYPES = frozenset((str, int, float, bool, type(None)))


def encode_config(config: dict[str, Any]) -> str:
    """Render a config as indented, key-sorted JSON, as Ray writes ``params.json``."""
    if (
        _FLAT_CONFIG_ENCODER is not None
        and type(config) is dict
        and config
        and all(type(key) is str for key in config)
        and all(type(value) in _PLAIN_TYPES for value in config.values())
    ):
        return "{\n  " + "".join(_FLAT_CONFIG_ENCODER(config, 0))[1:-1] + "\n}"
    try:
        return json.dumps(config, indent=2, sort_keys=True, cls=SafeFallbackEncoder)
    except (TypeError, ValueError):
        # Keys of mixed types cannot be sorted; keys like tuples cannot be JSON keys.
        return json.dumps(_stringify_keys(config), indent=2, cls=SafeFallbackEncoder)


def to_builtin(obj: Any) -> Any:
    """Round-trip ``obj`` through :class:`SafeFallbackEncoder` to plain Python values."""
    return json.loads(encode_result_line(obj))
