"""What a driver and its workers say to each other, whatever carries it.

A driver sends *commands*: ``(op, argument)`` tuples, small and cheap to pickle. A
worker answers with the events of :mod:`fasttune.executors.base`. A :class:`Transport`
carries both: a pipe to a worker process (:mod:`~fasttune.executors.local`), in-process
queues (:mod:`~fasttune.executors.inline`) or a Ray actor's calls
(:mod:`~fasttune.executors.ray_executor`).
"""

from __future__ import annotations

import logging
import pickle
import struct
from typing import Any, Protocol

from fasttune.executors.base import Event

START = "start"  # argument: TrialLaunch (blob empty when the worker has the key cached)
GRANT = "grant"  # argument: int, more iterations the trial may run
SAVE = "save"  # argument: None
STOP = "stop"  # argument: None
EXIT = "exit"  # argument: None; stop any Trainable and leave the loop
# argument: (TrialLaunch, claim file): to start after the hosted trial (and those queued
# before it) if the worker claims it first (executors/_claims.py)
QUEUE = "queue"

Command = tuple[str, Any]

# Logged once per trainable_key by the driver when a reused worker had to build a
# fresh Trainable because ``reset`` returned False.
RESET_WARNING = (
    "Trainable %r does not implement reset_config(), so a reused worker built a fresh "
    "Trainable instead (Ray Tune would fail here). Implement reset_config() to benefit "
    "from TuneConfig(reuse_actors=True), or turn reuse off."
)


# Several pickled events in one pipe message: this byte (a pickle starts with 0x80),
# then each event's length and bytes. A trial that ends and hands its worker to the
# next queued trial sends its last results, its end and the next trial's start at
# once: one message and one wake-up of the driver instead of three.
_FRAMES = b"F"
_FRAME_LENGTH = struct.Struct("!I")


def join_events(pickled: list[bytes]) -> bytes:
    """One message carrying ``pickled`` events (one alone is sent as it is)."""
    if len(pickled) == 1:
        return pickled[0]
    length = _FRAME_LENGTH.pack
    return _FRAMES + b"".join([length(len(blob)) + blob for blob in pickled])


def split_events(message: bytes) -> list[Any]:
    """The events of a message made by :func:`join_events` (or of one pickled event)."""
    if message[:1] != _FRAMES:
        return [pickle.loads(message)]
    events = []
    offset, end = 1, len(message)
    view = memoryview(message)
    while offset < end:
        (size,) = _FRAME_LENGTH.unpack_from(message, offset)
        offset += _FRAME_LENGTH.size
        events.append(pickle.loads(view[offset : offset + size]))
        offset += size
    return events


def warn_reset_once(log: logging.Logger, warned: set[str], key: str) -> None:
    """Log :data:`RESET_WARNING` for ``key`` on ``log`` unless ``warned`` holds it (then add it)."""
    if key not in warned:
        warned.add(key)
        log.warning(RESET_WARNING, key)


class TransportClosed(Exception):
    """The driver's end of the transport is gone; the loop ends."""


class Transport(Protocol):
    """How a worker talks to its driver."""

    def send(self, event: Event) -> None:
        """Send one event (raise :class:`TransportClosed` if the driver is gone)."""

    def pack(self, event: Event) -> Any:
        """``event`` ready to go in :meth:`send_packed` (pickled, for a pipe): an event
        that cannot travel fails here, where it is made, not when it is sent."""

    def send_packed(self, packed: list[Any]) -> None:
        """Send events made ready by :meth:`pack`, in order, as one message."""

    def poll(self) -> bool:
        """True when a command is waiting (never blocks)."""

    def recv(self) -> Command:
        """The next command, waiting for it (raise :class:`TransportClosed` at EOF)."""
