"""On-disk format of a Trainable checkpoint.

A checkpoint directory holds whatever ``save_checkpoint`` wrote, plus:
- ``.trainable_state.pkl``: the Trainable's own counters and last result, and how
  to hand the user's payload back (files, a dict, or a path inside the dir);
- ``dict_checkpoint.pkl``: the dict returned by ``save_checkpoint``, if any.
"""

from __future__ import annotations

import io
import os
import re
from typing import Any

import cloudpickle

from fasttune.storage.filesystem import atomic_write_bytes

STATE_FILE = ".trainable_state.pkl"
DICT_FILE = "dict_checkpoint.pkl"

# How the payload of save_checkpoint was returned.
PAYLOAD_FILES = "files"
PAYLOAD_DICT = "dict"
PAYLOAD_PATH = "path"
PAYLOAD_NONE = "none"  # a function trainable saved before it reported any checkpoint


# A checkpoint folder's name (checkpoint_dir_name), its index the group.
CHECKPOINT_DIR_PATTERN = re.compile(r"checkpoint_(\d+)")


def checkpoint_dir_name(index: int) -> str:
    """``checkpoint_000003`` for index 3."""
    return f"checkpoint_{index:06d}"


def store_payload(checkpoint_dir: str, returned: Any) -> tuple[str, str]:
    """Record what ``save_checkpoint`` returned; return (kind, relative path)."""
    if returned is None or (
        isinstance(returned, (str, os.PathLike))
        and os.path.abspath(returned) == os.path.abspath(checkpoint_dir)
    ):
        return PAYLOAD_FILES, ""
    if isinstance(returned, dict):
        atomic_write_bytes(os.path.join(checkpoint_dir, DICT_FILE), cloudpickle.dumps(returned))
        return PAYLOAD_DICT, ""
    if isinstance(returned, (str, os.PathLike)):
        path = os.path.abspath(os.fspath(returned))
        root = os.path.abspath(checkpoint_dir)
        if os.path.commonpath([path, root]) != root:
            raise ValueError(
                f"save_checkpoint() returned the path {path!r}, which is outside the "
                f"checkpoint directory {root!r} it was given. Write your files into that "
                "directory and return None (or a path inside it)."
            )
        return PAYLOAD_PATH, os.path.relpath(path, root)
    raise TypeError(
        f"save_checkpoint() must return None, a dict or a path inside the checkpoint "
        f"directory; it returned {type(returned).__name__}: {returned!r}"
    )


def load_payload(checkpoint_dir: str, kind: str, relative_path: str) -> Any:
    """What ``load_checkpoint`` receives for a checkpoint at ``checkpoint_dir``."""
    if kind == PAYLOAD_DICT:
        with open(os.path.join(checkpoint_dir, DICT_FILE), "rb") as f:
            return cloudpickle.load(f)
    if kind == PAYLOAD_PATH:
        return os.path.join(checkpoint_dir, relative_path)
    if kind == PAYLOAD_NONE:
        return None
    return checkpoint_dir


def write_state(checkpoint_dir: str, state: dict[str, Any]) -> None:
    atomic_write_bytes(os.path.join(checkpoint_dir, STATE_FILE), cloudpickle.dumps(state))


def read_state(checkpoint_dir: str) -> dict[str, Any] | None:
    """The trainable state saved in ``checkpoint_dir``, or None if there is none."""
    path = os.path.join(checkpoint_dir, STATE_FILE)
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        return cloudpickle.load(f)


def find_checkpoint_root(path: str) -> str:
    """The checkpoint directory that contains ``path`` (a dir or a file inside one)."""
    candidate = os.path.abspath(path)
    if os.path.isdir(candidate) and os.path.exists(os.path.join(candidate, STATE_FILE)):
        return candidate
    probe = candidate if os.path.isdir(candidate) else os.path.dirname(candidate)
    while True:
        if os.path.exists(os.path.join(probe, STATE_FILE)):
            return probe
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    if os.path.isdir(candidate):
        return candidate  # a plain directory of files without trainable state
    raise FileNotFoundError(
        f"No checkpoint found at {path!r}: pass the directory returned by Trainable.save() "
        "or a fasttune.Checkpoint."
    )


def pack_dir(directory: str) -> bytes:
    """Serialise a directory tree to bytes (an uncompressed tar)."""
    import tarfile  # here: ~3 ms to import, and most runs pack no directory

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(directory, arcname=".")
    return buffer.getvalue()


def unpack_dir(data: bytes, directory: str) -> None:
    """Inverse of :func:`pack_dir`."""
    import tarfile

    os.makedirs(directory, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(directory, filter="data")
        else:  # Python < 3.10.12 has no extraction filters
            tar.extractall(directory)
