"""Shared fixtures. Every test writes under its own tmp_path, never in ~."""

from __future__ import annotations

import os

import pytest

# Keras 3 loads its backend at import, tensorflow by default; torch is the one installed
# (the doctests of fasttune.integration.keras import it; workers inherit the variable).
os.environ.setdefault("KERAS_BACKEND", "torch")


@pytest.fixture(autouse=True)
def _isolated_storage(tmp_path, monkeypatch):
    """Point the default storage path (and the working directory) at the test's tmp dir."""
    storage = tmp_path / "fasttune_results"
    monkeypatch.setenv("FASTTUNE_STORAGE_PATH", str(storage))
    monkeypatch.chdir(tmp_path)
    return storage
