from __future__ import annotations

from typing import Any

import pytest

import fasttune as tune


@pytest.fixture
def run_config(tmp_path):
    """A RunConfig factory writing under tmp_path, silent by default."""

    def make(**kwargs: Any) -> tune.RunConfig:
        kwargs.setdefault("storage_path", str(tmp_path / "results"))
        kwargs.setdefault("name", "exp")
        kwargs.setdefault("verbose", 0)
        return tune.RunConfig(**kwargs)

    return make


@pytest.fixture(autouse=True)
def _two_cpus():
    """Pretend the machine has 2 CPUs whatever it has (CI has 2 cores)."""
    tune.init(num_cpus=2, num_gpus=0)
    yield
    tune.shutdown()
