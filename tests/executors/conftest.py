"""Fixtures of the executor tests: launches and an event collector."""

from __future__ import annotations

import importlib.util
import itertools
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import cloudpickle
import pytest

from fasttune.executors import Event, Executor, TrialLaunch, TrialResults
from fasttune.trainable import TrialInfo
from fasttune.trainable.trial_info import TRIAL_INFO

if sys.modules.get("ray", False) is None or importlib.util.find_spec("ray") is None:
    # Helpers of the Ray tests that import Ray at the top: the doctest collection
    # imports every module, and their tests skip without Ray anyway.
    collect_ignore = ["_ray_driver_script.py", "_ray_support.py"]


@pytest.fixture
def make_launch(tmp_path) -> Callable[..., TrialLaunch]:
    """Build a ``TrialLaunch`` for a trainable class, with its trial dir under tmp_path."""
    ids = itertools.count()

    def make(
        trainable: type,
        config: dict[str, Any] | None = None,
        *,
        trial_id: str | None = None,
        key: str | None = None,
        **fields: Any,
    ) -> TrialLaunch:
        trial_id = trial_id or f"trial_{next(ids)}"
        trial_dir = str(tmp_path / trial_id)
        config = dict(config or {})
        config[TRIAL_INFO] = TrialInfo(trial_id, trial_id, trial_dir=trial_dir)
        return TrialLaunch(
            trial_id=trial_id,
            trainable_key=key or trainable.__qualname__,
            trainable_blob=cloudpickle.dumps(trainable),
            config=config,
            trial_dir=trial_dir,
            **fields,
        )

    return make


@pytest.fixture
def wait_for() -> Callable[..., list[Event]]:
    """Poll an executor until ``predicate(events)`` holds; fail after ``timeout`` s.

    Like the controller, it acknowledges every result batch with a grant of its length
    (a trial runs ahead only so far without acknowledgements); ``ack=False`` grants
    nothing, for tests of the credit itself.
    """

    def wait(
        executor: Executor,
        predicate: Callable[[list[Event]], bool],
        timeout: float = 15.0,
        *,
        ack: bool = True,
    ) -> list[Event]:
        events: list[Event] = []
        deadline = time.monotonic() + timeout
        while not predicate(events):
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting; events so far: {events!r}"[:3000])
            polled = executor.poll(0.05)
            if ack:
                for event in polled:
                    if isinstance(event, TrialResults):
                        executor.grant(event.trial_id, len(event.results))
            events += polled
        return events

    return wait


# ---------------------------------------------------------------------- Ray
@pytest.fixture(scope="package")
def ray_cluster():
    """A Ray cluster of three nodes on this machine, started once for the Ray tests of
    this package (a node takes seconds to start): the head (4 CPUs, custom resource
    ``head``), ``rack_a`` and ``rack_b`` (2 CPUs each, 2 of their custom resource).

    Tests connect to it through :func:`ray_connected`; it is shut down after the
    package's last test. Its files, and the address file through which a plain
    ``ray.init()`` finds a cluster of this machine, live in a directory of its own
    (``RAY_TMPDIR``), so that other processes' ``ray.init()`` do not join it.
    """
    from tests.executors._ray_support import start_cluster

    # short, out of the session folder: Ray's socket paths go in it
    temp_dir = tempfile.mkdtemp(prefix="ft_ray_", dir=os.environ.get("RAY_TMPDIR"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_TMPDIR", temp_dir)
        patch.setenv("TMPDIR", temp_dir)  # the cluster's processes make sockets there too
        # tempfile caches the directory it first finds: forgotten now, and put back on
        # exit, or later tests would make their temp files in this removed directory
        patch.setattr(tempfile, "tempdir", None)
        cluster = start_cluster()
        try:
            yield cluster
        finally:
            cluster.shutdown()
    shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def ray_connected(ray_cluster):
    """This process connected to :func:`ray_cluster` for one module, disconnected after
    (a connection left open would send later modules' trials to Ray)."""
    import ray

    ray.init(address=ray_cluster.address, logging_level="ERROR", log_to_driver=False)
    yield ray_cluster
    ray.shutdown()
