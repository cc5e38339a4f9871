"""A fork server killed at any moment never escapes as an exception.

The server's socket is reset when it dies with requests unread; a child whose pid was
still owed then reads as -1, the next spawn starts a new server, and a run loses at
most the trials its workers held, handled per ``FailureConfig``.
"""

from __future__ import annotations

import os
import signal
import time

import fasttune as tune
from fasttune.executors import _forkserver


def _wait_dead(pid: int) -> None:
    for _ in range(200):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.01)


def test_a_server_killed_with_requests_unread_resets_and_is_replaced():
    server = _forkserver.ForkServer()
    try:
        first = server.spawn("tests.executors._trainables:sleep_forever")
        assert first.pid > 0
        old = server.server_pid
        assert old is not None
        os.kill(old, signal.SIGSTOP)  # it cannot read what comes next
        owed = server.spawn("tests.executors._trainables:sleep_forever")
        os.kill(old, signal.SIGKILL)  # dies with a request unread: the socket is reset
        _wait_dead(old)
        assert owed.pid == -1  # was ConnectionResetError out of resolve()
        replacement = server.spawn("tests.executors._trainables:sleep_forever")
        assert replacement.pid > 0 and server.server_pid not in (None, old)
        for child in (first, replacement):
            child.kill()
    finally:
        server.close()


class _KillForkServerAtEachStart(tune.Callback):
    def on_trial_start(self, iteration, trials, trial, **info):
        pid = _forkserver.default_server().server_pid
        if pid is not None:
            os.kill(pid, signal.SIGKILL)


def _counting(config):
    for i in range(10):
        time.sleep(0.01)
        tune.report({"i": i})


def test_fit_survives_the_fork_server_killed_at_every_trial_start(tmp_path):
    tune.init(num_cpus=2)
    try:
        grid = tune.Tuner(
            _counting,
            param_space={"x": tune.grid_search(list(range(6)))},
            tune_config=tune.TuneConfig(reuse_actors=False),
            run_config=tune.RunConfig(
                storage_path=str(tmp_path),
                verbose=0,
                callbacks=[_KillForkServerAtEachStart()],
                failure_config=tune.FailureConfig(max_failures=-1),
            ),
        ).fit()
    finally:
        tune.shutdown()
    assert len(grid) == 6 and grid.num_errors == 0
    assert [r.metrics["training_iteration"] for r in grid] == [10] * 6
