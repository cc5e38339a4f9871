"""A trial's captured output, uploaded to remote storage by the worker that wrote it.

With ``RunConfig(log_to_file=...)`` the Trainable writes its ``stdout``/``stderr``
into its trial directory, on the machine it runs on. A local worker shares the
driver's disk and the driver's sync publishes the files; a Ray actor may run on
another node, so it uploads them itself, as it does its checkpoints: at least every
:data:`UPLOAD_PERIOD_S` while the trial runs, and when it stops or fails (before the
driver hears of it). A trial resumed on a node that has no copy first downloads the
storage copy, so that its output goes on where it stopped instead of replacing it.
Names outside the trial directory (absolute paths elsewhere) stay where they are.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any

from fasttune.storage.mirror import StorageMirror
from fasttune.trainable.trial_info import STDERR_FILE, STDOUT_FILE

logger = logging.getLogger(__name__)

UPLOAD_PERIOD_S = 30.0


class TrialOutput:
    """The output files of one trial hosted by this worker.

    Args:
        trial_id: The trial.
        paths: Its output files, inside ``trial_dir``.
        mirror: The experiment's staging directory and its storage.
    """

    def __init__(self, trial_id: str, paths: list[str], mirror: StorageMirror):
        self.trial_id = trial_id
        self.paths = paths
        self.mirror = mirror
        self._uploaded_at = time.monotonic()

    @classmethod
    def of(cls, launch: Any) -> TrialOutput | None:
        """The output of the trial ``launch`` starts; None when there is nothing for this
        worker to upload (local storage, no ``log_to_file``)."""
        mirror = launch.storage
        if mirror is None:
            return None
        trial_dir = os.path.abspath(launch.trial_dir)
        paths = []
        for key in (STDOUT_FILE, STDERR_FILE):
            name = launch.config.get(key)
            if not name:
                continue
            path = os.path.abspath(os.path.join(trial_dir, name))
            if os.path.dirname(path) == trial_dir and path not in paths:
                paths.append(path)
        return cls(launch.trial_id, paths, mirror) if paths else None

    def fetch(self) -> None:
        """Download the storage copies of the files this machine lacks (a trial resumed
        on another node), before the Trainable opens them for appending."""
        missing = [p for p in self.paths if not os.path.exists(p)]
        if not missing:
            return
        fs = self.mirror.filesystem
        try:
            stored = set(fs.files_in(self.mirror.remote_path(os.path.dirname(missing[0]))))
            fs.get_files(
                [(self.mirror.remote_path(p), p) for p in missing if os.path.basename(p) in stored]
            )
        except Exception as e:  # its earlier output is not worth failing the trial for
            logger.warning(
                "Could not download the earlier output of trial %s (%s: %s); it starts anew.",
                self.trial_id,
                type(e).__name__,
                e,
            )

    def due(self) -> bool:
        return time.monotonic() - self._uploaded_at >= UPLOAD_PERIOD_S

    def upload(self) -> None:
        """Flush the captured streams and upload the files (each whole)."""
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed file: the trial closed it
                pass
        self._uploaded_at = time.monotonic()
        pairs = [(p, self.mirror.remote_path(p)) for p in self.paths if os.path.exists(p)]
        try:
            self.mirror.filesystem.put_files(pairs)
        except Exception as e:  # storage down: the next upload carries it all
            logger.warning(
                "Could not upload the output of trial %s (%s: %s).",
                self.trial_id,
                type(e).__name__,
                e,
            )
