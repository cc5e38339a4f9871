"""A logger that writes nothing."""

from __future__ import annotations

from typing import Any

from fasttune.logger.logger import Logger


class NoopLogger(Logger):
    """A :class:`Logger` that ignores every result (for tests, or to turn logging off)."""

    def on_result(self, result: dict[str, Any]) -> None:
        """Ignore ``result``."""
