"""Inside a local worker process: the worker loop over a pipe to the driver."""

from __future__ import annotations

import os
import pickle
import select
import signal
import struct
import sys

from fasttune._support.pickling import dumps
from fasttune.executors.base import Event
from fasttune.executors.worker_commands import Command, TransportClosed, join_events
from fasttune.executors.worker_loop import WorkerLoop
from fasttune.logger.noop import NoopLogger

TARGET = "fasttune.executors._worker_process:worker_main"
WARM_UP = "fasttune.executors._worker_process:warm_up"


# multiprocessing.connection's framing (the driver reads and writes the pipe with a
# Connection): a signed 32-bit big-endian length, or -1 and an unsigned 64-bit one.
_SHORT = struct.Struct("!i")
_LONG = struct.Struct("!Q")
_LONGEST_SHORT = 0x7FFFFFFF
_READ_SIZE = 1 << 16


class PipeTransport:
    """A :class:`~fasttune.executors.worker_commands.Transport` over a pipe whose other
    end is a ``multiprocessing.connection.Connection``.

    Its framing is written here: importing ``multiprocessing.connection`` (~8 ms, with
    tempfile and shutil) was a fifth of the fork server's start, which the first trials
    of a run wait for. A message goes out in one ``writev``; commands are read in
    chunks, so that one read usually brings a whole command.
    """

    def __init__(self, fd: int):
        self._fd = fd
        self._poller = select.poll()
        self._poller.register(fd, select.POLLIN)
        self._buffer = b""

    def send(self, event: Event) -> None:
        self.send_packed([dumps(event)])

    def pack(self, event: Event) -> bytes:
        return dumps(event)

    def send_packed(self, packed: list[bytes]) -> None:
        data = join_events(packed)
        size = len(data)
        header = _SHORT.pack(size) if size <= _LONGEST_SHORT else _SHORT.pack(-1) + _LONG.pack(size)
        try:
            self._write_all(header, data)
        except OSError as exc:
            raise TransportClosed from exc

    def _write_all(self, header: bytes, data: bytes) -> None:
        written = os.writev(self._fd, (header, data))
        total = len(header) + len(data)
        if written < total:  # a pipe takes large messages in parts
            rest = memoryview(header + data)[written:]
            while rest:
                rest = rest[os.write(self._fd, rest) :]

    def poll(self) -> bool:
        return bool(self._buffer) or bool(self._poller.poll(0))

    def recv(self) -> Command:
        try:
            (size,) = _SHORT.unpack(self._take(_SHORT.size))
            if size == -1:
                (size,) = _LONG.unpack(self._take(_LONG.size))
            data = self._take(size)
        except OSError as exc:
            raise TransportClosed from exc
        return pickle.loads(data)

    def _take(self, size: int) -> bytes:
        """The next ``size`` bytes of the pipe, waiting for them.

        Raises:
            TransportClosed: The pipe was closed before they came.
        """
        buffer = self._buffer
        if len(buffer) < size:
            parts, have = [buffer], len(buffer)
            while have < size:
                chunk = os.read(self._fd, max(_READ_SIZE, size - have))
                if not chunk:
                    raise TransportClosed
                parts.append(chunk)
                have += len(chunk)
            buffer = b"".join(parts)
        self._buffer = buffer[size:]
        return buffer[:size]

    def close(self) -> None:
        os.close(self._fd)


def worker_main(fd: int) -> int:
    """Entry point of a worker process: serve the driver on ``fd`` until told to exit.

    The worker ignores SIGINT (the driver handles Ctrl-C and stops workers by
    command) and leaves when the driver goes away.
    """
    modules_at_start = len(sys.modules)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    transport = PipeTransport(fd)
    try:
        WorkerLoop(transport, isolated=True, modules_at_start=modules_at_start).run()
    finally:
        transport.close()
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
    # A scratch folder made without tempfile and shutil, which the server imports
    # only once it serves (see _forkserver.serve).
    scratch = os.path.join(
        os.environ.get("TMPDIR") or "/tmp", f"fasttune-warm-up-{os.getpid()}-{os.urandom(4).hex()}"
    )
    os.mkdir(scratch, 0o700)
    try:
        files = TrialResultFiles(scratch, TrialFilesSpec(kinds), {"x": 0})
        try:
            files.write(results)
        finally:
            files.close()
    finally:
        for name in os.listdir(scratch):
            os.unlink(os.path.join(scratch, name))
        os.rmdir(scratch)


def _null_logger(config: dict) -> NoopLogger:
    return NoopLogger(config, os.devnull)
