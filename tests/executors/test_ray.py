"""RayExecutor: the conformance suite on a Ray instance of this machine, plus actors."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray", reason="the Ray executor needs ray: pip install 'fasttune[ray]'")

from fasttune.executors.ray_executor import RayExecutor  # noqa: E402
from tests.executors.conformance import *  # noqa: E402, F403


@pytest.fixture(scope="module")
def ray_instance():
    """One Ray instance for the module (starting one takes seconds)."""
    ray.init(num_cpus=4, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture
def executor(ray_instance):
    executor = RayExecutor()
    yield executor
    executor.shutdown()
