"""The bookkeeping metrics filled into every result."""

from __future__ import annotations

import os
from datetime import datetime

from fasttune import result as R
from fasttune.trainable import _result_metrics
from fasttune.trainable._result_metrics import DateCache, auto_filled_metrics, fill_defaults


def test_date_cache_formats_once_per_second(monkeypatch):
    clock = [1_000.2]
    monkeypatch.setattr(_result_metrics.time, "time", lambda: clock[0])
    cache = DateCache()
    first = cache.now()
    assert first == (1000, datetime.fromtimestamp(1000).strftime("%Y-%m-%d_%H-%M-%S"))
    clock[0] = 1_000.9
    assert cache.now() is first  # same second: the cached pair
    clock[0] = 1_001.0
    assert cache.now()[0] == 1001


def test_date_cache_uses_a_given_time():
    now = datetime(2020, 1, 2, 3, 4, 5)
    assert DateCache().now(now)[1] == "2020-01-02_03-04-05"


def test_fill_defaults_keeps_what_the_result_has():
    result = {R.DONE: True, R.TRAINING_ITERATION: 9, R.MEAN_LOSS: 0.5}
    fill_defaults(result, iteration=3, timesteps_total=None, episodes_total=4)
    assert result == {
        R.DONE: True,
        R.TRAINING_ITERATION: 9,
        R.MEAN_LOSS: 0.5,
        R.EPISODES_TOTAL: 4,
    }  # no neg_mean_loss: Ray Tune 2.x adds none


def metrics(**overrides):
    kwargs = dict(
        trial_id="t1",
        config={"lr": 0.1},
        seconds=1000,
        date="d",
        timestamp=None,
        time_this_iter=0.5,
        time_total=2.0,
        time_since_restore=1.0,
        iterations_since_restore=2,
        timesteps_since_restore=0,
    )
    kwargs.update(overrides)
    return auto_filled_metrics(**kwargs)


def test_auto_filled_metrics():
    filled = metrics()
    assert filled[R.TIMESTAMP] == 1000 and filled[R.PID] == os.getpid()
    assert R.TIMESTEPS_SINCE_RESTORE not in filled  # only once timesteps are reported
    assert metrics(timestamp=5, timesteps_since_restore=3)[R.TIMESTAMP] == 5
    assert metrics(timesteps_since_restore=3)[R.TIMESTEPS_SINCE_RESTORE] == 3


def test_debug_metrics_only():
    assert set(metrics(debug_metrics_only=True)) == {
        R.TRIAL_ID, R.DATE, R.TIMESTAMP, R.PID, R.HOSTNAME, R.NODE_IP, R.CONFIG
    }  # fmt: skip
