from __future__ import annotations

import pytest

from tests.experiments import make_project, running_experiment


@pytest.fixture(scope="session")
def project(tmp_path_factory):
    """A folder holding the finished experiments ``errors``, ``asha`` and ``pbt``."""
    return make_project(str(tmp_path_factory.mktemp("project")))


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """The folder of an experiment that is still running (in another process)."""
    yield from running_experiment(str(tmp_path_factory.mktemp("live")))
