"""The older ``Trainable`` methods Ray 2.x still has, kept apart from the core class."""

from __future__ import annotations

import logging
import os
from typing import Any

from fasttune._support.process_info import node_ip
from fasttune.storage.filesystem import is_url
from fasttune.trainable import checkpoint_io as ckpt_io

logger = logging.getLogger(__name__)


class LegacyTrainableAPI:
    """``delete_checkpoint``, ``get_current_ip``, ``is_actor`` and ``uses_cloud_checkpointing``.

    Mixed into :class:`~fasttune.trainable.Trainable`; relies on its ``_trial_info``
    and ``_storage`` attributes.
    """

    _trial_info: Any
    _storage: Any

    def delete_checkpoint(self, checkpoint_path: str | os.PathLike[str]) -> None:
        """Delete the local checkpoint directory that holds ``checkpoint_path``.

        Args:
            checkpoint_path: A directory returned by ``save()``, or a path inside it.
                A checkpoint that is not there (already deleted, or never on this
                host) is skipped, as Ray skips it.
        """
        try:
            root = ckpt_io.find_checkpoint_root(os.fspath(checkpoint_path))
        except FileNotFoundError:
            logger.debug("Checkpoint %s not found; nothing to delete.", checkpoint_path)
            return
        if os.path.isdir(root):
            import shutil  # here: not on a worker's way to its first trial

            shutil.rmtree(root)

    def get_current_ip(self) -> str:
        """The IP address of the host this trainable runs on."""
        return node_ip()

    def is_actor(self) -> bool:
        """True when the trainable runs as a trial of a run (not built by hand)."""
        return self._trial_info is not None

    @property
    def uses_cloud_checkpointing(self) -> bool:
        """True when the trainable's storage is remote (``s3://``, ``gs://``, ...)."""
        storage = self._storage
        if storage is None:
            return False
        if isinstance(storage, (str, os.PathLike)):
            return is_url(os.fspath(storage))
        return bool(getattr(storage, "is_remote", False))
