"""PBT's policy log (as Ray Tune writes it) and reading it back for a replay.

Each exploit appends one JSON line ``[target tag, donor tag, target iteration, donor
iteration, donor config, new config]`` to ``pbt_global.txt`` in the experiment
directory. The target's ``pbt_policy_<trial_id>.txt`` becomes the donor's policy
file plus that line, so it holds the whole lineage of config changes of the model
the target now trains.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from fasttune._support.encoding import SafeFallbackEncoder
from fasttune.storage.filesystem import atomic_write_text

logger = logging.getLogger(__name__)

GLOBAL_FILE = "pbt_global.txt"


def policy_file_name(trial_id: str) -> str:
    """``pbt_policy_<trial_id>.txt``.

    Example:
        >>> policy_file_name("abc12_00003")
        'pbt_policy_abc12_00003.txt'
    """
    return f"pbt_policy_{trial_id}.txt"


def log_exploit(experiment_path: str | None, target_id: str, donor_id: str, row: list[Any]) -> None:
    """Record one exploit in the global log and in the target's policy file.

    Nothing is written without an experiment directory; a failed write is logged.
    """
    if experiment_path is None:
        return
    try:
        _append(experiment_path, target_id, donor_id, row)
    except OSError as exc:
        logger.warning("Could not write the PBT policy log: %s", exc)


def _append(experiment_path: str, target_id: str, donor_id: str, row: list[Any]) -> None:
    line = json.dumps(row, cls=SafeFallbackEncoder) + "\n"
    os.makedirs(experiment_path, exist_ok=True)
    with open(os.path.join(experiment_path, GLOBAL_FILE), "a") as f:
        f.write(line)
    target = os.path.join(experiment_path, policy_file_name(target_id))
    donor = os.path.join(experiment_path, policy_file_name(donor_id))
    # The target now trains the donor's model: it inherits the donor's history.
    source = donor if os.path.exists(donor) else target
    previous = ""
    if os.path.exists(source):
        with open(source) as f:
            previous = f.read()
    atomic_write_text(target, previous + line, durable=False)


def load_policy(policy_file: str) -> tuple[dict[str, Any] | None, list[tuple[int, dict[str, Any]]]]:
    """The initial config and the ``(iteration, new config)`` changes of a policy file.

    Lines are read from the last one back while each line's target is the donor of
    the line after it; an older line that breaks this chain belonged to a model
    that was overwritten later, so it and the lines before it are ignored.

    Raises:
        ValueError: A line is not JSON.

    Example:
        >>> import json, tempfile
        >>> rows = [["b", "a", 3, 4, {"lr": 1}, {"lr": 2}], ["c", "b", 5, 8, {"lr": 2}, {"lr": 3}]]
        >>> with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        ...     _ = f.write("\\n".join(json.dumps(r) for r in rows))
        >>> load_policy(f.name)
        ({'lr': 1}, [(4, {'lr': 2}), (8, {'lr': 3})])
    """
    rows: list[list[Any]] = []
    with open(policy_file) as f:
        for raw in f:
            if not raw.strip():
                continue
            try:
                rows.append(json.loads(raw))
            except json.JSONDecodeError:
                raise ValueError(f"Could not read PBT policy file: {policy_file}.") from None
    policy: list[tuple[int, dict[str, Any]]] = []
    initial: dict[str, Any] | None = None
    donor_of_next: str | None = None
    for target_tag, donor_tag, _target_step, donor_step, donor_conf, new_conf in reversed(rows):
        if donor_of_next is not None and target_tag != donor_of_next:
            break
        donor_of_next = donor_tag
        initial = donor_conf
        policy.append((donor_step, new_conf))
    return initial, list(reversed(policy))
