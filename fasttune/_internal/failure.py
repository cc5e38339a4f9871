"""Recording a trial's failure: ``error.txt`` (appended) and ``error.pkl``."""

from __future__ import annotations

import os
from datetime import datetime

from fasttune.result import EXPR_ERROR_FILE, EXPR_ERROR_PICKLE_FILE
from fasttune.storage.filesystem import atomic_write_bytes


def write_error_files(
    trial_dir: str, failure_number: int, error_text: str, exception_blob: bytes | None
) -> str:
    """Append the failure to ``error.txt`` (and pickle the exception); return its path."""
    os.makedirs(trial_dir, exist_ok=True)
    path = os.path.join(trial_dir, EXPR_ERROR_FILE)
    stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"Failure # {failure_number} (occurred at {stamp})\n{error_text.rstrip()}\n\n")
    if exception_blob is not None:
        atomic_write_bytes(os.path.join(trial_dir, EXPR_ERROR_PICKLE_FILE), exception_blob)
    return path


def short_error(error_text: str) -> str:
    """The last non-empty line of a traceback (the exception and its message)."""
    lines = [line for line in error_text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "unknown error"
