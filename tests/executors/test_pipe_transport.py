"""A worker's pipe transport speaks the framing of the driver's ``Connection``.

The worker side frames its messages itself (``_worker_process.PipeTransport``); the
driver reads and writes the other end with ``multiprocessing.connection``. Messages
of every size must cross both ways intact, several commands read at once must come
out one by one, and a closed driver must end the worker's loop.
"""

from __future__ import annotations

import contextlib
import pickle
import socket
import threading
from multiprocessing.connection import Connection

import pytest

from fasttune.executors._worker_process import PipeTransport
from fasttune.executors.base import TrialStarted
from fasttune.executors.worker_commands import TransportClosed, split_events


@pytest.fixture
def ends():
    """(the driver's Connection, the worker's PipeTransport), over a socketpair as a
    worker's connection is."""
    driver_sock, worker_sock = socket.socketpair()
    driver = Connection(driver_sock.detach())
    worker = PipeTransport(worker_sock.detach())
    yield driver, worker
    if not driver.closed:
        driver.close()
    with contextlib.suppress(OSError):
        worker.close()


@pytest.mark.parametrize("size", [0, 10, 70_000, 5_000_000])
def test_commands_of_any_size_reach_the_worker(ends, size):
    driver, worker = ends
    command = ("start", b"x" * size)
    sender = threading.Thread(target=driver.send_bytes, args=(pickle.dumps(command),))
    sender.start()  # a message larger than the pipe needs a reader meanwhile
    assert worker.recv() == command
    sender.join()


def test_commands_sent_together_are_read_one_by_one(ends):
    driver, worker = ends
    for i in range(5):
        driver.send_bytes(pickle.dumps(("grant", i)))
    received = []
    while len(received) < 5:
        assert worker.poll()
        received.append(worker.recv())
    assert received == [("grant", i) for i in range(5)]
    assert not worker.poll()


@pytest.mark.parametrize("size", [10, 5_000_000])
def test_events_of_any_size_reach_the_driver(ends, size):
    driver, worker = ends
    events = [TrialStarted("t1"), TrialStarted("t" * size)]
    got = []
    reader = threading.Thread(target=lambda: got.append(driver.recv_bytes()))
    reader.start()
    worker.send_packed([worker.pack(e) for e in events])
    reader.join()
    assert split_events(got[0]) == events


def test_a_closed_driver_ends_the_worker(ends):
    driver, worker = ends
    driver.send_bytes(pickle.dumps(("grant", 1)))
    driver.close()
    assert worker.recv() == ("grant", 1)  # what was sent before still arrives
    with pytest.raises(TransportClosed):
        worker.recv()
    with pytest.raises(TransportClosed):
        worker.send(TrialStarted("t1"))
