"""Inside a local worker process: the worker loop over a pipe to the driver."""

from __future__ import annotations

import os
import pickle
import select
import signal
from multiprocessing.connection import Connection

import cloudpickle

from fasttune.executors.base import Event
from fasttune.executors.worker_loop import Command, TransportClosed, WorkerLoop
from fasttune.logger.noop import NoopLogger

TARGET = "fasttune.executors._worker_process:worker_main"
WARM_UP = "fasttune.executors._worker_process:warm_up"


def dumps(obj: object) -> bytes:
    """Pickle with protocol 5, falling back to cloudpickle (lambdas, local classes)."""
    try:
        return pickle.dumps(obj, protocol=5)
    except Exception:
        return cloudpickle.dumps(obj, protocol=5)


class PipeTransport:
    """A :class:`~fasttune.executors.worker_loop.Transport` over a ``Connection``."""

    def __init__(self, conn: Connection):
        self._conn = conn
        self._poller = select.poll()
        self._poller.register(conn.fileno(), select.POLLIN)

    def send(self, event: Event) -> None:
        data = dumps(event)
        try:
            self._conn.send_bytes(data)
        except OSError as exc:
            raise TransportClosed from exc

    def poll(self) -> bool:
        return bool(self._poller.poll(0))

    def recv(self) -> Command:
        try:
            data = self._conn.recv_bytes()
        except (EOFError, OSError) as exc:
            raise TransportClosed from exc
        return pickle.loads(data)


def worker_main(fd: int) -> int:
    """Entry point of a worker process: serve the driver on ``fd`` until told to exit.

    The worker ignores SIGINT (the driver handles Ctrl-C and stops workers by
    command) and leaves when the driver goes away.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    conn = Connection(fd)
    try:
        WorkerLoop(PipeTransport(conn), isolated=True).run()
    finally:
        conn.close()
    return 0


def warm_up() -> None:
    """Run once in the fork server so every worker inherits warm caches.

    Fills the host name and IP caches (a DNS lookup) and takes a throwaway function
    trainable through a few iterations, so that lazy imports and first-call set-up
    (time zone, greenlets) are paid once instead of in every new worker.
    """
    from fasttune._support.process_info import hostname, node_ip
    from fasttune.trainable import report, wrap_function

    node_ip()
    hostname()

    def _warm_up(config: dict) -> None:
        report({"x": 1})
        report({"x": 2})

    trainable = wrap_function(_warm_up)(config={}, logger_creator=_null_logger)
    for _ in range(3):
        trainable.train()
    trainable.stop()


def _null_logger(config: dict) -> NoopLogger:
    return NoopLogger(config, os.devnull)
