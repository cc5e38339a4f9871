"""What schedulers may ask of the run, and how the controller carries it out.

A plugin hook asks through :class:`~fasttune._internal.controller_view.ControllerView`
(``pause_trial``, ``stop_trial``, ``exploit_trial``...); each call queues one of the
frozen records below, and the controller hands them to :func:`apply_request` once the
hook has returned (a hook never sees the run change under it).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from fasttune.experiment.trial import Trial

if TYPE_CHECKING:
    from fasttune._internal.trial_lifecycle import TrialLifecycle
    from fasttune.storage.sync import ExperimentSync

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Pause:
    """Pause a running trial, checkpointing it first unless ``should_checkpoint`` is False."""

    trial: Trial
    should_checkpoint: bool = True


@dataclass(frozen=True)
class Stop:
    """End a trial: a running one is stopped, a waiting one terminated."""

    trial: Trial


@dataclass(frozen=True)
class Save:
    """Checkpoint a running trial right after its current result; it keeps running."""

    trial: Trial


@dataclass(frozen=True)
class Unpause:
    """Make a PAUSED trial runnable again."""

    trial: Trial


@dataclass(frozen=True)
class Exploit:
    """Restart ``trial`` from ``checkpoint`` with ``config`` (PBT's exploit)."""

    trial: Trial
    checkpoint: Any
    config: dict[str, Any]
    experiment_tag: str | None = None


@dataclass(frozen=True)
class SetResources:
    """Save, stop and restart ``trial`` with ``resources``."""

    trial: Trial
    resources: Any


PluginRequest = Pause | Stop | Save | Unpause | Exploit | SetResources


class RequestHost(Protocol):
    """What carrying out a request needs from the controller."""

    @property
    def lifecycle(self) -> TrialLifecycle: ...

    def pause_trial(self, trial: Trial, *, save: bool) -> None: ...

    def terminate_trial(self, trial: Trial) -> None: ...

    def save_trial(self, trial: Trial) -> None: ...

    # Optional (read with getattr): the sync of an experiment in remote storage.
    # storage_sync: ExperimentSync | None


def apply_request(host: RequestHost, request: PluginRequest) -> None:
    """Carry out ``request``; requests about trials that moved on meanwhile do nothing."""
    trial = request.trial
    lifecycle = host.lifecycle
    if isinstance(request, Stop):
        host.terminate_trial(trial)
    elif isinstance(request, Pause):
        if lifecycle.is_launched(trial):
            host.pause_trial(trial, save=request.should_checkpoint)
    elif isinstance(request, Save):
        if lifecycle.is_launched(trial) and lifecycle.stop_intent(trial) is None:
            host.save_trial(trial)
    elif isinstance(request, Unpause):
        lifecycle.unpause(trial)
    elif isinstance(request, Exploit):
        sync = getattr(host, "storage_sync", None)
        lifecycle.restart(trial, exploit_change(request, sync), save=False)
    elif isinstance(request, SetResources):
        lifecycle.restart(trial, _new_resources(request.resources), save=True)
    else:
        raise TypeError(f"Unknown plugin request {request!r}")


def exploit_change(request: Exploit, sync: ExperimentSync | None = None) -> Any:
    """The change that carries out ``request``: the new config and tag, and the donor's
    checkpoint copied into the trial's own directory as its newest."""
    path = getattr(request.checkpoint, "path", request.checkpoint)

    def change(trial: Trial) -> None:
        trial.set_config(request.config)
        if request.experiment_tag is not None:
            trial.set_experiment_tag(request.experiment_tag)
        trial.restore_path = None
        if path is None:
            return
        decided: str = os.fspath(path)
        source: str | None = decided
        if sync is None and not os.path.isdir(decided):
            # The donor kept newer checkpoints since the decision (the trial pauses
            # first) and its num_to_keep deleted this one: its newest one is taken,
            # registered at its own iteration (the run used to fail here).
            source = newest_checkpoint_beside(decided)
            logger.info(
                "Trial %s: the checkpoint %s it was to exploit was deleted meanwhile (the "
                "donor's num_to_keep); it exploits %s instead.",
                trial,
                path,
                source or "nothing (it restarts from scratch with the new config)",
            )
        if source is not None:
            # The donor's checkpoint becomes this trial's latest one: copied into its own
            # directory, so a retry or Tuner.restore resumes from it and the donor's
            # num_to_keep cannot delete it underneath.
            trial.restore_path = adopt_checkpoint(trial, source, sync)

    return change


def newest_checkpoint_beside(path: str) -> str | None:
    """The newest ``checkpoint_NNNNNN`` folder in the trial folder ``path`` was in."""
    from fasttune.trainable.checkpoint_io import CHECKPOINT_DIR_PATTERN

    folder = os.path.dirname(os.path.normpath(path))
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    found = [(int(m.group(1)), n) for n in names if (m := CHECKPOINT_DIR_PATTERN.fullmatch(n))]
    return os.path.join(folder, max(found)[1]) if found else None


def adopt_checkpoint(trial: Trial, source: str, sync: ExperimentSync | None = None) -> str:
    """Copy the checkpoint directory ``source`` into ``trial``'s directory and register it.

    With remote storage (``sync``) the copy is made in storage first (server-side on
    object stores), and locally only when this machine has the source.
    """
    import shutil

    from fasttune._internal.launcher import next_checkpoint_index
    from fasttune.trainable.checkpoint_io import checkpoint_dir_name

    trial_dir = trial.init_local_path()
    os.makedirs(trial_dir, exist_ok=True)
    name = checkpoint_dir_name(next_checkpoint_index(trial))
    target = os.path.join(trial_dir, name)
    if sync is not None:
        sync.mirror.copy_dir(source, target)
    if sync is None or os.path.isdir(source):
        shutil.copytree(source, target)
    manager = trial.checkpoint_manager
    removed = manager.register(name, _adopted_metrics(trial, target))
    manager.delete_files(removed)
    if removed and sync is not None:
        sync.delete_later(os.path.join(manager.trial_dir, n) for n in removed)
    return target


def _adopted_metrics(trial: Trial, checkpoint_dir: str) -> dict[str, Any]:
    """The metrics an adopted checkpoint is registered with: the trial's last result,
    at the iteration (and timesteps) the checkpoint itself restores to.

    The trial resumes where the donor's checkpoint was taken, not where the trial
    stood when it exploited (PBT may clone a donor whose checkpoint is older, e.g. one
    paused between checkpoints); the result files are cut back to this iteration, so
    any later one would leave the iterations after the checkpoint in them twice.
    """
    from fasttune import result as R
    from fasttune.trainable.checkpoint_io import read_state

    metrics = dict(trial.last_result)
    try:
        state = read_state(checkpoint_dir) if os.path.isdir(checkpoint_dir) else None
    except Exception:  # a damaged state file: the restore will say so
        state = None
    if not state or not isinstance(state.get("iteration"), int):
        return metrics  # no trainable state here (remote only, or a bare directory)
    metrics[R.TRAINING_ITERATION] = state["iteration"]
    if state.get("timesteps_total") is None:
        metrics.pop(R.TIMESTEPS_TOTAL, None)
    else:
        metrics[R.TIMESTEPS_TOTAL] = state["timesteps_total"]
    return metrics


def _new_resources(resources: Any) -> Any:
    from fasttune.execution.placement_groups import normalize_resources

    pgf = normalize_resources(resources)

    def change(trial: Trial) -> None:
        trial.placement_group_factory = pgf

    return change
