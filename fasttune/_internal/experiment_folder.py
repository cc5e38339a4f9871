"""An experiment's folder as the ``Tuner`` finds it: an earlier run to keep apart, cut
writes to clear, or trial folders whose state files were lost."""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from fasttune.tune_config import TuneConfig

logger = logging.getLogger("fasttune.tuner")


def saved_from_folders(store: Any) -> dict[str, Any]:
    """What ``tuner.pkl`` would have given a restore, from the state files and trial
    folders that are left: the trials and their id prefix, the metric and mode a
    snapshot kept; the plugins' saved states are left out (the plugins that saved
    them were in ``tuner.pkl``)."""
    loaded = store.load(folders_only=True)
    if not loaded.trials:
        raise ValueError(
            f"Tuner.restore(path={store.path!r}): neither tuner.pkl nor any trial folder is "
            "there: nothing to continue. Start the experiment again with Tuner(...).fit()."
        )
    loaded.search_state = loaded.scheduler_state = loaded.callback_state = None
    loaded.scheduler_seen = None
    meta = loaded.meta
    tune_config = TuneConfig(metric=meta.get("metric"), mode=meta.get("mode"))
    logger.warning(
        "%s has no tuner.pkl: its %d trials were rebuilt from their state records and "
        "folders and go on with the trainable and param_space given. The run's TuneConfig "
        "(num_samples, search algorithm, scheduler) and RunConfig (stop, callbacks, "
        "checkpoint and failure settings) were in tuner.pkl and are lost: the defaults "
        "apply%s, so only the trials found (and what the param_space's grid asks for) run.",
        store.path,
        len(loaded.trials),
        f" (metric={meta['metric']!r}, mode={meta.get('mode')!r} from the snapshot)"
        if meta.get("metric")
        else "",
    )
    return {
        "tune_config": tune_config,
        "experiment_hash": loaded.trials[0]["trial_id"].rsplit("_", 1)[0],
        "loaded": loaded,
    }


def has_state_but_no_tuner(path: str) -> bool:
    from fasttune._internal.state_layout import BASE_FILE, JOURNAL_FILE, SNAPSHOT_FILE, TUNER_FILE
    from fasttune._internal.state_recovery import has_trial_folder

    if os.path.exists(os.path.join(path, TUNER_FILE)):
        return False
    return any(
        os.path.exists(os.path.join(path, name))
        for name in (SNAPSHOT_FILE, JOURNAL_FILE, BASE_FILE)
    ) or has_trial_folder(path)


def remove_cut_writes(path: str) -> None:
    """Remove the temp files of state writes a killed driver left unfinished
    (``.tuner.pkl.<id>.tmp``...): with the lock held, nothing else writes them."""
    from fasttune._internal.state_layout import STATE_FILES

    try:
        names = os.listdir(path)
    except FileNotFoundError:
        return
    for name in names:
        # (and of the storage's write probe, ``.write_test_<id>``)
        ours = (*(f".{f}." for f in STATE_FILES), "..write_test_")
        if name.endswith(".tmp") and name.startswith(ours):
            try:
                os.remove(os.path.join(path, name))
            except FileNotFoundError:
                pass


def holds_results(path: str) -> bool:
    """Whether ``path`` holds what an earlier run made: a state file besides
    ``tuner.pkl``, or trial folders whose state files were lost (they restore too).

    A lone ``tuner.pkl`` (a ``Tuner`` built but never run, or a run killed before its
    first trial) holds nothing a new run could lose.
    """
    from fasttune._internal.state_layout import STATE_FILES, TUNER_FILE
    from fasttune._internal.state_recovery import has_trial_folder

    return any(
        os.path.exists(os.path.join(path, name)) for name in STATE_FILES if name != TUNER_FILE
    ) or has_trial_folder(path)


def move_earlier_run_aside(path: str) -> str:
    """Keep the earlier run found in ``path`` reachable: move it to a dated sibling.

    A new ``fit()`` with the same ``RunConfig(name=...)`` would otherwise overwrite its
    state and leave it impossible to restore. Returns where it went.
    """
    from datetime import datetime

    from fasttune._internal.state_layout import SNAPSHOT_FILE, TUNER_FILE

    stamps = [
        os.path.getmtime(os.path.join(path, name))
        for name in (TUNER_FILE, SNAPSHOT_FILE)
        if os.path.exists(os.path.join(path, name))
    ]
    stamp = datetime.fromtimestamp(min(stamps) if stamps else time.time())
    base = f"{path.rstrip(os.sep)}_{stamp:%Y-%m-%d_%H-%M-%S}"
    target, n = base, 1
    while os.path.exists(target):
        n += 1
        target = f"{base}_{n}"
    had_tuner = os.path.exists(os.path.join(path, TUNER_FILE))
    os.rename(path, target)
    os.makedirs(path)
    logger.warning(
        "%s held an earlier run of this experiment; it was moved to %s so that this new "
        "run cannot overwrite it. To continue that run instead: Tuner.restore(%r, "
        "trainable=...%s).fit(); to keep runs apart, give each its own RunConfig(name=...).",
        path,
        target,
        target,
        "" if had_tuner else ", param_space=... (its tuner.pkl is missing)",
    )
    return target
