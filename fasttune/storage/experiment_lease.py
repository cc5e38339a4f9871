"""One driver per experiment on remote storage: a lease object in the experiment folder.

The local lock (:mod:`.experiment_lock`) is a ``flock``, which only one machine's
kernel sees. An experiment in an object store (``s3://``, ``gs://``, ``memory://``...)
can be run from any machine, so its driver holds a *lease* there instead: the object
``<experiment>/.driver.lease.json`` says who holds it (host, pid, start time) and when
it was last renewed. The driver renews it from a background thread every quarter of
its time to live (``FASTTUNE_LEASE_TTL_S``, 60 s by default); a lease not renewed
within that time is stale, and the next driver takes it over with a warning. A lease
whose holder ran on this machine and has exited is taken over at once.

What is guaranteed:

- On S3 (s3fs) every change of the lease is conditional: it is created with
  ``If-None-Match: *``, taken over and renewed with ``If-Match: <ETag read>``, and
  deleted with ``If-Match`` too. Of two drivers racing for it exactly one wins, and a
  driver whose lease was taken over (it was paused longer than the time to live)
  learns it at its next renewal, and stops committing state and ends its run.
- Other backends offer no conditional write through fsspec: the lease is written, read
  back, and checked at each renewal. The last writer wins; two drivers starting within
  the same moment can both run until the loser's next renewal (a quarter of the time
  to live), when it finds the other's token, stops committing state and ends its run.

Staleness compares the holder's clock (the renewal time it wrote) with the reader's:
the machines' clocks must agree to well within the time to live (NTP does).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fasttune._support.process_info import process_running
from fasttune.storage.experiment_lock import ExperimentInUseError
from fasttune.storage.filesystem import FileSystem
from fasttune.storage.fsspec_filesystem import FsspecFileSystem

logger = logging.getLogger(__name__)

LEASE_FILE = ".driver.lease.json"
TTL_ENV = "FASTTUNE_LEASE_TTL_S"
DEFAULT_TTL_S = 60.0


class LeaseLostError(ExperimentInUseError):
    """This driver's lease was taken over by another driver (or could not be renewed
    within its time to live): it must stop writing the experiment."""


class _Conflict(Exception):
    """A conditional write found the lease changed since it was read."""


@dataclass(frozen=True)
class LeaseHolder:
    """What a lease object says.

    Attributes:
        host: The holder's host name.
        pid: The holder's process id.
        started: When it took the lease (Unix time).
        renewed: When it last renewed it (Unix time, its clock).
        ttl_s: Seconds after ``renewed`` at which the lease is stale.
        token: Unique to one acquisition.
        machine: Identifies the holder's kernel and pid namespace ("" if unknown), so
            that a dead holder on this machine is recognised at once.
    """

    host: str
    pid: int
    started: float
    renewed: float
    ttl_s: float
    token: str
    machine: str = ""

    @classmethod
    def from_json(cls, data: bytes) -> LeaseHolder | None:
        try:
            d = json.loads(data)
            return cls(
                host=str(d["host"]),
                pid=int(d["pid"]),
                started=float(d["started"]),
                renewed=float(d["renewed"]),
                ttl_s=float(d["ttl_s"]),
                token=str(d["token"]),
                machine=str(d.get("machine", "")),
            )
        except (ValueError, KeyError, TypeError):
            return None  # torn or foreign: treated as stale

    def to_json(self) -> bytes:
        return json.dumps(self.__dict__).encode("utf-8")

    def expires(self) -> float:
        return self.renewed + self.ttl_s

    def is_stale(self, now: float) -> bool:
        if now > self.expires():
            return True
        # A holder on this machine that has exited cannot renew: no need to wait.
        return (
            bool(self.machine) and self.machine == _machine_id() and not process_running(self.pid)
        )

    def describe(self) -> str:
        started = datetime.fromtimestamp(self.started).strftime("%Y-%m-%d %H:%M:%S")
        return f"pid {self.pid} on host {self.host!r}, since {started}"


def lease_ttl_s() -> float:
    """``$FASTTUNE_LEASE_TTL_S`` (seconds, > 0), else 60.

    Raises:
        ValueError: The variable is set to something else.
    """
    value = os.environ.get(TTL_ENV)
    if value is None or value == "":
        return DEFAULT_TTL_S
    try:
        ttl = float(value)
    except ValueError:
        ttl = -1.0
    if not ttl > 0:
        raise ValueError(
            f"{TTL_ENV}={value!r} must be a number of seconds > 0 (how long a driver's "
            f"lease on a remote experiment lasts without renewal); unset it for "
            f"{DEFAULT_TTL_S:g}."
        )
    return ttl


class ExperimentLease:
    """The exclusive right to run the remote experiment ``path`` on ``fs``.

    Args:
        fs: The storage filesystem.
        path: The experiment directory within ``fs``.
        uri: The experiment as the user writes it (named in messages).
        ttl_s: Seconds without renewal after which the lease is stale (default:
            :func:`lease_ttl_s`). It is renewed every quarter of that.
    """

    def __init__(self, fs: FileSystem, path: str, uri: str, *, ttl_s: float | None = None):
        self.fs = fs
        self.path = fs.join(path, LEASE_FILE)
        self.uri = uri
        self.ttl_s = ttl_s if ttl_s is not None else lease_ttl_s()
        self._holder: LeaseHolder | None = None
        self._etag: str | None = None
        self._last_renewal = 0.0  # monotonic
        self._lost: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # one change of the lease at a time

    @property
    def held(self) -> bool:
        return self._holder is not None

    def acquire(self) -> None:
        """Take the lease (a stale one is taken over), then keep it renewed.

        Raises:
            ExperimentInUseError: A live driver holds it.
        """
        if self._holder is not None:
            return
        now = time.time()
        mine = LeaseHolder(
            host=socket.gethostname(),
            pid=os.getpid(),
            started=now,
            renewed=now,
            ttl_s=self.ttl_s,
            token=uuid.uuid4().hex,
            machine=_machine_id(),
        )
        for _ in range(10):
            current, etag = self._read()
            if current is not None and not current.is_stale(time.time()):
                raise ExperimentInUseError(_in_use_message(self.uri, current))
            if etag is not None:  # an object is there: a stale lease (or unreadable)
                who = current.describe() if current else "an unreadable lease"
                logger.warning(
                    "Taking over the experiment %s from a driver that is gone (%s, last "
                    "renewed %s).",
                    self.uri,
                    who,
                    _when(current.renewed) if current else "never",
                )
            try:
                new_etag = self._write(mine, if_match=etag)
            except _Conflict:
                continue  # another driver changed it meanwhile: look again
            if self._confirm(mine):
                self._holder, self._etag = mine, new_etag
                self._last_renewal = time.monotonic()
                self._start_renewing()
                return
        current, _ = self._read()
        raise ExperimentInUseError(
            _in_use_message(self.uri, current)
            if current is not None
            else f"Could not take the lease of the experiment {self.uri!r}: other drivers "
            "kept changing it. Run one driver per experiment."
        )

    def ensure_held(self) -> None:
        """Raise if the lease was lost: call it before writing the experiment.

        Raises:
            LeaseLostError: Another driver took it over, or it could not be renewed
                within its time to live.
        """
        overdue = time.monotonic() - self._last_renewal > self.ttl_s
        if self._lost is None and self._holder is not None and overdue:
            self._lost = (
                f"it could not be renewed for {self.ttl_s:g} s, so another driver may "
                "have taken it over"
            )
        if self._lost is not None:
            raise LeaseLostError(
                f"This driver no longer holds the lease of the experiment {self.uri!r}: "
                f"{self._lost}. It stops writing the experiment so that two drivers never "
                f"run its trials twice; continue it with Tuner.restore({self.uri!r}, "
                "trainable=...).fit() once no other driver runs it."
            )

    def release(self) -> None:
        """Stop renewing and delete the lease (if still ours); idempotent."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            holder, self._holder = self._holder, None
            if holder is None or self._lost is not None:
                return
            try:
                self._delete(holder)
            except Exception as e:  # the run is over; a leftover lease just goes stale
                logger.warning(
                    "Could not delete the lease of %s (%s: %s); it goes stale in %g s.",
                    self.uri,
                    type(e).__name__,
                    e,
                    self.ttl_s,
                )

    def __enter__(self) -> ExperimentLease:
        self.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()

    # ------------------------------------------------------------------ renewing
    def _start_renewing(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._renew_loop, name="fasttune-lease", daemon=True)
        self._thread.start()

    def _renew_loop(self) -> None:
        while not self._stop.wait(self.ttl_s / 4):
            with self._lock:
                if self._holder is None or self._lost is not None:
                    return
                self._renew_once()

    def _renew_once(self) -> None:
        assert self._holder is not None
        holder = LeaseHolder(**{**self._holder.__dict__, "renewed": time.time()})
        try:
            if self._etag is None:  # no conditional writes: check the token first
                current, _ = self._read()
                if current is None or current.token != holder.token:
                    raise _Conflict
            etag = self._write(holder, if_match=self._etag)
        except _Conflict:
            current, _ = self._read()
            who = current.describe() if current else "nobody (it was deleted)"
            self._lost = f"it is now held by {who}"
            logger.error("The lease of the experiment %s was taken over: %s.", self.uri, who)
            return
        except Exception as e:  # storage unreachable: retried at the next renewal
            logger.warning(
                "Could not renew the lease of %s (%s: %s); retrying.", self.uri, type(e).__name__, e
            )
            return
        self._holder, self._etag = holder, etag
        self._last_renewal = time.monotonic()

    # ------------------------------------------------------------------ storage
    def _read(self) -> tuple[LeaseHolder | None, str | None]:
        """(what the lease says, its ETag or "" where there is none); (None, None) if
        there is no lease."""
        fs = self.fs
        etag = ""
        try:
            if _conditional(fs):
                assert isinstance(fs, FsspecFileSystem)
                # The ETag first: if the object changes before it is read, the content
                # is newer than the ETag, and a write conditional on it fails.
                etag = str(fs.fs.info(self.path)["ETag"])
            data = fs.read_bytes(self.path)
        except FileNotFoundError:
            return None, None
        return LeaseHolder.from_json(data), etag

    def _write(self, holder: LeaseHolder, *, if_match: str | None) -> str | None:
        """Write the lease; only if absent (``if_match`` None) or unchanged since it had
        ETag ``if_match``, where the backend can. Returns the new ETag (None where
        there are none).

        Raises:
            _Conflict: The condition failed.
        """
        fs, data = self.fs, holder.to_json()
        if not _conditional(fs):
            fs.write_bytes_atomic(self.path, data)
            return None
        assert isinstance(fs, FsspecFileSystem)
        try:
            if if_match is None:
                out = fs.fs.pipe_file(self.path, data, mode="create")
            else:
                out = fs.fs.pipe_file(self.path, data, IfMatch=if_match)
        except FileExistsError:
            raise _Conflict from None
        except FileNotFoundError:
            raise _Conflict from None  # If-Match on a lease deleted meanwhile
        except OSError as e:
            if _precondition_failed(e):
                raise _Conflict from None
            raise
        etag = out.get("ETag") if isinstance(out, dict) else None
        return str(etag) if etag else str(fs.fs.info(self.path)["ETag"])

    def _confirm(self, mine: LeaseHolder) -> bool:
        """Where writes are unconditional, whether the lease read back is ours."""
        if _conditional(self.fs):
            return True
        current, _ = self._read()
        return current is not None and current.token == mine.token

    def _delete(self, holder: LeaseHolder) -> None:
        fs = self.fs
        if _conditional(fs) and self._etag:
            assert isinstance(fs, FsspecFileSystem)
            bucket, key, _ = fs.fs.split_path(self.path)
            try:
                fs.fs.call_s3("delete_object", Bucket=bucket, Key=key, IfMatch=self._etag)
            except OSError as e:
                if not _precondition_failed(e):
                    raise
            fs.fs.invalidate_cache(self.path)
            return
        current, _ = self._read()
        if current is not None and current.token == holder.token:
            fs.delete_files([self.path])


def check_lease(fs: FileSystem, path: str, uri: str) -> None:
    """Raise at once if a live driver holds the lease of the experiment ``path``.

    Raises:
        ExperimentInUseError: naming the holder and what to do.
    """
    current, _ = ExperimentLease(fs, path, uri, ttl_s=DEFAULT_TTL_S)._read()
    if current is not None and not current.is_stale(time.time()):
        raise ExperimentInUseError(_in_use_message(uri, current))


def _in_use_message(uri: str, holder: LeaseHolder) -> str:
    return (
        f"The experiment {uri!r} is being run by another driver ({holder.describe()}; "
        f"its lease was last renewed {_when(holder.renewed)}). Two drivers would run its "
        "trials twice: wait for that one to end (or stop it); if it is dead, its lease "
        f"expires at {_when(holder.expires())} and then Tuner.restore({uri!r}, "
        "trainable=...).fit() takes over. Or run a new experiment with another "
        "RunConfig(name=...)."
    )


def _when(t: float) -> str:
    return datetime.fromtimestamp(t).strftime("%H:%M:%S")


def _conditional(fs: FileSystem) -> bool:
    """Whether ``fs`` takes S3's conditional writes (s3fs)."""
    if not isinstance(fs, FsspecFileSystem):
        return False
    protocols = fs.fs.protocol if isinstance(fs.fs.protocol, (tuple, list)) else (fs.fs.protocol,)
    return any(p in ("s3", "s3a") for p in protocols) and hasattr(fs.fs, "call_s3")


def _precondition_failed(e: BaseException) -> bool:
    """An S3 412 (or 409 for concurrent conditional writes), as s3fs raises it."""
    text = f"{e} {e.__cause__!r}"
    return any(
        s in text for s in ("PreconditionFailed", "pre-condition", "ConditionalRequestConflict")
    )


_MACHINE: str | None = None


def _machine_id() -> str:
    """This kernel's boot id and this pid namespace ("" where not Linux)."""
    global _MACHINE
    if _MACHINE is None:
        try:
            with open("/proc/sys/kernel/random/boot_id") as f:
                boot = f.read().strip()
            _MACHINE = f"{boot}:{os.stat('/proc/self/ns/pid').st_ino}"
        except OSError:
            _MACHINE = ""
    return _MACHINE
