"""The lease of a remote experiment on a backend without conditional writes
(fsspec's memory filesystem): last writer wins, checked on read-back and renewal."""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import uuid

import pytest

from fasttune.storage.experiment_lease import (
    LEASE_FILE,
    ExperimentLease,
    LeaseLostError,
    check_lease,
    lease_ttl_s,
)
from fasttune.storage.experiment_lock import ExperimentInUseError
from fasttune.storage.location import experiment_storage

pytest.importorskip("fsspec")


@pytest.fixture
def storage():
    storage = experiment_storage("memory://leases", None, f"exp-{uuid.uuid4().hex[:8]}")
    yield storage
    storage.filesystem.delete(storage.path)


def _lease(storage, ttl_s: float = 60.0) -> ExperimentLease:
    return ExperimentLease(storage.filesystem, storage.path, storage.uri, ttl_s=ttl_s)


def _write_holder(storage, *, renewed: float, ttl_s: float, host: str = "elsewhere") -> None:
    holder = {
        "host": host,
        "pid": 4242,
        "started": renewed - 100,
        "renewed": renewed,
        "ttl_s": ttl_s,
        "token": uuid.uuid4().hex,
        "machine": "",
    }
    path = storage.filesystem.join(storage.path, LEASE_FILE)
    storage.filesystem.write_bytes_atomic(path, json.dumps(holder).encode())


def test_a_second_lease_is_refused_until_the_first_is_released(storage):
    first = _lease(storage)
    first.acquire()
    try:
        who = rf"pid {os.getpid()} on host {socket.gethostname()!r}"
        with pytest.raises(ExperimentInUseError, match=who):
            _lease(storage).acquire()
        with pytest.raises(ExperimentInUseError, match=r"another RunConfig\(name=\.\.\.\)"):
            check_lease(storage.filesystem, storage.path, storage.uri)
        first.ensure_held()
    finally:
        first.release()
    assert not storage.filesystem.exists(storage.filesystem.join(storage.path, LEASE_FILE))
    check_lease(storage.filesystem, storage.path, storage.uri)
    with _lease(storage) as second:
        assert second.held


def test_a_lease_not_renewed_within_its_time_to_live_is_taken_over(storage, caplog):
    _write_holder(storage, renewed=time.time(), ttl_s=60)
    with pytest.raises(ExperimentInUseError, match="pid 4242 on host 'elsewhere'"):
        _lease(storage).acquire()
    _write_holder(storage, renewed=time.time() - 61, ttl_s=60)
    with caplog.at_level(logging.WARNING), _lease(storage) as lease:
        assert lease.held
    assert "Taking over the experiment memory://leases/exp-" in caplog.text
    assert "pid 4242 on host 'elsewhere'" in caplog.text


def test_a_driver_whose_lease_was_overwritten_learns_it_at_its_next_renewal(storage):
    lease = _lease(storage, ttl_s=0.4)  # renewed every 0.1 s
    lease.acquire()
    try:
        lease.ensure_held()
        _write_holder(storage, renewed=time.time(), ttl_s=60, host="rival")
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                lease.ensure_held()
            except LeaseLostError as e:
                assert "now held by pid 4242 on host 'rival'" in str(e)
                assert "Tuner.restore(" in str(e)
                break
            time.sleep(0.02)
        else:
            raise AssertionError("the lost lease went unnoticed")
    finally:
        lease.release()
    # It does not delete the rival's lease.
    with pytest.raises(ExperimentInUseError, match="rival"):
        check_lease(storage.filesystem, storage.path, storage.uri)


def test_a_bad_time_to_live_names_the_variable(monkeypatch):
    monkeypatch.setenv("FASTTUNE_LEASE_TTL_S", "soon")
    with pytest.raises(ValueError, match=r"FASTTUNE_LEASE_TTL_S='soon' must be a number"):
        lease_ttl_s()
    monkeypatch.setenv("FASTTUNE_LEASE_TTL_S", "2.5")
    assert lease_ttl_s() == 2.5
