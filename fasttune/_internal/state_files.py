"""Reading the experiment's state files, each checked: what a damaged file lost is said
(the file, the records read and lost), and a damaged pickle is never loaded into wrong
values."""

from __future__ import annotations

import logging
import os
from typing import Any

import cloudpickle

from fasttune._internal.search_state_log import is_search_log, last_search_record
from fasttune._internal.state_framing import (
    DamagedStateError,
    open_pickle,
    read_blobs,
    read_lines,
)

logger = logging.getLogger(__name__)


def read_file(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def file_stamp(path: str) -> tuple[int, int, int] | None:
    """What tells one version of a file from another: inode, size, modification time
    (None if it is missing)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def read_json_lines(path: str) -> list[dict[str, Any]]:
    """The records of a line-framed state log; damaged lines are skipped, a torn last
    one dropped, and what was lost is said (the file, the records read and lost)."""
    return read_json_lines_checked(path)[0]


def read_json_lines_checked(path: str) -> tuple[list[dict[str, Any]], bool]:
    """:func:`read_json_lines`, and whether nothing was lost (a missing file: True)."""
    data = read_file(path)
    if not data:
        return [], True
    read = read_lines(data)
    loss = read.loss(path)
    if loss is not None:
        logger.warning(
            "%s Each record is a whole trial state, so the intact ones were applied; a "
            "trial whose latest state was lost resumes from its state before (or its folder).",
            loss,
        )
    return read.records, loss is None


def read_configs(path: str) -> dict[str, Any]:
    """The configs log: each trial's latest config, up to the first damaged record."""
    configs: dict[str, Any] = {}
    data = read_file(path)
    if not data:
        return configs
    read = read_blobs(data)
    for blob in read.records:
        trial_id, config = cloudpickle.loads(blob)
        configs[trial_id] = config
    loss = read.loss(path)
    if loss is not None:
        logger.warning(
            "%s Trials that had started keep their config (their params.pkl); a trial "
            "never started whose config was lost ends in ERROR saying so.",
            loss,
        )
    return configs


def load_search_state(path: str) -> Any:
    """The newest search state: the log's last whole record, or the single pickle an
    earlier version wrote; None when missing or damaged (said, as for load_pickle)."""
    data = read_file(path)
    if data is None or not is_search_log(data):
        return load_pickle(path)
    try:
        record = last_search_record(data)
        return None if record is None else cloudpickle.loads(record)
    except Exception as e:  # a failed checksum
        logger.warning("%s is damaged (%s: %s) and was not restored.", path, type(e).__name__, e)
        return None


def load_pickle(path: str, *, damaged_ok: bool = True) -> Any:
    """The object pickled in ``path``; None when missing, or damaged and ``damaged_ok``
    (a plugin's state: the run goes on without it, and says so).

    A damaged file (its checksum fails, or a bare pickle written before checksums fails
    to load) is never unpickled into wrong values.

    Raises:
        DamagedStateError: Damaged, and not ``damaged_ok``.
    """
    data = read_file(path)
    if data is None:
        return None
    try:
        return cloudpickle.loads(open_pickle(data))
    except Exception as e:  # a failed checksum; UnpicklingError, EOFError from a bare one
        if not damaged_ok:
            raise DamagedStateError(f"{path} is damaged ({type(e).__name__}: {e})") from e
        logger.warning("%s is damaged (%s: %s) and was not restored.", path, type(e).__name__, e)
        return None
