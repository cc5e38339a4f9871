"""The per-trial ``Logger`` interface and ``pretty_print`` (as ``ray.tune.logger``)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from fasttune._support.encoding import to_builtin

if TYPE_CHECKING:
    from types import TracebackType


class Logger:
    """Writes the results of one trial somewhere, usually files in its directory.

    Subclasses set up their state in :meth:`_init` (called by the constructor) and
    implement :meth:`on_result`; the other methods are optional.

    Args:
        config: The trial's configuration.
        logdir: The trial's directory, where files are written.
        trial: The trial being logged, if any.

    Example:
        >>> class PrintLogger(Logger):
        ...     def on_result(self, result):
        ...         print(result["training_iteration"])
        >>> PrintLogger({}, "/tmp").on_result({"training_iteration": 1})
        1
    """

    def __init__(self, config: dict[str, Any], logdir: str, trial: Any | None = None):
        self.config = config
        self.logdir = logdir
        self.trial = trial
        self._init()

    def _init(self) -> None:
        """Set up state (open files...); called once by the constructor."""

    def on_result(self, result: dict[str, Any]) -> None:
        """Record one result of the trial."""
        raise NotImplementedError

    def update_config(self, config: dict[str, Any]) -> None:
        """Take note of a new configuration for the trial."""

    def close(self) -> None:
        """Release the files and other resources held by the logger."""

    def flush(self) -> None:
        """Push every write made so far to storage."""

    def __enter__(self) -> Logger:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


# ---------------------------------------------------------------------------
# pretty_print: a small YAML-like renderer, so that no yaml package is needed.

_FLOW_MIN_LEN = 4  # sequences this long are written on one line, as Ray does
_PLAIN = re.compile(r"^[A-Za-z0-9_./+()<>@-][A-Za-z0-9_./+()<>@ :,=-]*$")
_LOOKS_SPECIAL = re.compile(
    r"^(?:[-+]?(?:\d[\d_]*)?\.?\d*(?:[eE][-+]?\d+)?|[-+]?\.(?:inf|nan)"
    r"|true|false|yes|no|on|off|null|~)$",
    re.IGNORECASE,
)


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
        return repr(value)
    if isinstance(value, int):
        return str(value)
    text = str(value)
    if "\n" in text or any(ord(c) < 32 for c in text):
        return json.dumps(text)
    if (
        not _PLAIN.match(text)
        or _LOOKS_SPECIAL.match(text)
        or text != text.strip()
        or ": " in text
        or text.endswith(":")
    ):
        return "'" + text.replace("'", "''") + "'"
    return text


def _flow(value: list[Any]) -> str:
    return "[" + ", ".join(_scalar(v) for v in value) + "]"


def _is_scalar(value: Any) -> bool:
    return not isinstance(value, (dict, list))


def _render(value: Any, indent: str, lines: list[str], prefix: str) -> None:
    """Append the lines for ``value``; ``prefix`` is put before its first line."""
    if isinstance(value, dict) and value:
        first = True
        for key in sorted(value):
            head = prefix if first else indent
            first = False
            item = value[key]
            label = f"{head}{_scalar(key)}:"
            if isinstance(item, dict) and item:
                lines.append(label)
                _render(item, indent + "  ", lines, indent + "  ")
            elif isinstance(item, list) and item and not _flowed(item):
                lines.append(label)
                _render(item, indent, lines, indent)
            else:
                lines.append(f"{label} {_inline(item)}")
    elif isinstance(value, list) and value and not _flowed(value):
        first = True
        for item in value:
            head = prefix if first else indent
            first = False
            if _is_scalar(item) or not item or (isinstance(item, list) and _flowed(item)):
                lines.append(f"{head}- {_inline(item)}")
            else:
                _render(item, indent + "  ", lines, head + "- ")
    else:
        lines.append(prefix + _inline(value))


def _flowed(value: list[Any]) -> bool:
    return len(value) >= _FLOW_MIN_LEN and all(_is_scalar(v) for v in value)


def _inline(value: Any) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return _flow(value)
    return _scalar(value)


def pretty_print(result: dict[str, Any], exclude: Collection[str] | None = None) -> str:
    """Render a result as readable, YAML-like text, one key per line.

    As in Ray Tune, ``config`` and ``hist_stats`` are left out, and so are keys whose
    value is ``None`` and keys named in ``exclude``. Keys are sorted, nested dicts are
    indented, and lists of four or more plain values are written on one line.

    Args:
        result: The result to render.
        exclude: Top-level keys to leave out.

    Returns:
        The text, ending with a newline.

    Example:
        >>> print(pretty_print({"loss": 0.5, "info": {"lr": 0.01}, "config": {}}), end="")
        info:
          lr: 0.01
        loss: 0.5
    """
    skip = {"config", "hist_stats", *(exclude or ())}
    shown = {k: v for k, v in result.items() if v is not None and k not in skip}
    lines: list[str] = []
    _render(to_builtin(shown), "", lines, "")
    return "\n".join(lines) + "\n"
