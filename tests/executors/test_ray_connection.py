"""RayConnection's one new try when a Ray Client server fails to start a driver's session.

Ray's ``init`` is replaced here (Ray's, not fasttune's): the failure it stands in for
comes from the cluster's proxy under load and cannot be caused on purpose. The whole
path through a real proxy is tested in test_ray_cluster.py.
"""

from __future__ import annotations

import logging

import pytest

ray = pytest.importorskip("ray", reason="the Ray executor needs ray: pip install 'fasttune[ray]'")

from fasttune.executors import _ray_connection  # noqa: E402
from fasttune.executors._ray_connection import RayConnection  # noqa: E402

SERVER_FAILED = ConnectionAbortedError(
    "Initialization failure from server:\nRuntimeError: Starting Ray client server failed."
)


@pytest.fixture
def init_calls(monkeypatch):
    """Ray's init answering from a list of outcomes (an exception is raised), each call
    recorded; nothing is connected."""
    assert not ray.is_initialized()
    monkeypatch.setattr(_ray_connection, "CLIENT_SERVER_RETRY_S", 0.0)
    calls: list[tuple[str | None, dict]] = []
    outcomes: list[Exception | None] = []

    def init(address=None, **kwargs):
        calls.append((address, kwargs))
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise outcome

    monkeypatch.setattr(ray, "init", init)
    return calls, outcomes


def test_a_client_server_that_failed_to_start_is_tried_once_more(init_calls, caplog):
    calls, outcomes = init_calls
    outcomes += [SERVER_FAILED, None]
    with caplog.at_level(logging.WARNING, logger="fasttune.executors._ray_connection"):
        RayConnection("ray://head:10001", {"namespace": "tuning"})
    assert calls == [("ray://head:10001", {"namespace": "tuning"})] * 2
    assert "trying once more" in caplog.text and "ray://head:10001" in caplog.text


def test_a_second_failure_is_the_clear_connection_error(init_calls):
    calls, outcomes = init_calls
    outcomes += [SERVER_FAILED, SERVER_FAILED]
    with pytest.raises(ConnectionError, match="could not connect to a Ray cluster"):
        RayConnection("ray://head:10001")
    assert len(calls) == 2


@pytest.mark.parametrize(
    ("address", "error"),
    [
        ("head:6379", SERVER_FAILED),  # not through Ray Client
        ("ray://head:10001", ConnectionError("no cluster answers")),  # nobody there
    ],
)
def test_other_connection_failures_are_not_retried(init_calls, address, error):
    calls, outcomes = init_calls
    outcomes.append(error)
    with pytest.raises(ConnectionError, match="could not connect to a Ray cluster"):
        RayConnection(address)
    assert len(calls) == 1
