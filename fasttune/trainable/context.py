"""``TuneContext``: read-only facts about the current trial (``fasttune.get_context()``)."""

from __future__ import annotations

from typing import Any

from fasttune.trainable.session import TrialSession, current_session


class TuneContext:
    """Facts about the trial the calling code runs in.

    Outside a trial every getter returns None.
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

    # Ray Train's distributed-training facts: Ray Tune's context answers None (and
    # says they are Train's), so code such as ``if ctx.get_world_rank() == 0`` takes
    # the same branch here as there.
    def get_world_size(self) -> None:
        return _train_only("get_world_size")

    def get_world_rank(self) -> None:
        return _train_only("get_world_rank")

    def get_local_rank(self) -> None:
        return _train_only("get_local_rank")

    def get_local_world_size(self) -> None:
        return _train_only("get_local_world_size")

    def get_node_rank(self) -> None:
        return _train_only("get_node_rank")

    def get_metadata(self) -> dict[str, Any]:
        """Not usable in Ray Tune either: raises, as Ray Tune's does."""
        raise DeprecationWarning(
            "`get_metadata` is deprecated for Ray Tune (it has never been usable), and "
            "fasttune does not have it either."
        )

    def __repr__(self) -> str:
        return f"TuneContext(trial_id={self.get_trial_id()!r}, trial_dir={self.get_trial_dir()!r})"


def get_context() -> TuneContext:
    """Return the context of the current trial.

    Example:
        >>> def train_fn(config):
        ...     trial_dir = get_context().get_trial_dir()
    """
    return TuneContext(current_session())


def _train_only(name: str) -> None:
    import warnings

    warnings.warn(
        f"TuneContext.{name}() is Ray Train's: it returns None in a Tune trial, as in Ray Tune.",
        DeprecationWarning,
        stacklevel=3,
    )
