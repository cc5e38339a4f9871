"""``TuneContext``: read-only facts about the current trial (``fasttune.get_context()``)."""

from __future__ import annotations

from typing import Any

from fasttune.trainable.session import TrialSession, current_session


class TuneContext:
    """Facts about the trial the calling code runs in.

    Outside a trial every getter returns None (world size 1, ranks 0).
    """

    def __init__(self, session: TrialSession | None = None):
        self._session = session

    def _info(self, attr: str) -> Any:
        session = self._session or current_session()
        if session is None or session.trial_info is None:
            return None
        return getattr(session.trial_info, attr)

    def get_trial_id(self) -> str | None:
        """Id of the current trial."""
        return self._info("trial_id")

    def get_trial_name(self) -> str | None:
        """Name of the current trial."""
        return self._info("trial_name")

    def get_experiment_name(self) -> str | None:
        """Name of the experiment the trial belongs to."""
        return self._info("experiment_name")

    def get_trial_resources(self) -> Any:
        """Resources assigned to the trial (a ``PlacementGroupFactory``)."""
        return self._info("resources")

    def get_trial_dir(self) -> str | None:
        """Directory of the trial's results, logs and checkpoints."""
        session = self._session or current_session()
        return None if session is None else session.trial_dir

    def get_world_size(self) -> int:
        return 1

    def get_world_rank(self) -> int:
        return 0

    def get_local_rank(self) -> int:
        return 0

    def get_local_world_size(self) -> int:
        return 1

    def get_node_rank(self) -> int:
        return 0

    def __repr__(self) -> str:
        return f"TuneContext(trial_id={self.get_trial_id()!r}, trial_dir={self.get_trial_dir()!r})"


def get_context() -> TuneContext:
    """Return the context of the current trial.

    Example:
        >>> def train_fn(config):
        ...     trial_dir = get_context().get_trial_dir()
    """
    return TuneContext(current_session())
