"""Fixtures of the executor tests: launches and an event collector."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import cloudpickle
import pytest

from fasttune.executors import Event, Executor, TrialLaunch, TrialResults
from fasttune.trainable import TrialInfo
from fasttune.trainable.trial_info import TRIAL_INFO


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
