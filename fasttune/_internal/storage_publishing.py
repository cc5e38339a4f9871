"""Publishing a remote experiment while it runs: the controller's side of
``storage/sync.py``.

The controller writes the experiment into its staging directory; an
:class:`ExperimentPublisher` says when storage gets it (at each snapshot, and after a
checkpoint is registered, within the sync's share of the driver's time), what a sync
covers (the trial folders, minus the files workers upload themselves), and what a
failed sync means: logged and tried again at the next one during the run, raised at
the end, and the end of the run when another driver has taken the experiment over.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable

from fasttune._internal.run_spec import RunSpec
from fasttune._internal.state_layout import STATE_FILES
from fasttune.experiment.trial import Trial
from fasttune.storage.experiment_lease import LeaseLostError
from fasttune.storage.sync import ExperimentSync

logger = logging.getLogger(__name__)


class ExperimentPublisher:
    """Publishes the staging directory of one remote experiment (see the module doc)."""

    def __init__(self, spec: RunSpec):
        storage = spec.storage
        assert storage is not None
        self._uri = storage.uri
        self.sync = ExperimentSync(
            storage.mirror,
            STATE_FILES,
            worker_files=_worker_uploaded(spec),
            artifacts=spec.sync_artifacts,
        )
        self._checkpoint_waiting = False  # a checkpoint registered since the last sync

    @classmethod
    def for_run(cls, spec: RunSpec) -> ExperimentPublisher | None:
        """A publisher for a run whose storage is remote; None for local storage."""
        storage = spec.storage
        return cls(spec) if storage is not None and storage.is_remote else None

    @property
    def checkpoint_waiting(self) -> bool:
        """Whether a checkpoint was registered since storage last got the state."""
        return self._checkpoint_waiting

    def checkpoint_registered(self, trial_dir: str, removed: Iterable[str]) -> None:
        """A trial registered a checkpoint; ``removed`` are the names of the checkpoints
        it no longer keeps (deleted from storage with the next sync)."""
        self._checkpoint_waiting = True
        removed = list(removed)
        if removed:
            self.sync.delete_later(os.path.join(trial_dir, name) for name in removed)

    def publish(self, trials: Iterable[Trial], *, final: bool = False) -> LeaseLostError | None:
        """Sync the staging directory (``final``: all of it, now, whatever the sync's
        time share says).

        Returns:
            The ``LeaseLostError`` when another driver runs the experiment now (the run
            must end and write nothing more), else None. A failed sync during the run
            is logged (storage keeps its last complete copy, the next one tries again).

        Raises:
            Exception: With ``final``, whatever made the sync fail.
        """
        dirs = ((t.relative_logdir, t.is_finished()) for t in trials if t.relative_logdir)
        try:
            if self.sync.sync(dirs, force=final):
                self._checkpoint_waiting = False
        except LeaseLostError as e:
            if final:
                raise
            return e
        except Exception as e:
            if final:
                raise
            logger.warning(
                "Could not sync the experiment to %s (%s: %s); storage keeps its last "
                "complete copy and the next snapshot tries again.",
                self._uri,
                type(e).__name__,
                e,
            )
        return None

    def drop_local_copies(self, trials: Iterable[Trial]) -> None:
        """After the final sync: storage has every checkpoint, the staging copies go."""
        self.sync.drop_local_copies(
            c.path for t in trials if t.checkpoint_manager for c in t.checkpoint_manager.checkpoints
        )


def _worker_uploaded(spec: RunSpec) -> frozenset[str]:
    """The captured-output files (``log_to_file``) that the executor's workers upload
    to storage themselves: the driver's sync leaves them out."""
    if not getattr(spec.executor, "uploads_trial_output", False):
        return frozenset()
    return frozenset(
        name for name in spec.log_to_file if name and not os.path.isabs(name) and "/" not in name
    )
