"""Ctrl-C during an experiment: the first stops it gracefully, the second at once."""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

logger = logging.getLogger(__name__)


class GracefulInterrupt:
    """Counts SIGINTs while installed; a second one raises ``KeyboardInterrupt``.

    Only the main thread can install signal handlers; elsewhere this does nothing.
    """

    def __init__(self) -> None:
        self.count = 0
        self._previous: Any = None
        self._installed = False

    def __enter__(self) -> GracefulInterrupt:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
            self._installed = True
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False

    def _on_sigint(self, signum: int, frame: Any) -> None:
        self.count += 1
        if self.count > 1:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            raise KeyboardInterrupt
        logger.warning(
            "Stopping the experiment (Ctrl-C again to exit at once); its state is saved."
        )
