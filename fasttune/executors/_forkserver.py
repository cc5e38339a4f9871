"""A fork server: one process with fasttune imported that forks workers on request.

A new worker is a ``fork()`` of this server, so it starts in about a millisecond
with fasttune (and any preloaded module) already imported. The server reaps its
children and writes each one's exit code to a status pipe the driver waits on, so
a worker that dies is seen at once, even when its own children keep its pipe open.

Why not ``multiprocessing``'s forkserver: its children re-run the driver's
``__main__`` script (as ``__mp_main__``), so an unguarded tuning script, as Ray
Tune users write them, would start a new experiment in every worker.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import os
import pickle
import selectors
import signal
import socket
import struct
import sys
import threading
import warnings
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import subprocess
    from multiprocessing.connection import Connection

_HEADER = struct.Struct("!I")
_PID = struct.Struct("!q")
_STATUS = struct.Struct("!i")
# The garbage collector is off until the imports are frozen (see serve): collections
# during the imports and the warm-up cost ~10 ms of the first worker's start, and what
# they import stays alive anyway.
_SERVER_CODE = (
    "import gc; gc.disable(); import sys; sys.path[:] = {path!r}; "
    "from fasttune.executors._forkserver import serve; serve({fd}, {preload!r}, {warm_up!r})"
)
DEFAULT_PRELOAD = ("fasttune", "fasttune.trainable", "fasttune.executors._worker_process")
DEFAULT_WARM_UP = "fasttune.executors._worker_process:warm_up"
UNKNOWN_EXIT = None


class Child:
    """The driver's handle on one forked process.

    Attributes:
        conn: Duplex connection to the child (its file descriptor is given to
            ``target``).
        sentinel: A file descriptor that becomes readable when the child has
            exited; :meth:`read_exit_code` then gives its exit code.
    """

    def __init__(self, server: ForkServer, conn: Connection, sentinel: int):
        self.conn = conn
        self.sentinel = sentinel
        self._server = server
        self._pid: int | None = None

    @property
    def pid(self) -> int:
        """The child's pid (read from the server's reply when first needed)."""
        if self._pid is None:
            self._server.resolve(self)
        return self._pid  # type: ignore[return-value]

    def read_exit_code(self) -> int | None:
        """The exit code (negative: killed by that signal), or None if unknown.

        Call once the sentinel is readable; closes the sentinel.
        """
        try:
            data = os.read(self.sentinel, _STATUS.size)
        except OSError:
            data = b""
        self.close_sentinel()
        return _STATUS.unpack(data)[0] if len(data) == _STATUS.size else UNKNOWN_EXIT

    def close_sentinel(self) -> None:
        if self.sentinel >= 0:
            os.close(self.sentinel)
            self.sentinel = -1

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to the child unless it is known to have exited."""
        if self.sentinel < 0 or self.pid <= 0:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)


class ForkServer:
    """Client side of the fork server (started on first use).

    Args:
        preload: Modules the server imports before forking anything.
        warm_up: ``"module:function"`` the server calls once after the imports, to
            fill caches every child then inherits (errors are ignored).
    """

    def __init__(
        self, preload: tuple[str, ...] = DEFAULT_PRELOAD, warm_up: str | None = DEFAULT_WARM_UP
    ):
        self._preload = tuple(preload)
        self._warm_up = warm_up
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._pending: deque[Child] = deque()  # children whose pid is not read yet
        self._replies = b""

    def spawn(self, target: str) -> Child:
        """Fork a child running ``target`` (``"module:function"``, called with the fd).

        The child gets this process's ``sys.path``, working directory and environment.
        Does not wait for the fork: the pid is read when first needed.
        """
        from multiprocessing.connection import Connection  # ~4 ms: after start(), not before

        parent_end, child_end = socket.socketpair()
        status_r, status_w = os.pipe()
        origin = (list(sys.path), os.getcwd(), dict(os.environ))
        payload = pickle.dumps(("spawn", target, *origin), protocol=5)
        try:
            with self._lock:
                try:
                    sock = self._ensure_started()
                    socket.send_fds(
                        sock, [_HEADER.pack(len(payload)) + payload], [child_end.fileno(), status_w]
                    )
                except (BrokenPipeError, ConnectionResetError):
                    # The server died since it was last checked: start a new one, once.
                    self._discard_dead_server()
                    sock = self._ensure_started()
                    socket.send_fds(
                        sock, [_HEADER.pack(len(payload)) + payload], [child_end.fileno(), status_w]
                    )
                child = Child(self, Connection(parent_end.detach()), status_r)
                self._pending.append(child)
                self._read_replies(block=False)
        except BaseException:
            parent_end.close()
            os.close(status_r)
            raise
        finally:
            child_end.close()
            os.close(status_w)
        return child

    def start(self) -> None:
        """Start the server process if it is not running (does not wait for it)."""
        with self._lock:
            self._ensure_started()

    def preload(self, modules: tuple[str, ...]) -> None:
        """Have the server import ``modules`` (failures are ignored) for later children."""
        self._request(("import", tuple(modules), list(sys.path)))

    def learn(
        self,
        modules: tuple[str, ...],
        environ_changes: tuple[tuple[str, str | None], ...] = (),
    ) -> None:
        """Have the server import ``modules`` for later children, unless importing them
        in a throwaway child of its own starts a thread or a process there (a server
        with threads forks children that may deadlock) or does not make
        ``environ_changes`` (the worker's trial made them: a module may read them on
        import). Failures are ignored."""
        self._request(("learn", tuple(modules), list(sys.path), tuple(environ_changes)))

    def _request(self, message: tuple[Any, ...]) -> None:
        """Send the server a request it answers with nothing."""
        payload = pickle.dumps(message, protocol=5)
        with self._lock:
            self._ensure_started().sendall(_HEADER.pack(len(payload)) + payload)

    def resolve(self, child: Child) -> None:
        """Read the server's replies until ``child``'s pid is known."""
        with self._lock:
            while child._pid is None:
                self._read_replies(block=True)

    @property
    def server_pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def close(self) -> None:
        """Stop the server (its children live on until their connections close)."""
        with self._lock:
            if self._sock is not None:
                self._sock.close()
                self._sock = None
            if self._process is not None:
                import subprocess

                try:
                    self._process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait()
                self._process = None
            for child in self._pending:
                child._pid = -1
            self._pending.clear()

    # ------------------------------------------------------------------ internals
    def _discard_dead_server(self) -> None:
        """Forget a server that stopped answering (reaped; its owed replies never come)."""
        if self._process is not None:
            with contextlib.suppress(OSError):
                self._process.kill()
            self._process.wait()
            self._process = None

    def _ensure_started(self) -> socket.socket:
        if self._sock is not None and self._process is not None and self._process.poll() is None:
            return self._sock
        if self._sock is not None:
            self._sock.close()
        for child in self._pending:  # replies of a dead server never come
            child._pid = -1
        self._pending.clear()
        self._replies = b""
        # Imported here, by the driver only: the server (which imports this module)
        # starts serving sooner without it.
        import subprocess

        ours, theirs = socket.socketpair()
        code = _SERVER_CODE.format(
            path=list(sys.path), fd=theirs.fileno(), preload=self._preload, warm_up=self._warm_up
        )
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-c", code], pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL
            )
        finally:
            theirs.close()
        self._sock = ours
        return ours

    def _read_replies(self, block: bool) -> None:
        sock = self._sock
        if sock is None:
            raise RuntimeError("the fork server is not running")
        try:
            data = sock.recv(65536, 0 if block else socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        except OSError:  # e.g. ConnectionResetError: the server was killed
            data = b""
            block = True
        if not data:
            if block:  # the server died: the replies still owed never come
                for child in self._pending:
                    child._pid = -1
                self._pending.clear()
            return
        buffer = self._replies + data
        usable = len(buffer) - len(buffer) % _PID.size
        for (pid,) in _PID.iter_unpack(buffer[:usable]):
            self._pending.popleft()._pid = pid
        self._replies = buffer[usable:]


# ---------------------------------------------------------------------- server side
# Imported by the server once it serves, one at a time while no request waits:
# modules a worker needs only later (to checkpoint, to rewind a resumed trial's
# files), kept out of the start that a run's first workers wait for (~4 ms).
_IMPORTED_WHEN_IDLE = ("shutil", "tempfile", "glob")


def serve(fd: int, preload: tuple[str, ...], warm_up: str | None = None) -> None:
    """Main function of the server process: fork children on request until EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Python 3.12+ warns at each fork of a process that has threads. A preloaded numpy
    # has its BLAS pool's (fork-safe: OpenBLAS re-creates it in the child), and every
    # worker's fork would print the warning.
    warnings.filterwarnings(
        "ignore", message=r".*use of fork\(\) may lead to deadlocks", category=DeprecationWarning
    )
    _import_quietly(preload, freeze=False)
    # The modules stay: children never collect them (without this, their first full
    # collection touches every object and copies most of the server's memory), and
    # the collection below looks only at what the warm-up left.
    gc.freeze()
    if warm_up:
        with contextlib.suppress(Exception):
            _resolve(warm_up)()
    gc.collect()
    gc.freeze()
    gc.enable()
    sock = socket.socket(fileno=fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    statuses: dict[int, int] = {}  # pid -> status pipe write end
    probes: dict[int, tuple[str, ...]] = {}  # pid -> modules it tries (see _probe)
    selector = selectors.DefaultSelector()
    selector.register(sock, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    later = list(_IMPORTED_WHEN_IDLE)
    while True:
        events = selector.select(0 if later else None)
        if not events and later:
            _import_quietly((later.pop(0),))
            continue
        for key, _ in events:
            if key.fileobj == wake_r:
                os.read(wake_r, 4096)
                _reap(statuses, probes)
                continue
            request = _recv_request(sock)
            if request is None:  # the driver is gone
                return
            message, fds = request
            if message[0] == "import":
                sys.path[:] = message[2]
                _import_quietly(message[1])
                continue
            if message[0] == "learn":
                sys.path[:] = message[2]
                probe = _probe(
                    message[1], message[3], selector, sock, (wake_r, wake_w, *statuses.values())
                )
                if probe:
                    probes[probe] = message[1]
                continue
            _, target, path, cwd, environ = message
            conn_fd, status_w = fds
            try:
                pid = os.fork()
            except OSError:  # the driver sees EOF on both pipes: the child died at once
                os.close(conn_fd)
                os.close(status_w)
                sock.sendall(_PID.pack(-1))
                continue
            if pid == 0:
                _leave_server(selector, sock, (wake_r, wake_w, status_w, *statuses.values()))
                _run_child(conn_fd, target, path, cwd, environ)
            os.close(conn_fd)
            statuses[pid] = status_w
            sock.sendall(_PID.pack(pid))
            _reap(statuses, probes)


def _recv_request(sock: socket.socket) -> tuple[tuple, list[int]] | None:
    try:
        data, fds, _flags, _addr = socket.recv_fds(sock, _HEADER.size, 2)
        while data and len(data) < _HEADER.size:
            data += sock.recv(_HEADER.size - len(data))
        if not data:
            return None
        (length,) = _HEADER.unpack(data)
        payload = b""
        while len(payload) < length:
            chunk = sock.recv(length - len(payload))
            if not chunk:
                return None
            payload += chunk
    except OSError:
        return None
    return pickle.loads(payload), fds


def _reap(statuses: dict[int, int], probes: dict[int, tuple[str, ...]]) -> None:
    while statuses or probes:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        modules = probes.pop(pid, None)
        if modules is not None:
            if os.waitstatus_to_exitcode(status) == 0:  # imported alone, nothing started
                _import_quietly(modules)
            continue
        status_w = statuses.pop(pid, None)
        if status_w is None:
            continue
        with contextlib.suppress(OSError):
            os.write(status_w, _STATUS.pack(os.waitstatus_to_exitcode(status)))
        os.close(status_w)


def _leave_server(selector: Any, sock: socket.socket, fds: tuple[int, ...]) -> None:
    """In a child just forked: drop the server's signal wake-up and SIGCHLD handler, its
    selector, socket and the descriptors ``fds``."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    selector.close()
    sock.close()
    for fd in fds:
        os.close(fd)


def _probe(
    modules: tuple[str, ...],
    environ_changes: tuple[tuple[str, str | None], ...],
    selector: Any,
    sock: socket.socket,
    fds: tuple[int, ...],
) -> int:
    """Fork a child that imports ``modules`` and exits 0 if that started no thread and
    no process in it and made ``environ_changes`` (1 otherwise); its pid, or 0 if it
    could not be forked."""
    try:
        pid = os.fork()
    except OSError:
        return 0
    if pid:
        return pid
    code = 1
    try:
        _leave_server(selector, sock, fds)
        _import_quietly(modules, freeze=False)
        tasks = os.listdir("/proc/self/task")
        children = "".join(_read_text(f"/proc/self/task/{task}/children") for task in tasks).strip()
        made = all(os.environ.get(name) == value for name, value in environ_changes)
        code = 0 if len(tasks) == 1 and not children and made else 1
    finally:
        os._exit(code)


def _read_text(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _run_child(
    conn_fd: int, target: str, path: list[str], cwd: str, environ: dict[str, str]
) -> None:
    """Body of a forked child: never returns."""
    code = 1
    try:
        sys.path[:] = path
        with contextlib.suppress(OSError):
            os.chdir(cwd)
        for name in [name for name in os.environ if name not in environ]:
            del os.environ[name]
        for name, value in environ.items():
            if os.environ.get(name) != value:
                os.environ[name] = value
        numpy = sys.modules.get("numpy")
        if numpy is not None:  # forked children would share the global random state
            numpy.random.seed()
        result = _resolve(target)(conn_fd)
        code = result if isinstance(result, int) else 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _resolve(target: str) -> Callable[..., Any]:
    module, _, function = target.partition(":")
    return getattr(importlib.import_module(module), function)


def _import_quietly(modules: tuple[str, ...], freeze: bool = True) -> None:
    for name in modules:
        # BaseException: a module that exits on import (argparse at module level, say)
        # must not take the server down; a worker importing it fails on its own.
        with contextlib.suppress(BaseException):
            importlib.import_module(name)
    if freeze:
        # Children never collect what is alive now: without this, their first full
        # collection touches every object and copies most of the server's memory.
        gc.freeze()


_default: ForkServer | None = None
_default_lock = threading.Lock()


def default_server() -> ForkServer:
    """The fork server shared by every executor of this process."""
    global _default
    with _default_lock:
        if _default is None:
            _default = ForkServer()
            atexit.register(_default.close)
        return _default
