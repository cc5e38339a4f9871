"""Say something once per process (as Ray's ``ray.util.log_once``)."""

from __future__ import annotations

_seen: set[str] = set()


def log_once(key: str) -> bool:
    """True the first time ``key`` is asked about in this process, False after.

    Example:
        >>> log_once("doc-example"), log_once("doc-example")
        (True, False)
    """
    if key in _seen:
        return False
    _seen.add(key)
    return True
