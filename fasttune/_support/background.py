"""One background thread per tracker callback, so the driver's loop never waits on it.

Trackers are slow where the driver is fast: an MLflow store commits each write, a
W&B run takes most of a second to start. A callback hands each call to its own
thread, in order, and waits for them all only at the experiment's end.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

_STOP = object()


class BackgroundCalls:
    """Run submitted calls in order on one daemon thread (started on first use).

    Args:
        name: The thread's name, and what a failed call's warning names.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Queue ``fn(*args)``; a call that raises is logged, and later ones still run."""
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                    self._thread.start()
        self._queue.put((fn, args))

    def close(self) -> None:
        """Let the thread end after the calls submitted so far, without waiting for it."""
        if self._thread is not None and not self._closed:
            self._closed = True
            self._queue.put(_STOP)

    def drain(self) -> None:
        """Wait until every call submitted so far has run, then let the thread end."""
        thread = self._thread
        if thread is None:
            return
        self.close()
        thread.join()
        self._thread = None
        self._closed = False

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            fn, args = item
            try:
                fn(*args)
            except Exception:
                logger.warning(
                    "%s: %s failed", self.name, getattr(fn, "__name__", fn), exc_info=True
                )

    def __getstate__(self) -> dict[str, Any]:
        return {"name": self.name}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["name"])  # type: ignore[misc]
