"""Trial records rebuilt from trial folders, for experiments whose state files are damaged.

A trial's folder holds what it needs to be shown and resumed: its config
(``params.pkl``, else ``params.json``), its results (``result.json``) and its
checkpoints (``checkpoint_NNNNNN/``). When the state files lost a trial (a deleted
journal, an unreadable snapshot), the record built here takes its place: status
TERMINATED when its last result says ``done``, else RUNNING (a restore resumes it from
its newest checkpoint), position by its trial-id counter.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from fasttune import result as R
from fasttune.experiment.trial import MAX_DIRNAME_LENGTH

_TRIAL_ID = re.compile(r"(?:^|_)([0-9a-f]{5}_(\d{5}))(?:_|$)")


def records_from_folders(experiment_path: str, known: set[str]) -> list[dict[str, Any]]:
    """State records of the trial folders in ``experiment_path`` whose trial id is not in
    ``known``, in trial-id order."""
    records = []
    try:
        entries = sorted(os.scandir(experiment_path), key=lambda e: e.name)
    except FileNotFoundError:
        return []
    for entry in entries:
        if not entry.is_dir() or entry.name.startswith("."):
            continue
        match = _TRIAL_ID.search(entry.name)
        if match is not None and match.group(1) in known:
            continue  # known: its folder is not read (restores stay O(1) per trial)
        record = _record_of(entry.path, entry.name)
        if record is not None and record["trial_id"] not in known:
            records.append(record)
    records.sort(key=lambda r: r["pos"])
    return records


def has_trial_folder(experiment_path: str) -> bool:
    """Whether ``experiment_path`` holds at least one trial folder (stops at the first)."""
    try:
        entries = os.scandir(experiment_path)
    except (FileNotFoundError, NotADirectoryError):
        return False
    with entries:
        for entry in entries:
            folder = entry.is_dir() and not entry.name.startswith(".")
            if folder and _record_of(entry.path, entry.name) is not None:
                return True
    return False


def pending_records(
    configs: dict[str, Any], known: set[str], *, trainable_name: str
) -> list[dict[str, Any]]:
    """PENDING records for trials the configs log has and nothing else knows: created
    (their config logged) but lost from the state before they ever started."""
    records: list[dict[str, Any]] = []
    for trial_id in configs:
        if trial_id in known:
            continue
        match = re.fullmatch(r".+_(\d+)", trial_id)
        records.append(
            {
                "trainable_name": trainable_name,
                "trial_id": trial_id,
                "status": "PENDING",
                "relative_logdir": None,
                "pos": int(match.group(1)) if match else 0,
                "rebuilt_from_folder": True,
            }
        )
    records.sort(key=lambda r: r["pos"])
    return records


def _record_of(trial_dir: str, dirname: str) -> dict[str, Any] | None:
    results = _results(os.path.join(trial_dir, R.EXPR_RESULT_FILE))
    has_params = os.path.exists(os.path.join(trial_dir, R.EXPR_PARAM_FILE))
    if not results and not has_params:
        return None  # not a trial folder
    last = results[-1] if results else {}
    trial_id = last.get(R.TRIAL_ID)
    match = _TRIAL_ID.search(dirname)
    if not isinstance(trial_id, str):
        if match is None:
            return None
        trial_id = match.group(1)
    counter = int(trial_id.rsplit("_", 1)[-1]) if re.fullmatch(r".+_\d+", trial_id) else 0
    trainable_name, _, after_id = dirname.partition(f"_{trial_id}")
    # Its tag: from its results, else from its folder's name (<trainable>_<id>_<tag>, made
    # safe for a file name) for a trial that failed before reporting; not from a name
    # cut at the longest a folder name may be (its tag would be cut too).
    tag = last.get(R.EXPERIMENT_TAG)
    if not isinstance(tag, str):
        whole = len(dirname) < MAX_DIRNAME_LENGTH
        tag = after_id[1:] if whole and after_id.startswith("_") else ""
    by_iteration = {r.get(R.TRAINING_ITERATION): r for r in results}
    checkpoints = []
    for order, name in enumerate(sorted(_checkpoint_dirs(trial_dir)), start=1):
        iteration = _checkpoint_iteration(trial_dir, name)
        metrics = {k: v for k, v in by_iteration.get(iteration, {}).items() if k != R.CONFIG}
        checkpoints.append({"dir_name": name, "metrics": metrics, "order": order})
    done = bool(last.get(R.DONE))
    return {
        "trainable_name": trainable_name,
        "trial_id": trial_id,
        "experiment_tag": tag,
        "status": "TERMINATED" if done else "RUNNING",
        "relative_logdir": dirname,
        "results_count": len(results),
        "checkpoints": {"order": len(checkpoints), "checkpoints": checkpoints},
        "last_result": {k: v for k, v in last.items() if k != R.CONFIG},
        "pos": counter,
        "rebuilt_from_folder": True,
    }


def _results(path: str) -> list[dict[str, Any]]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    results = []
    for line in data.split(b"\n"):
        if line.strip():
            try:
                results.append(json.loads(line))
            except ValueError:
                continue  # a torn or damaged line
    return results


def _checkpoint_dirs(trial_dir: str) -> list[str]:
    from fasttune.trainable.checkpoint_io import CHECKPOINT_DIR_PATTERN

    return [name for name in os.listdir(trial_dir) if CHECKPOINT_DIR_PATTERN.fullmatch(name)]


def _checkpoint_iteration(trial_dir: str, name: str) -> int | None:
    """The iteration a checkpoint was taken at, from its saved trainable state."""
    from fasttune.trainable.checkpoint_io import read_state

    try:
        state = read_state(os.path.join(trial_dir, name)) or {}
    except Exception:  # a damaged checkpoint: keep it listed, without metrics
        return None
    iteration = state.get("iteration")
    return int(iteration) if isinstance(iteration, int) else None
