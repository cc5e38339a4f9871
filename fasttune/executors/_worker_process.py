"""Inside a local worker process: the worker loop over a pipe to the driver."""

from __future__ import annotations

import os
import pickle
import select
import signal
from multiprocessing.connection import Connection

from fasttune._support.pickling import dumps
from fasttune.executors.base import Event
from fasttune.executors.worker_commands import Command, TransportClosed, join_events
from fasttune.executors.worker_loop import WorkerLoop
from fasttune.logger.noop import NoopLogger

TARGET = "fasttune.executors._worker_process:worker_main"
WARM_UP = "fasttune.executors._worker_process:warm_up"


class PipeTransport:
    """A :class:`~fasttune.executors.worker_commands.Transport` over a ``Connection``."""

    def __init__(self, conn: Connection):
        self._conn = conn
        self._poller = select.poll()
        self._poller.register(conn.fileno(), select.POLLIN)

    def send(self, event: Event) -> None:
        self.send_packed([dumps(event)])

    def pack(self, event: Event) -> bytes:
        return dumps(event)

    def send_packed(self, packed: list[bytes]) -> None:
        try:
            self._conn.send_bytes(join_events(packed))
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

    Fills the host name and IP caches (a DNS lookup), takes a throwaway function
    trainable through a few iterations and writes its results with every default
    logger into a temporary directory, so that lazy imports (the TensorBoard CRC,
    the launch's resource classes...) and first-call set-up (time zone, greenlets)
    are paid once instead of in every new worker: with ``reuse_actors=False`` they
    were about a third of a new worker's CPU (measured on 500 short trials).
    """
    import shutil
    import tempfile

    import fasttune.execution  # noqa: F401  (a launch's resources unpickle to it)
    from fasttune._support.process_info import hostname, node_ip
    from fasttune.logger.logger_callback import default_logger_callbacks
    from fasttune.logger.trial_result_files import (
        TrialFilesSpec,
        TrialResultFiles,
        offloadable_loggers,
    )
    from fasttune.trainable import report, wrap_function

    node_ip()
    hostname()

    def _warm_up(config: dict) -> None:
        report({"x": 1})
        report({"x": 2})

    trainable = wrap_function(_warm_up)(config={}, logger_creator=_null_logger)
    results = [trainable.train() for _ in range(3)]
    trainable.stop()
    kinds, _ = offloadable_loggers(default_logger_callbacks())
    cached_tempdir = tempfile.tempdir
    scratch = tempfile.mkdtemp(prefix="fasttune-warm-up-")
    # Workers find the temporary directory themselves, from their own TMPDIR.
    tempfile.tempdir = cached_tempdir
    try:
        files = TrialResultFiles(scratch, TrialFilesSpec(kinds), {"x": 0})
        try:
            files.write(results)
        finally:
            files.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _null_logger(config: dict) -> NoopLogger:
    return NoopLogger(config, os.devnull)
