"""Rebuild a ``Trial`` from its saved JSON state and its pickled config."""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import cloudpickle

from fasttune._internal.checkpoint_manager import CheckpointManager
from fasttune._support.encoding import encode_config
from fasttune.experiment.trial import Trial, TrialStatus
from fasttune.result import EXPR_PARAM_FILE, EXPR_PARAM_PICKLE_FILE

logger = logging.getLogger(__name__)


def load_trial_config(trial_dir: str) -> dict[str, Any]:
    """The config pickled in a trial directory's ``params.pkl``; {} (the config is lost)
    when it is missing, does not unpickle, or differs from ``params.json``.

    ``params.pkl`` stays a plain pickle, as Ray writes it and as Ray's tools read it, so
    it has no checksum of its own: a changed byte could unpickle into another value.
    ``params.json``, written beside it from the same config, is the check.
    """
    path = os.path.join(trial_dir, EXPR_PARAM_PICKLE_FILE)
    try:
        with open(path, "rb") as f:
            config = cloudpickle.load(f)
    except FileNotFoundError:
        return {}
    except Exception as exc:
        logger.warning("%s is damaged (%s); the trial's config is lost.", path, exc)
        return {}
    if not isinstance(config, dict) or not _same_as_params_json(trial_dir, config):
        logger.warning(
            "%s and %s beside it hold different configs: one of them is damaged, so the "
            "trial's config is lost.",
            path,
            EXPR_PARAM_FILE,
        )
        return {}
    return config


def _same_as_params_json(trial_dir: str, config: dict[str, Any]) -> bool:
    """Whether ``config`` is what ``params.json`` holds (True when there is none)."""
    try:
        with open(os.path.join(trial_dir, EXPR_PARAM_FILE), encoding="utf-8") as f:
            written = json.load(f)
    except FileNotFoundError:
        return True
    except ValueError:  # a damaged params.json: the pickle is all there is
        return True
    return bool(written == json.loads(encode_config(config)))


def trial_from_state(
    state: dict[str, Any],
    experiment_path: str,
    *,
    config: dict[str, Any] | None = None,
    num_to_keep: int | None = None,
    score_attribute: str | None = None,
    score_order: str = "max",
) -> Trial:
    """A ``Trial`` with the status, counters, checkpoints and last result of ``state``.

    The config comes from ``config`` (the experiment's configs log) when given, else
    from the trial directory's ``params.pkl``.
    """
    trial = Trial(
        state["trainable_name"],
        trial_id=state["trial_id"],
        experiment_tag=state.get("experiment_tag", ""),
        evaluated_params=state.get("evaluated_params") or {},
        experiment_path=experiment_path,
        max_failures=state.get("max_failures", 0),
        checkpoint_frequency=state.get("checkpoint_frequency", 0),
        checkpoint_at_end=state.get("checkpoint_at_end", False),
        custom_trial_name=state.get("custom_trial_name"),
        custom_dirname=state.get("custom_dirname"),
    )
    trial.relative_logdir = state["relative_logdir"]
    if state.get("resources"):
        trial.placement_group_factory = _factory_from_json(state["resources"])
    trial.status = TrialStatus(state["status"])
    trial.num_failures = state.get("num_failures", 0)
    trial.error_msg = state.get("error_msg")
    trial.results_count = state.get("results_count", 0)
    trial.ending_told = state.get("ending_told", True)  # older states: assume told
    trial.start_time = state.get("start_time")
    if state.get("error_file"):
        trial.error_file = os.path.join(trial.local_path or "", state["error_file"])
    trial.config = config if config is not None else load_trial_config(trial.local_path or "")
    last_result = dict(state.get("last_result") or {})
    if last_result:
        last_result["config"] = trial.config
        trial.update_last_result(last_result)
        trial.results_count = state.get("results_count", trial.results_count)
        trial.stats_partial = trial.results_count > 1  # the files hold the others
    manager = CheckpointManager(trial.local_path or "", num_to_keep, score_attribute, score_order)
    manager.load_json(state.get("checkpoints"))
    trial.checkpoint_manager = manager
    if trial.is_finished():
        trial.compact()  # final statistics, shared config: as when it finished in a run
    return trial


_factories: dict[str, Any] = {}
_last_factory: list[Any] = [None, None]  # the last request seen, and its factory


def _factory_from_json(data: dict[str, Any]) -> Any:
    """The ``PlacementGroupFactory`` of ``data``, one shared instance per distinct request.

    Factories are immutable, and most trials of an experiment ask for the same
    resources: building (and validating) one per trial was a tenth of a restore, and
    keying each request by its sorted JSON a twentieth; a request equal to the one
    before takes its factory at once.
    """
    from fasttune.execution.placement_groups import PlacementGroupFactory

    last, factory = _last_factory
    if data == last:
        return factory
    key = json.dumps(data, sort_keys=True)
    factory = _factories.get(key)
    if factory is None:
        factory = _factories[key] = PlacementGroupFactory.from_json(data)
    _last_factory[:] = data, factory
    return factory


def move_trials(trials: list[Trial], experiment_path: str) -> None:
    """Point ``trials`` at the experiment directory ``experiment_path``.

    A remote experiment's driver runs its trials in the staging directory; once the run
    is over, its results are read where they are kept, in storage.
    """
    for trial in trials:
        trial.experiment_path = experiment_path
        home = trial.local_path
        if home is None:
            continue
        if trial.error_file:
            trial.error_file = os.path.join(home, os.path.basename(trial.error_file))
        if trial.pickled_error_file:
            name = os.path.basename(trial.pickled_error_file)
            trial.pickled_error_file = os.path.join(home, name)
        if trial.checkpoint_manager is not None:
            trial.checkpoint_manager.trial_dir = home
