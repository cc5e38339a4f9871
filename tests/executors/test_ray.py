"""RayExecutor: the conformance suite on a Ray cluster of this machine, plus actors."""

from __future__ import annotations

import pytest

ray = pytest.importorskip("ray", reason="the Ray executor needs ray: pip install 'fasttune[ray]'")

from fasttune.executors.ray_executor import RayExecutor  # noqa: E402
from tests.executors.conformance import *  # noqa: E402, F403


@pytest.fixture
def executor(ray_connected):
    executor = RayExecutor()
    yield executor
    executor.shutdown()
