"""Fixtures shared by every test package."""

from __future__ import annotations

import os
import sys
import tempfile

import pytest

if os.environ.get("FASTTUNE_TEST_WITHOUT_RAY") == "1":
    # `make test-without-ray`: the whole suite as on a machine without Ray, where
    # `import ray` fails; the tests that need Ray skip themselves.
    sys.modules["ray"] = None  # type: ignore[assignment]

from tests.experiments import make_hyperband, make_project, running_experiment
from tests.s3_server import _s3_admin, s3_bucket, s3_server

__all__ = ["_s3_admin", "hyperband", "live", "project", "s3_bucket", "s3_server"]


@pytest.fixture(scope="session", autouse=True)
def _temporary_files_in_the_session_folder(tmp_path_factory):
    """Temporary files of the tests, and of their trainables (checkpoints made in
    ``tempfile.mkdtemp()``, as users make them, are never removed), go to this
    session's folder, which pytest deletes a few sessions later, instead of piling
    up in /tmp. Ray keeps its own temporary root: its socket paths must stay short."""
    system_tmp = tempfile.gettempdir()
    patch = pytest.MonkeyPatch()
    patch.setenv("RAY_TMPDIR", os.environ.get("RAY_TMPDIR", system_tmp))
    patch.setenv("TMPDIR", str(tmp_path_factory.mktemp("tmp")))
    patch.setattr(tempfile, "tempdir", None)
    yield
    patch.undo()


@pytest.fixture(scope="session")
def project(tmp_path_factory):
    """A folder holding the finished experiments ``errors``, ``asha`` and ``pbt``
    (made once per test session: the command line, dashboard, plots and readers
    all look at the same real runs)."""
    return make_project(str(tmp_path_factory.mktemp("project")))


@pytest.fixture(scope="session")
def hyperband(tmp_path_factory):
    """The folder of a finished experiment run under HyperBandScheduler."""
    return make_hyperband(str(tmp_path_factory.mktemp("hyperband")))


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    """The folder of an experiment that is still running (in another process)."""
    yield from running_experiment(str(tmp_path_factory.mktemp("live")))
