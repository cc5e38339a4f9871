"""A local directory and its copy on a storage filesystem (a remote experiment's staging).

Workers get one with each trial they run: they upload each checkpoint they make
(once, whole, before the result that carries it reaches the driver) and download
the checkpoint they restore when this machine has no copy of it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from fasttune.storage.filesystem import FileSystem


@dataclass(frozen=True)
class StorageMirror:
    """Paths under ``local_root`` and their counterparts under ``root`` on ``filesystem``.

    Attributes:
        filesystem: The storage filesystem (picklable: it travels to workers).
        local_root: The local (staging) directory.
        root: The directory on ``filesystem`` it is published to.
    """

    filesystem: FileSystem
    local_root: str
    root: str

    def remote_path(self, local_path: str) -> str:
        """The storage path of ``local_path``.

        Raises:
            ValueError: ``local_path`` is not inside ``local_root``.
        """
        rel = os.path.relpath(os.path.abspath(local_path), self.local_root)
        if rel == os.curdir:
            return self.root
        if rel == os.pardir or rel.startswith(os.pardir + os.sep):
            raise ValueError(
                f"{local_path!r} is not inside the staging directory {self.local_root!r}"
            )
        return self.filesystem.join(self.root, rel.replace(os.sep, "/"))

    def upload_dir(self, local_dir: str) -> None:
        """Upload the directory ``local_dir`` (each file whole) to its storage path."""
        self.filesystem.upload_dir(local_dir, self.remote_path(local_dir))

    def fetch_dir(self, local_dir: str) -> bool:
        """Make sure ``local_dir`` exists, downloading its storage copy if it does not.

        The download goes to a hidden sibling that is renamed into place when complete,
        so ``local_dir`` never holds half a checkpoint.

        Returns:
            False when neither this machine nor the storage has it.
        """
        if os.path.isdir(local_dir):
            return True
        import shutil  # here: not on a worker's way to its first trial

        parent, name = os.path.split(os.path.abspath(local_dir))
        os.makedirs(parent, exist_ok=True)
        partial = os.path.join(parent, f".{name}.download_{os.urandom(4).hex()}")
        try:
            self.filesystem.download_dir(self.remote_path(local_dir), partial)
        except FileNotFoundError:
            shutil.rmtree(partial, ignore_errors=True)
            return False
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
        try:
            os.replace(partial, local_dir)
        except OSError:  # it appeared meanwhile (another download): keep that one
            shutil.rmtree(partial, ignore_errors=True)
        return True

    def fetch_files(self, local_dirs: Sequence[str]) -> None:
        """Download the files directly inside the storage copies of these directories
        (not their subdirectories: checkpoints stay in storage until a worker needs one)."""
        fs = self.filesystem
        pairs = []
        for local_dir in local_dirs:
            remote = self.remote_path(local_dir)
            pairs += [
                (fs.join(remote, name), os.path.join(local_dir, name))
                for name in fs.files_in(remote)
            ]
        fs.get_files(pairs)

    def copy_dir(self, source: str, target: str) -> None:
        """Copy the storage copy of ``source`` to that of ``target`` (server-side on object
        stores: the data does not travel through this machine)."""
        self.filesystem.copy_dir(self.remote_path(source), self.remote_path(target))

    def delete_dirs(self, local_dirs: Sequence[str]) -> None:
        """Remove the storage copies of these directories."""
        for local_dir in local_dirs:
            self.filesystem.delete(self.remote_path(local_dir))
