"""Reading what a trial left in its directory: results, config, checkpoints, error.

Every read goes through a :class:`~fasttune.storage.FileSystem`, so the same code
serves local and remote (fsspec) experiment directories. pandas is not needed here.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

from fasttune import result as R
from fasttune.error import TrialError
from fasttune.storage.filesystem import FileSystem

logger = logging.getLogger(__name__)

STATE_FILE = ".trainable_state.pkl"  # written beside every checkpoint by the Trainable
_INT = re.compile(r"[-+]?\d+")
_MISSING = object()

SOURCE_JSON = "json"
SOURCE_CSV = "csv"


# ---------------------------------------------------------------------------- paths
def resolve_filesystem(
    path: str | os.PathLike[str],
    filesystem: Any,
    *,
    owner: str = "ExperimentAnalysis",
    param: str = "experiment_checkpoint_path",
) -> tuple[FileSystem, str]:
    """The filesystem serving ``path`` (given: fasttune, fsspec or pyarrow; or inferred
    from it) and the path within it (see :func:`fasttune.storage.location.filesystem_and_path`).

    Raises:
        TypeError: ``filesystem`` is not a filesystem.
    """
    from fasttune.storage.location import filesystem_and_path

    return filesystem_and_path(path, filesystem, owner=owner, param=param)


# ---------------------------------------------------------------------------- lookups
def lookup(metrics: Mapping[str, Any] | None, key: str, default: Any = None) -> Any:
    """``metrics[key]``, where ``key`` may name a nested value as ``"a/b"``.

    A flat key that exists wins over the nested path (CSV rows are already flat).

    >>> lookup({"a": {"b": 1}, "c/d": 2}, "a/b"), lookup({"c/d": 2}, "c/d")
    (1, 2)
    """
    if not metrics:
        return default
    if key in metrics:
        return metrics[key]
    node: Any = metrics
    for part in key.split("/"):
        if not isinstance(node, Mapping) or part not in node:
            return default
        node = node[part]
    return node


def as_number(value: Any) -> float | int | None:
    """``value`` if it is a real number (bools excluded), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        # numpy scalars are numbers.Real but not int/float: accept via float().
        if type(value).__module__ == "numpy" and hasattr(value, "item"):
            return as_number(value.item())
        return None
    return value


def is_finite(value: float) -> bool:
    return not (math.isnan(value) or math.isinf(value))


# ---------------------------------------------------------------------------- results
def read_results(fs: FileSystem, trial_path: str) -> tuple[list[dict[str, Any]], str | None]:
    """All results of a trial, oldest first, and where they came from.

    Reads ``result.json`` (one JSON object per line) or, when it is missing,
    ``progress.csv`` (flat keys; numbers parsed, empty cells left out).

    Returns:
        ``(results, "json" | "csv")``, or ``([], None)`` when neither file exists.

    Raises:
        ValueError: A line that is not a JSON object (other than a last line cut
            short by a crash, which is skipped with a warning); the message names the
            file and line.
    """
    json_path = fs.join(trial_path, R.EXPR_RESULT_FILE)
    if fs.exists(json_path):
        return _parse_json_lines(fs.read_bytes(json_path), json_path), SOURCE_JSON
    csv_path = fs.join(trial_path, R.EXPR_PROGRESS_FILE)
    if fs.exists(csv_path):
        return _parse_csv(fs.read_bytes(csv_path), csv_path), SOURCE_CSV
    return [], None


def read_last_result(fs: FileSystem, trial_path: str) -> dict[str, Any] | None:
    """A trial's last result, parsing only the last line of ``result.json``.

    Data frames of many trials need one row each; parsing every line cost ten times
    more. Falls back to :func:`read_results` for ``progress.csv``.
    """
    return read_last_results(fs, [trial_path])[trial_path]


# How much of the end of each result.json is read for its last line: a result line is
# ~1 KB; a longer one (or a longer file whose tail holds no whole line) is read whole.
_TAIL_BYTES = 1 << 14


def read_last_results(
    fs: FileSystem, trial_paths: Sequence[str]
) -> dict[str, dict[str, Any] | None]:
    """:func:`read_last_result` of each trial directory in ``trial_paths``, by path.

    Only the end of each ``result.json`` is read (a data frame of trials with long
    histories read all of them before), and all of them at once: concurrently from
    object stores, without a lookup before each read on local disks.
    """
    json_paths = {path: fs.join(path, R.EXPR_RESULT_FILE) for path in trial_paths}
    tails = fs.read_tails(list(json_paths.values()), _TAIL_BYTES)
    out: dict[str, dict[str, Any] | None] = {}
    for path, json_path in json_paths.items():
        tail = tails.get(json_path)
        if tail is None:  # no result.json: progress.csv, or nothing
            results, _ = read_results(fs, path)
            out[path] = results[-1] if results else None
            continue
        line = _last_line(tail, whole=len(tail) < _TAIL_BYTES)
        if line is _NOT_IN_TAIL:
            line = _last_line(fs.read_bytes(json_path), whole=True)
        out[path] = None if line is None else _parse_json_lines(line, json_path)[0]
    return out


_NOT_IN_TAIL = b"<not in the tail>"

# How much of the start of each progress.csv is read for its header; a longer header
# means the file is read whole.
_HEAD_BYTES = 1 << 16


def read_csv_headers(fs: FileSystem, trial_paths: Sequence[str]) -> dict[str, list[str]]:
    """The columns of each trial directory's ``progress.csv``, by path (none for a trial
    without one): every key its results reported, flattened with ``/`` (the writer
    extends the header when a new key comes), the config left out. Only the start of
    each file is read, all of them at once (concurrently from object stores)."""
    csv_paths = {path: fs.join(path, R.EXPR_PROGRESS_FILE) for path in trial_paths}
    heads = fs.read_heads(list(csv_paths.values()), _HEAD_BYTES)
    out: dict[str, list[str]] = {}
    for path, csv_path in csv_paths.items():
        head = heads.get(csv_path)
        if head is None:
            continue
        end = head.find(b"\n")
        if end < 0:
            if len(head) < _HEAD_BYTES:
                continue  # a header cut by a crash: not one to go by
            head = fs.read_bytes(csv_path)
            end = head.find(b"\n")
            if end < 0:
                continue
        try:
            out[path] = next(csv.reader(io.StringIO(head[:end].decode("utf-8", "replace"))))
        except (csv.Error, StopIteration):
            continue
    return out


def _last_line(data: bytes, *, whole: bool) -> bytes | None:
    """The last whole line of ``data`` (the end of a file; the file itself if
    ``whole``), None if it has none, or ``_NOT_IN_TAIL`` if its start may lie before
    ``data``. A last line without its newline was torn by a crash: the one before
    counts."""
    end = len(data)
    while end > 0:
        cut = data.rfind(b"\n", 0, end - 1)
        if cut < 0 and not whole:
            return _NOT_IN_TAIL
        start = cut + 1
        line = data[start:end]
        if line.strip() and line.endswith(b"\n"):
            return line
        end = start
    return None


def _parse_json_lines(data: bytes, path: str) -> list[dict[str, Any]]:
    lines = data.split(b"\n")
    torn = bool(lines) and lines[-1].strip() != b""  # no newline after the last line
    results: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as e:
            if torn and number == len(lines):
                logger.warning("Ignoring an incomplete last line in %s", path)
                break
            raise ValueError(
                f"{path}, line {number}: not valid JSON ({e}). The results file is "
                "corrupt; fix or remove that line."
            ) from e
        if not isinstance(value, dict):
            raise ValueError(
                f"{path}, line {number}: expected a JSON object (one result per line), "
                f"got {type(value).__name__}."
            )
        results.append(value)
    return results


def _parse_cell(key: str, text: str) -> Any:
    if text == "":
        return _MISSING
    if key == R.TRIAL_ID:
        return text  # ids like "00001" stay strings
    if _INT.fullmatch(text):
        return int(text)
    if "_" not in text:
        try:
            return float(text)
        except ValueError:
            pass
    if text in ("True", "False"):
        return text == "True"
    return text


def _parse_csv(data: bytes, path: str) -> list[dict[str, Any]]:
    text = data.decode("utf-8", "replace")
    if text and not text.endswith("\n"):
        logger.warning("Ignoring an incomplete last row in %s", path)
        text = text[: text.rfind("\n") + 1]
    reader = csv.reader(io.StringIO(text))
    try:
        rows = list(reader)
    except csv.Error as e:
        raise ValueError(f"{path}, line {reader.line_num}: cannot parse ({e}).") from e
    if not rows:
        return []
    header, results = rows[0], []
    for number, row in enumerate(rows[1:], start=2):
        if len(row) > len(header):
            raise ValueError(
                f"{path}, line {number}: {len(row)} cells under a header of "
                f"{len(header)} columns; the file is corrupt."
            )
        parsed = {}
        for key, cell in zip(header, row):
            value = _parse_cell(key, cell)
            if value is not _MISSING:
                parsed[key] = value
        results.append(parsed)
    return results


# ---------------------------------------------------------------------------- config
def read_config(fs: FileSystem, trial_path: str, *, pickles: bool = True) -> dict[str, Any]:
    """The trial's config: ``params.pkl`` (exact), else ``params.json``, else ``{}``.

    A ``params.pkl`` that cannot be unpickled here (say, its config holds a class
    from a module this process cannot import) falls back to ``params.json`` with a
    warning. With ``pickles=False`` only ``params.json`` is read (display: nothing
    is unpickled).

    Raises:
        ValueError: ``params.json`` is needed but is not valid JSON.
    """
    pkl_path = fs.join(trial_path, R.EXPR_PARAM_PICKLE_FILE)
    if pickles and fs.exists(pkl_path):
        import cloudpickle

        try:
            config = cloudpickle.loads(fs.read_bytes(pkl_path))
        except Exception as e:
            logger.warning("Cannot unpickle %s (%r); reading params.json instead.", pkl_path, e)
        else:
            if isinstance(config, dict):
                return config
            logger.warning("%s holds a %s, not a dict; ignoring it.", pkl_path, type(config))
    json_path = fs.join(trial_path, R.EXPR_PARAM_FILE)
    if not fs.exists(json_path):
        return {}
    return _parse_config(fs.read_bytes(json_path), json_path)


def read_json_configs(
    fs: FileSystem, experiment_path: str, folders: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """The ``params.json`` configs of many trial folders at once, by folder name.

    Folders without one are left out. On an object store the files are fetched
    concurrently (1,000 trials: one batch, not 2,000 requests one after another).

    Raises:
        ValueError: A ``params.json`` is not a JSON object.
    """
    by_path = {fs.join(experiment_path, folder, R.EXPR_PARAM_FILE): folder for folder in folders}
    found = fs.read_many(list(by_path))
    return {by_path[path]: _parse_config(data, path) for path, data in found.items()}


def _parse_config(data: bytes, json_path: str) -> dict[str, Any]:
    try:
        config = json.loads(data.decode("utf-8"))
    except ValueError as e:
        raise ValueError(f"{json_path}: not valid JSON ({e}).") from e
    if not isinstance(config, dict):
        raise ValueError(f"{json_path}: expected a JSON object, got {type(config).__name__}.")
    return config


# ---------------------------------------------------------------------------- errors
def read_error(
    fs: FileSystem,
    trial_path: str | None,
    error_file: str | None = None,
    pickled_error_file: str | None = None,
) -> BaseException | None:
    """The trial's error: the pickled exception if there is one, else a ``TrialError``.

    Args:
        fs: Filesystem of the trial directory.
        trial_path: The trial directory (``error.pkl``/``error.txt`` are looked for
            there when the explicit files are not given or missing).
        error_file: Path of the text report, if known.
        pickled_error_file: Path of the pickled exception, if known.
    """
    candidates_pkl = [pickled_error_file]
    candidates_txt = [error_file]
    if trial_path:
        candidates_pkl.append(fs.join(trial_path, R.EXPR_ERROR_PICKLE_FILE))
        candidates_txt.append(fs.join(trial_path, R.EXPR_ERROR_FILE))
    for path in filter(None, candidates_pkl):
        if fs.exists(path):
            import cloudpickle

            try:
                error = cloudpickle.loads(fs.read_bytes(path))
            except Exception as e:
                logger.warning("Cannot unpickle %s (%r); using the text report.", path, e)
                break
            if isinstance(error, BaseException):
                return error
            break
    for path in filter(None, candidates_txt):
        if fs.exists(path):
            return TrialError(fs.read_text(path), path=path)
    return None


# ---------------------------------------------------------------------------- checkpoints
def checkpoint_dir_names(fs: FileSystem, trial_path: str) -> list[str]:
    """``checkpoint_NNNNNN`` subdirectories, by index; staging and hidden dirs ignored."""
    from fasttune.trainable.checkpoint_io import CHECKPOINT_DIR_PATTERN

    try:
        names = fs.listdir(trial_path)
    except FileNotFoundError:
        return []
    found = [
        (int(match.group(1)), name)
        for name in names
        if (match := CHECKPOINT_DIR_PATTERN.fullmatch(name)) and fs.isdir(fs.join(trial_path, name))
    ]
    return [name for _, name in sorted(found)]


def _read_state(fs: FileSystem, checkpoint_path: str) -> dict[str, Any] | None:
    path = fs.join(checkpoint_path, STATE_FILE)
    if not fs.exists(path):
        return None
    import cloudpickle

    try:
        state = cloudpickle.loads(fs.read_bytes(path))
    except Exception as e:  # a class in the last result that this process cannot import
        logger.warning("Cannot unpickle %s (%r); using result.json for its metrics.", path, e)
        return None
    return state if isinstance(state, dict) else None


def checkpoint_metrics(
    fs: FileSystem, trial_path: str, dir_name: str, results: list[dict[str, Any]]
) -> dict[str, Any]:
    """The metrics of the result a checkpoint was taken at.

    In order: the last result naming the checkpoint in ``checkpoint_dir_name``;
    the ``last_result`` saved in the checkpoint's trainable state; the result whose
    ``training_iteration`` matches the state's iteration (or the directory index).
    """
    for result in reversed(results):
        if result.get(R.CHECKPOINT_DIR_NAME) == dir_name:
            return dict(result)
    state = _read_state(fs, fs.join(trial_path, dir_name))
    if state and isinstance(state.get("last_result"), dict) and state["last_result"]:
        return dict(state["last_result"])
    index = int(dir_name.rsplit("_", 1)[1])
    iteration = state.get("iteration", index) if state else index
    for result in reversed(results):
        if result.get(R.TRAINING_ITERATION) == iteration:
            return dict(result)
    logger.warning("No metrics found for %s in %s.", dir_name, trial_path)
    return {}


def read_checkpoints(
    fs: FileSystem, trial_path: str, results: list[dict[str, Any]]
) -> list[tuple[str, dict[str, Any]]]:
    """``(dir_name, metrics)`` for each checkpoint directory of the trial, by index."""
    return [
        (name, checkpoint_metrics(fs, trial_path, name, results))
        for name in checkpoint_dir_names(fs, trial_path)
    ]
