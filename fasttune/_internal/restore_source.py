"""What ``Tuner.restore`` reads: a saved experiment, wherever it is kept.

Finds the experiment (a local directory, or remote storage, refused while a live
driver holds its lease), downloads a remote one into a fresh staging directory, and
reads what the run was built with: ``tuner.pkl``, or the trial folders when that file
is lost or damaged and the ``param_space`` is given again. The checks here make a
restore continue *the same* experiment: the same trainable, the same hyperparameters.
"""

from __future__ import annotations

import copy
import logging
import os
from dataclasses import dataclass
from typing import Any

from fasttune._internal.experiment_folder import has_state_but_no_tuner, saved_from_folders
from fasttune.config import RunConfig
from fasttune.error import ExperimentNotFoundError
from fasttune.tune_config import TuneConfig

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SavedExperiment:
    """A saved experiment, found and read, ready to build the restoring Tuner from.

    Attributes:
        storage: Where it is kept (``fasttune.storage.location.ExperimentStorage``);
            a remote one is downloaded to ``storage.local_path``.
        saved: What ``tuner.pkl`` holds (its pickled inputs unpickled), or what the
            trial folders stand in for.
        tune_config: The run's ``TuneConfig`` (the default when it was not saved).
        run_config: The run's ``RunConfig``, naming where the experiment was found.
        param_space: The ``param_space`` to continue with.
    """

    storage: Any
    saved: dict[str, Any]
    tune_config: TuneConfig
    run_config: RunConfig
    param_space: dict[str, Any]


def can_restore(path: str | os.PathLike[str], storage_filesystem: Any = None) -> bool:
    """True if ``path`` holds an experiment that ``Tuner.restore`` can continue."""
    from fasttune._internal.state_layout import SNAPSHOT_FILE, TUNER_FILE
    from fasttune.storage.location import NotAnExperimentPathError, locate_experiment
    from fasttune.storage.state_commit import read_manifest

    try:
        storage = locate_experiment(path, storage_filesystem, owner="Tuner.can_restore")
    except NotAnExperimentPathError:
        return False  # a bucket's root holds no experiment (Ray answers False too)
    if storage.is_remote:
        manifest = read_manifest(storage.filesystem, storage.path)
        return manifest is not None and {SNAPSHOT_FILE, TUNER_FILE} <= set(manifest["files"])
    # tuner.pkl is the first file a run writes: with it, the run can go on. The other
    # state files are rebuilt when missing (the journal, the base records and the trial
    # folders stand in for the snapshot; none at all: killed before its first one).
    return os.path.exists(os.path.join(storage.path, TUNER_FILE))


def read_saved_experiment(
    path: str | os.PathLike[str],
    storage_filesystem: Any,
    param_space: dict[str, Any] | None,
) -> SavedExperiment:
    """Find the experiment at ``path`` and read what its run was built with.

    Raises:
        ValueError: No experiment there; or its ``tuner.pkl`` is missing or damaged and
            no ``param_space`` was given to continue from the trial folders; or its
            ``param_space`` could not be pickled and was not given again.
        ExperimentInUseError: A live driver (on any machine) runs a remote one.
    """
    from fasttune._internal.experiment_state import ExperimentStateStore
    from fasttune._internal.state_framing import DamagedStateError
    from fasttune.storage.location import locate_experiment

    storage = locate_experiment(path, storage_filesystem)
    if storage.is_remote:  # refused at once while a live driver runs it
        from fasttune.storage.experiment_lease import check_lease

        check_lease(storage.filesystem, storage.path, storage.uri)
    without_tuner = False
    if not can_restore(path, storage_filesystem) or (
        storage.is_remote and not _download_experiment(storage)
    ):
        if storage.is_remote or not has_state_but_no_tuner(storage.path):
            raise ExperimentNotFoundError(
                f"Tuner.restore(path={storage.uri!r}): no fasttune experiment there. Pass "
                "the directory printed when the experiment started "
                "(<storage_path>/<name>)."
            )
        if param_space is None:
            raise ValueError(
                f"Tuner.restore(path={storage.uri!r}): the experiment's tuner.pkl (its "
                "param_space and configs) is missing, so the run cannot be continued "
                "from it alone. Its trials and results are intact: read them with "
                f"fasttune.ExperimentAnalysis({storage.uri!r}), or continue the run from "
                "its trial folders with Tuner.restore(path, trainable=..., "
                "param_space=<the run's param_space>)."
            )
        without_tuner = True
    local_path = storage.local_path
    store = ExperimentStateStore(local_path)
    saved: dict[str, Any] = {}
    if not without_tuner:
        try:
            saved = store.load_tuner()
        except DamagedStateError as damage:
            if param_space is None:
                raise ValueError(
                    f"Tuner.restore(path={storage.uri!r}): {damage}, so the run cannot "
                    "be continued from it alone. Its trials and results are intact: "
                    f"read them with fasttune.ExperimentAnalysis({storage.uri!r}), or "
                    "continue the run from its trial folders with Tuner.restore(path, "
                    "trainable=..., param_space=<the run's param_space>)."
                ) from None
            logger.warning("%s; the run goes on from its trial folders.", damage)
            without_tuner = True
    if without_tuner:
        saved = saved_from_folders(store)
    if "inputs" in saved:
        import cloudpickle

        saved = {**cloudpickle.loads(saved["inputs"]), **saved}
    run_config = copy.copy(saved.get("run_config") or RunConfig())
    run_config.name = storage.name
    if storage.is_remote:
        root = storage.path if storage_filesystem is not None else storage.uri
        run_config.storage_path = root.rstrip("/").rpartition("/")[0]
        run_config.storage_filesystem = storage_filesystem
    else:
        run_config.storage_path = os.path.dirname(local_path)
        run_config.storage_filesystem = None
    space = param_space if param_space is not None else saved.get("param_space")
    if space is None:
        raise ValueError(
            "The saved param_space could not be pickled; pass it again with "
            "Tuner.restore(..., param_space=...)."
        )
    return SavedExperiment(
        storage=storage,
        saved=saved,
        tune_config=saved.get("tune_config") or TuneConfig(),
        run_config=run_config,
        param_space=space,
    )


def load_trials_to_continue(experiment: SavedExperiment, param_space: dict[str, Any] | None) -> Any:
    """The experiment's state (``LoadedExperiment``), with the result files of the
    trials that may run again downloaded when it is remote.

    Raises:
        ValueError: ``param_space`` was given again with other keys than the run's.
    """
    from fasttune._internal.experiment_state import ExperimentStateStore

    if param_space is not None:
        check_same_param_keys(param_space, experiment.saved.get("param_space"))
    storage = experiment.storage
    loaded = experiment.saved.get("loaded") or ExperimentStateStore(storage.local_path).load()
    if storage.is_remote:
        _download_trial_files(storage, loaded)
    return loaded


def check_same_trainable(trainable_cls: Any, saved_name: str | None) -> None:
    """Refuse to run a restored experiment with another trainable (as Ray: by name).

    Checked when the restored run is fitted (Ray checks in ``Tuner.restore``), so that
    ``Tuner.restore(path, trainable=...).get_results()`` reads any experiment back.

    Raises:
        ValueError: The names differ.
    """
    name = getattr(trainable_cls, "_name", None) or trainable_cls.__name__
    if saved_name is not None and name != saved_name:
        raise ValueError(
            f"Tuner.restore(trainable=...) got the trainable {name!r}, but the experiment "
            f"ran {saved_name!r}: pass the same trainable the Tuner was built with (a new "
            "trainable is a new experiment: Tuner(...).fit())."
        )


def check_same_param_keys(param_space: dict[str, Any], saved_space: Any) -> None:
    """Refuse a restore ``param_space`` whose (flattened) keys differ from the run's.

    Passing it again is meant to refresh values that could not be pickled, not to add
    or drop hyperparameters; as Ray, only the keys are compared.

    Raises:
        ValueError: The keys differ; the message lists both sets.

    Example:
        >>> check_same_param_keys({"lr": 0.1, "net": {"width": 8}},
        ...                       {"lr": 0.2, "net": {"width": 16}})
        >>> check_same_param_keys({"lr": 0.1}, {"lr": 0.2, "momentum": 0.9})
        Traceback (most recent call last):
        ...
        ValueError: Tuner.restore(param_space=...) must have the keys of the param_space \
the experiment ran with: pass it again only to refresh values, not to search other \
hyperparameters. The run had ['lr', 'momentum']; this one has ['lr'] \
(missing: ['momentum']).
    """
    if not isinstance(saved_space, dict):
        return  # not saved (it could not be pickled): nothing to compare with
    keys, saved_keys = sorted(_param_keys(param_space)), sorted(_param_keys(saved_space))
    if keys != saved_keys:
        added = sorted(set(keys) - set(saved_keys))
        missing = sorted(set(saved_keys) - set(keys))
        raise ValueError(
            "Tuner.restore(param_space=...) must have the keys of the param_space the "
            "experiment ran with: pass it again only to refresh values, not to search "
            f"other hyperparameters. The run had {saved_keys}; this one has {keys}"
            + (f" (new: {added})" if added else "")
            + (f" (missing: {missing})" if missing else "")
            + "."
        )


def _param_keys(space: dict[str, Any], prefix: str = "") -> list[str]:
    """The ``/``-joined key paths of a param_space (a grid_search is one value)."""
    keys = []
    for key, value in space.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and set(value) != {"grid_search"}:
            keys.extend(_param_keys(value, f"{path}/"))
        else:
            keys.append(path)
    return keys


def _download_experiment(storage: Any) -> bool:
    """Download the committed state of a remote experiment into a fresh staging
    directory; False if storage holds none."""
    from fasttune.storage.location import reset_staging
    from fasttune.storage.state_commit import download_state

    reset_staging(storage)
    return download_state(storage.filesystem, storage.path, storage.local_path) is not None


def _download_trial_files(storage: Any, loaded: Any) -> None:
    """Download the result files of the trials that may run again (all but the
    terminated ones), which the driver appends to; checkpoints stay in storage."""
    from fasttune.experiment.trial import TrialStatus

    again = [
        os.path.join(storage.local_path, state["relative_logdir"])
        for state in loaded.trials
        if state["status"] != TrialStatus.TERMINATED.value and state.get("relative_logdir")
    ]
    storage.mirror.fetch_files(again)
