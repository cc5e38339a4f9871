"""Reading an experiment's state back from its files.

Base records, then the snapshot, then the journal, later records winning; trials the
state files lost are rebuilt from their folders (or, never started, from the configs
log); then the plugins' pickled states. The files are described in
:mod:`fasttune._internal.state_layout`; :mod:`fasttune._internal.experiment_state`
writes them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fasttune._internal.state_files import (
    file_stamp,
    load_pickle,
    load_search_state,
    read_configs,
    read_json_lines,
    read_json_lines_checked,
)
from fasttune._internal.state_framing import read_document
from fasttune._internal.state_layout import (
    BASE_FILE,
    CALLBACK_STATE_FILE,
    CONFIGS_FILE,
    FORMAT_VERSION,
    JOURNAL_FILE,
    READABLE_VERSIONS,
    SCHEDULER_STATE_FILE,
    SCHEDULER_STATE_FORMAT,
    SEARCH_STATE_FILE,
    SNAPSHOT_FILE,
    TUNER_FILE,
    positions_in_bitmap,
)
from fasttune._internal.state_recovery import pending_records, records_from_folders
from fasttune._support.gc_pause import paused_gc

logger = logging.getLogger(__name__)


@dataclass
class LoadedExperiment:
    """What :func:`load_state` found on disk."""

    meta: dict[str, Any] = field(default_factory=dict)
    trials: list[dict[str, Any]] = field(default_factory=list)
    configs: dict[str, Any] = field(default_factory=dict)
    search_state: Any = None
    search_num_trials: int = 0
    search_completed: frozenset[str] = frozenset()
    scheduler_state: Any = None
    # What the scheduler had seen when its state was saved: each then-unfinished
    # trial's last training_iteration, and how many trials existed (None: unknown).
    scheduler_seen: dict[str, int] | None = None
    scheduler_num_trials: int = 0
    callback_state: Any = None
    # Trials whose latest record is their line in the base file, when that file is
    # intact, in this format and without many superseded lines, and the file's stamp
    # (file_stamp) as read: a restored run that leaves them as they are need not write
    # them again while the file is unchanged (experiment_state.py).
    in_base: frozenset[str] = frozenset()
    base_stamp: tuple[int, int, int] | None = None


@paused_gc()
def load_state(
    path: str, *, pickles: bool = True, plugin_states: bool = True, folders_only: bool = False
) -> tuple[LoadedExperiment, int]:
    """Read the state files of the experiment at ``path``.

    Args:
        path: The experiment directory.
        pickles: Unpickle the configs log (and the plugins' states). Readers that
            only show the experiment pass False: the records are JSON, and nothing
            is unpickled (configs are left to the trial folders' ``params.json``).
        plugin_states: Unpickle the search, scheduler and callback states (a
            restore needs them; readers of results do not).
        folders_only: Accept a folder whose state files are all gone (the trials
            are rebuilt from their folders alone).

    Returns:
        What was found, its trials in creation order, and the journal's last sequence
        number (a writer continuing the experiment numbers its records after it).

    Raises:
        FileNotFoundError: There is no experiment state at this path.
    """
    snapshot_path = os.path.join(path, SNAPSHOT_FILE)
    present = {
        name
        for name in (SNAPSHOT_FILE, JOURNAL_FILE, BASE_FILE, TUNER_FILE, CONFIGS_FILE)
        if os.path.exists(os.path.join(path, name))
    }
    if not present and not folders_only:
        raise FileNotFoundError(
            f"No fasttune experiment state at {path!r} (expected {SNAPSHOT_FILE}). "
            "Pass the experiment directory, i.e. <storage_path>/<name>."
        )
    try:
        if not os.path.exists(snapshot_path):
            raise ValueError("it is missing")
        with open(snapshot_path, "rb") as f:
            document = read_document(f.read(), sealed_since=3)
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError: damaged
        if present & {SNAPSHOT_FILE, JOURNAL_FILE, BASE_FILE}:
            logger.warning(
                "%s is damaged or missing (%s): the experiment is rebuilt from its "
                "journal, its base records and its trial folders instead.",
                snapshot_path,
                e,
            )
        else:  # stopped before its first snapshot, or only trial folders are left
            logger.info("%s has no trial state files; reading its trial folders.", path)
        document = {"version": FORMAT_VERSION, "trials": [], "journal_seq": 0, "meta": {}}
    if document.get("version") not in READABLE_VERSIONS:
        raise ValueError(
            f"{snapshot_path} has state format version {document.get('version')}, but this "
            f"fasttune reads versions {READABLE_VERSIONS}."
        )
    # Base records, then the snapshot, then the journal: later records win.
    trials: dict[str, dict[str, Any]] = {}
    base_stamp = file_stamp(os.path.join(path, BASE_FILE))
    base, base_intact = read_json_lines_checked(os.path.join(path, BASE_FILE))
    if file_stamp(os.path.join(path, BASE_FILE)) != base_stamp:
        base_intact = False  # written while it was read
    for state in base:
        trials[state["trial_id"]] = state
    in_base: set[str] = set()
    if base_intact and document.get("version") == FORMAT_VERSION and len(base) < 2 * len(trials):
        in_base.update(trials)
    del base
    for state in document["trials"]:
        trials[state["trial_id"]] = state
        in_base.discard(state["trial_id"])
    snapshot_seq = int(document.get("journal_seq", 0))
    last_seq = snapshot_seq
    for entry in read_json_lines(os.path.join(path, JOURNAL_FILE)):
        if entry["seq"] <= snapshot_seq:
            continue
        last_seq = max(last_seq, entry["seq"])
        whole = entry.get("trial")
        if whole is not None:
            trials[whole["trial_id"]] = whole
            in_base.discard(whole["trial_id"])
            continue
        change = entry["change"]  # a trial's start: its status, start time, ending_told
        in_base.discard(change["trial_id"])
        changed = trials.get(change["trial_id"])
        if changed is not None:  # else its whole record was lost: rebuilt from its folder
            trials[change["trial_id"]] = {**changed, **change}
    configs = read_configs(os.path.join(path, CONFIGS_FILE)) if pickles else {}
    rebuilt = records_from_folders(path, set(trials))
    known = set(trials) | {r["trial_id"] for r in rebuilt}
    name = _any_trainable_name(trials, rebuilt, document)
    if pickles:
        rebuilt += pending_records(configs, known, trainable_name=name)
    if rebuilt:
        names = [r["trial_id"] for r in rebuilt]
        logger.warning(
            "%d trials of %s were missing from its state files (a damaged or deleted "
            "journal or snapshot) and were rebuilt from their folders (or, never "
            "started, from the configs log): %s",
            len(rebuilt),
            path,
            ", ".join(names[:10]) + (" ..." if len(names) > 10 else ""),
        )
        for record in rebuilt:
            trials[record["trial_id"]] = record
            in_base.discard(record["trial_id"])
    # Version 1 records carry no position: their order of first sight is creation order.
    first_seen = {trial_id: i for i, trial_id in enumerate(trials)}
    ordered = sorted(trials.values(), key=lambda t: t.get("pos", first_seen[t["trial_id"]]))
    loaded = LoadedExperiment(
        meta=document.get("meta", {}),
        trials=ordered,
        configs=configs,
        in_base=frozenset(in_base),
        base_stamp=base_stamp,
    )
    if pickles and plugin_states:
        _load_plugin_states(path, loaded)
    return loaded, last_seq


def _load_plugin_states(path: str, loaded: LoadedExperiment) -> None:
    ordered = loaded.trials
    search = load_search_state(os.path.join(path, SEARCH_STATE_FILE))
    if search is not None:
        loaded.search_state = search["state"]
        loaded.search_num_trials = int(search["num_trials"])
        if "completed_bits" in search:
            loaded.search_completed = frozenset(
                ordered[pos]["trial_id"]
                for pos in positions_in_bitmap(search["completed_bits"])
                if pos < len(ordered)
            )
        else:  # version 1: a list of ids
            loaded.search_completed = frozenset(search.get("completed", ()))
    scheduler = load_pickle(os.path.join(path, SCHEDULER_STATE_FILE))
    if isinstance(scheduler, dict) and scheduler.get("format") == SCHEDULER_STATE_FORMAT:
        loaded.scheduler_state = scheduler["state"]
        loaded.scheduler_seen = dict(scheduler["seen"])
        loaded.scheduler_num_trials = int(scheduler["num_trials"])
    else:  # saved before format 2: the state alone
        loaded.scheduler_state = scheduler
    loaded.callback_state = load_pickle(os.path.join(path, CALLBACK_STATE_FILE))


def _any_trainable_name(
    trials: dict[str, dict[str, Any]], rebuilt: list[dict[str, Any]], document: dict[str, Any]
) -> str:
    for record in (*trials.values(), *rebuilt):
        return str(record["trainable_name"])
    return str(document.get("meta", {}).get("trainable_name") or "trainable")


@paused_gc()
def load_trials(
    experiment_path: str,
    *,
    trials_path: str | None = None,
    read_config: Callable[[str], dict[str, Any]] | None = None,
) -> list[Any]:
    """Rebuild the ``Trial`` records of an experiment from its state files.

    The plugins' pickled states are never read here.

    Args:
        experiment_path: The local directory holding the state files.
        trials_path: The experiment directory the trials live in, when it is not
            ``experiment_path`` (remote state downloaded to a local directory).
        read_config: Reads a trial's config from its folder name (e.g. its
            ``params.json``): given, nothing is unpickled; else the configs log (or
            each trial's ``params.pkl``) gives the exact configs.
    """
    # Here, not at the top: a run writes state files but rebuilds no Trial from them.
    from fasttune._internal.trial_state import trial_from_state

    pickles = read_config is None
    loaded, _ = load_state(experiment_path, pickles=pickles, plugin_states=False)
    home = trials_path or experiment_path
    trials = []
    for state in loaded.trials:
        if read_config is None:
            config = loaded.configs.get(state["trial_id"])
        else:
            folder = state.get("relative_logdir")
            config = read_config(folder) if folder else {}
        trials.append(trial_from_state(state, home, config=config))
    return trials
