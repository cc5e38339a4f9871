"""Publish a remote experiment's staging directory to its storage.

The driver writes a remote experiment to a local staging directory exactly as it
writes a local one. At every snapshot, and at the end, :meth:`ExperimentSync.sync`
publishes it, in this order:

1. the files of the trial directories that changed (``result.json``,
   ``progress.csv``, ``params.*``, TensorBoard events, ``error.txt``, captured
   output), each uploaded whole (object stores have no append), unchanged ones
   skipped by their ``stat``; subdirectories (checkpoints: their workers upload them)
   and hidden files (temporaries) are left out;
2. the other files at the top of the experiment directory (PBT's policy logs...);
3. the state files, together, as one manifest commit (:mod:`.state_commit`): every
   file the state refers to is in storage before it;
4. deletions the run asked for (checkpoints ``num_to_keep`` dropped) and of files
   that vanished locally: only now does no committed state refer to them.

A trial directory is scanned while its trial is unfinished and once more after it
finished. Syncing takes at most ``max_share`` of the driver's time: a slow store is
synced less often, never partly.
"""

from __future__ import annotations

import logging
import math
import os
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from fasttune.storage.mirror import StorageMirror
from fasttune.storage.state_commit import StateCommitter

logger = logging.getLogger(__name__)

Stamp = tuple[int, int, int]


@dataclass
class SyncStats:
    """What the syncs so far did (for tests and benchmarks)."""

    syncs: int = 0
    files_uploaded: int = 0
    bytes_uploaded: int = 0
    commits: int = 0
    seconds: float = 0.0


class ExperimentSync:
    """Publishes the staging directory of ``mirror`` to its storage (see the module doc).

    Args:
        mirror: The staging directory and its storage directory.
        state_files: Names of the experiment's state files, committed together.
        clock: Monotonic seconds (injected in tests).
        max_share: Largest share of the driver's time spent syncing: after a sync that
            took ``t`` seconds the next one is due ``t / max_share`` after it started.
        worker_files: Names of files in trial directories that the workers upload
            themselves (captured output on executors whose workers may run on other
            machines): left out here.
        artifacts: Also publish the subdirectories of the trial directories (what a
            trial writes in its working directory, ``SyncConfig(sync_artifacts=True)``),
            except its checkpoints (their workers upload them) and hidden ones.
    """

    def __init__(
        self,
        mirror: StorageMirror,
        state_files: Sequence[str],
        *,
        clock: Callable[[], float] = time.monotonic,
        max_share: float = 0.1,
        worker_files: Iterable[str] = (),
        artifacts: bool = False,
    ):
        self._mirror = mirror
        self._fs = mirror.filesystem
        self._state = StateCommitter(self._fs, mirror.root, mirror.local_root, state_files)
        self._state_files = frozenset(state_files)
        self._worker_files = frozenset(worker_files)
        self._artifacts = artifacts
        self._published: dict[str, Stamp] = {}  # local path -> stat of the uploaded version
        self._listed: dict[str, set[str]] = {}  # local directory -> names published from it
        self._finished: set[str] = set()  # trial directories synced after their trial ended
        self._pending_dirs: list[str] = []  # local directories to delete from storage
        self._clock = clock
        self._max_share = max_share
        self._next_due = -math.inf
        self._guard: Callable[[], None] | None = None
        self.stats = SyncStats()

    def set_guard(self, guard: Callable[[], None] | None) -> None:
        """Call ``guard`` before each sync; it raises to forbid writing (the driver's
        lease on the experiment was lost)."""
        self._guard = guard

    def _check_guard(self) -> None:
        if self._guard is not None:
            self._guard()

    @property
    def mirror(self) -> StorageMirror:
        """The staging directory and its storage directory."""
        return self._mirror

    def delete_later(self, local_dirs: Iterable[str]) -> None:
        """Delete the storage copies of these directories after the next commit (the
        committed state may still refer to them until then)."""
        self._pending_dirs.extend(local_dirs)

    def drop_local_copies(self, local_dirs: Iterable[str]) -> None:
        """Remove these directories (checkpoints, which their workers uploaded) from the
        staging directory. Call after the final sync: storage then holds everything the
        state refers to, and the driver's disk keeps only the result files, as Ray
        Tune's keeps no checkpoint of a remote experiment."""
        import shutil

        root = self._mirror.local_root
        for local_dir in local_dirs:
            if os.path.commonpath([root, os.path.abspath(local_dir)]) == root:
                shutil.rmtree(local_dir, ignore_errors=True)

    def sync(self, trial_dirs: Iterable[tuple[str, bool]], *, force: bool = False) -> bool:
        """Publish what changed.

        Args:
            trial_dirs: ``(directory relative to the staging directory, finished)`` of
                every trial that has a directory.
            force: Sync even if the time share says it is not due (the end of a run).

        Returns:
            False when skipped because it was not due.

        Raises:
            LeaseLostError: From the guard (see :meth:`set_guard`); nothing was written.
        """
        start = self._clock()
        if not force and start < self._next_due:
            return False
        self._check_guard()
        root = self._mirror.local_root
        uploads: list[tuple[str, str, Stamp]] = []
        vanished: list[str] = []
        ended = []
        for rel, finished in trial_dirs:
            if rel in self._finished:
                continue
            trial_dir = os.path.join(root, rel)
            self._scan(trial_dir, uploads, vanished, skip=self._worker_files)
            if self._artifacts:
                for directory in _artifact_dirs(trial_dir):
                    self._scan(directory, uploads, vanished)
            if finished:
                ended.append(rel)
        self._scan(root, uploads, vanished, skip=self._state_files)
        fs = self._fs
        # Again right before each write: a driver paused since the first look (past the
        # lease's time to live) finds out here. One paused in the middle of the upload
        # still finishes it when resumed (docs/ARCHITECTURE.md, one driver per experiment).
        self._check_guard()
        fs.put_files([(local, remote) for local, remote, _ in uploads])
        for local, _, stamp in uploads:
            self._published[local] = stamp
            self._listed.setdefault(os.path.dirname(local), set()).add(os.path.basename(local))
        self._finished.update(ended)
        self._check_guard()
        if self._state.commit():
            self.stats.commits += 1
        if vanished:
            fs.delete_files([self._mirror.remote_path(p) for p in vanished])
            for path in vanished:
                self._published.pop(path, None)
                self._listed.get(os.path.dirname(path), set()).discard(os.path.basename(path))
        if self._pending_dirs:
            self._mirror.delete_dirs(self._pending_dirs)
            self._pending_dirs = []
        elapsed = self._clock() - start
        self._next_due = start + elapsed / self._max_share
        stats = self.stats
        stats.syncs += 1
        stats.files_uploaded += len(uploads)
        stats.bytes_uploaded += sum(stamp[0] for _, _, stamp in uploads)
        stats.seconds += elapsed
        logger.debug(
            "Synced %d files (%d bytes) to %s in %.3f s (commit %d)",
            len(uploads),
            sum(stamp[0] for _, _, stamp in uploads),
            self._mirror.root,
            elapsed,
            self._state.generation,
        )
        return True

    def _scan(
        self,
        directory: str,
        uploads: list[tuple[str, str, Stamp]],
        vanished: list[str],
        skip: frozenset[str] = frozenset(),
    ) -> None:
        """Queue the changed files directly in ``directory``; note the published ones gone."""
        try:
            entries = list(os.scandir(directory))
        except (FileNotFoundError, NotADirectoryError):
            entries = []
        present = set()
        for entry in entries:
            name = entry.name
            if name[0] == "." or name in skip or not entry.is_file(follow_symlinks=False):
                continue
            present.add(name)
            st = entry.stat(follow_symlinks=False)
            stamp = (st.st_size, st.st_ino, st.st_mtime_ns)
            path = entry.path
            if self._published.get(path) != stamp:
                uploads.append((path, self._mirror.remote_path(path), stamp))
        listed = self._listed.get(directory)
        if listed:
            vanished.extend(os.path.join(directory, name) for name in listed - present)


_CHECKPOINT_DIR = re.compile(r"checkpoint_\d+$")


def _artifact_dirs(trial_dir: str) -> list[str]:
    """The directories under ``trial_dir`` a trial wrote itself: not hidden, and at its
    top, not a checkpoint's."""
    found: list[str] = []
    for top, dirs, _ in os.walk(trial_dir):
        dirs[:] = [
            d for d in dirs if d[0] != "." and not (top == trial_dir and _CHECKPOINT_DIR.match(d))
        ]
        found.extend(os.path.join(top, d) for d in dirs)
    return found
