"""LocalExecutor: the conformance suite, plus processes, signals and environment."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from dataclasses import replace

import psutil
import pytest

from fasttune.executors import (
    Allocation,
    LocalExecutor,
    TrialFailed,
    TrialResults,
    TrialSaved,
)
from tests.executors._trainables import Counter, Unsendable
from tests.executors.conformance import *  # noqa: F403
from tests.executors.conformance import (
    BIG,
    _run_trials,
    done,
    ended,
    has,
    n_results,
    of,
    results,
    stop_and_wait,
)
from tests.processes import gone


@pytest.fixture
def executor():
    executor = LocalExecutor()
    yield executor
    executor.shutdown()


def _first_result(executor, make_launch, wait_for, config=None, **fields) -> dict:
    launch = make_launch(Counter, {"stop_at": 1, **(config or {})}, initial_credit=BIG, **fields)
    executor.start_trial(launch)
    result = results(wait_for(executor, done(launch.trial_id)))[0]
    stop_and_wait(executor, wait_for, launch.trial_id)
    return result


# ---------------------------------------------------------------------- worker death
def test_worker_killed_mid_trial_becomes_worker_died(executor, make_launch, wait_for):
    launch = make_launch(Counter, {"sleep": 0.005}, initial_credit=BIG)
    executor.start_trial(launch)
    pid = results(wait_for(executor, n_results(launch.trial_id, 1)))[0]["worker_pid"]
    os.kill(pid, signal.SIGKILL)
    failed = wait_for(executor, ended(launch.trial_id))[-1]
    assert isinstance(failed, TrialFailed) and failed.exc_type == "WorkerDied"
    assert failed.error == f"worker process {pid} died: killed by signal SIGKILL"
    assert failed.during == "train" and executor.num_running == 0


def test_os_exit_in_step_reports_the_exit_code(executor, make_launch, wait_for):
    launch = make_launch(Counter, {"exit_at": 3}, initial_credit=BIG, buffer_time_s=0.0)
    executor.start_trial(launch)
    events = wait_for(executor, ended(launch.trial_id))
    assert events[-1].exc_type == "WorkerDied"
    assert events[-1].error.endswith("died: exited with code 3")
    assert [r["count"] for r in results(events)] == [1, 2]  # sent before dying


def test_unsendable_result_fails_the_trial(executor, make_launch, wait_for):
    launch = make_launch(Unsendable, initial_credit=1)
    executor.start_trial(launch)
    failed = wait_for(executor, ended(launch.trial_id))[-1]
    assert isinstance(failed, TrialFailed) and failed.during == "train"
    assert "lock" in failed.error


def test_worker_ignores_sigint(executor, make_launch, wait_for):
    launch = make_launch(Counter, {"sleep": 0.002}, initial_credit=BIG, buffer_time_s=0.0)
    executor.start_trial(launch)
    pid = results(wait_for(executor, n_results(launch.trial_id, 1)))[0]["worker_pid"]
    os.kill(pid, signal.SIGINT)
    events = wait_for(executor, n_results(launch.trial_id, 20))
    assert not of(events, TrialFailed)


# ---------------------------------------------------------------------- environment
def test_cuda_visible_devices_follows_the_allocation(executor, make_launch, wait_for):
    gpus = _first_result(executor, make_launch, wait_for, allocation=Allocation(gpu_ids=("1", "3")))
    assert gpus["cuda"] == gpus["cuda_at_import"] == "1,3"
    none = _first_result(executor, make_launch, wait_for)
    assert none["cuda"] == none["cuda_at_import"] == ""


def test_worker_runs_in_the_trial_directory(executor, make_launch, wait_for):
    launch = make_launch(Counter, {"stop_at": 1}, initial_credit=BIG)
    executor.start_trial(launch)
    result = results(wait_for(executor, done(launch.trial_id)))[0]
    assert os.path.realpath(result["cwd"]) == os.path.realpath(launch.trial_dir)
    assert result["orig_dir"] == os.getcwd()


def test_relative_trial_dir_follows_the_driver_cwd(
    executor, make_launch, wait_for, tmp_path, monkeypatch
):
    _first_result(executor, make_launch, wait_for)  # forks a spare in the old cwd
    monkeypatch.chdir(tmp_path)
    launch = replace(make_launch(Counter, {"stop_at": 1}, initial_credit=BIG), trial_dir="rel")
    executor.start_trial(launch)
    result = results(wait_for(executor, done(launch.trial_id)))[0]
    executor.save_trial(launch.trial_id)
    saved = of(wait_for(executor, has(TrialSaved, launch.trial_id)), TrialSaved)[0]
    assert result["cwd"] == str(tmp_path / "rel")
    assert result["orig_dir"] == str(tmp_path)
    assert saved.checkpoint_path == str(tmp_path / "rel" / "checkpoint_000001")


def test_workers_see_the_driver_environment_at_start(executor, make_launch, wait_for, monkeypatch):
    monkeypatch.setenv("TUNE_ORIG_WORKING_DIR", "stale")  # the worker sets its own
    _first_result(executor, make_launch, wait_for)  # forks a spare
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
    monkeypatch.setenv("FASTTUNE_TEST_VARIABLE", "seen")
    config = {"stop_at": 1, "env": "FASTTUNE_TEST_VARIABLE"}
    launch = make_launch(Counter, config, initial_credit=BIG)
    executor.start_trial(launch)
    result = results(wait_for(executor, done(launch.trial_id)))[0]
    assert result["env"] == "seen" and result["cuda"] == ""
    assert result["orig_dir"] == os.getcwd()


def test_chdir_can_be_disabled(executor, make_launch, wait_for):
    result = _first_result(executor, make_launch, wait_for, chdir=False)
    assert result["cwd"] == os.getcwd()


def test_workers_draw_different_random_numbers(executor, make_launch, wait_for):
    a = _first_result(executor, make_launch, wait_for)
    b = _first_result(executor, make_launch, wait_for)
    assert a["worker_pid"] != b["worker_pid"] and a["random"] != b["random"]


# ---------------------------------------------------------------------- processes
def test_reuse_keeps_the_worker_process(executor, make_launch, wait_for):
    firsts = _run_trials(executor, make_launch, wait_for, Counter, 3, reuse=True)
    assert len({r["worker_pid"] for r in firsts}) == 1
    assert [r["setups"] for r in firsts] == [1, 1, 1]


def test_reset_fallback_stays_in_the_same_worker(executor, make_launch, wait_for):
    from tests.executors._trainables import NoReset

    firsts = _run_trials(executor, make_launch, wait_for, NoReset, 3, reuse=True)
    assert len({r["worker_pid"] for r in firsts}) == 1
    assert [r["setups"] for r in firsts] == [1, 2, 3]


def test_without_reuse_each_trial_gets_a_new_process(executor, make_launch, wait_for):
    firsts = _run_trials(executor, make_launch, wait_for, Counter, 3)
    assert len({r["worker_pid"] for r in firsts}) == 3
    assert [r["setups"] for r in firsts] == [1, 1, 1]


def test_reuse_needs_the_same_gpus(executor, make_launch, wait_for):
    gpu0 = Allocation(gpu_ids=("0",))
    a = _run_trials(executor, make_launch, wait_for, Counter, 1, reuse=True, allocation=gpu0)
    b = _run_trials(executor, make_launch, wait_for, Counter, 1, reuse=True)
    assert a[0]["worker_pid"] != b[0]["worker_pid"]
    # A trial of another trainable wants GPU 0: the idle worker holding it is retired.
    _run_trials(executor, make_launch, wait_for, Counter, 1, key="other", allocation=gpu0)
    assert gone(a[0]["worker_pid"])


def test_idle_workers_above_max_workers_are_retired(make_launch, wait_for):
    executor = LocalExecutor(max_workers=1, prestart=False)
    try:
        a = _run_trials(executor, make_launch, wait_for, Counter, 1, reuse=True, key="a")
        b = _run_trials(executor, make_launch, wait_for, Counter, 1, reuse=True, key="b")
        assert a[0]["worker_pid"] != b[0]["worker_pid"]
        assert gone(a[0]["worker_pid"])
        assert executor.worker_pids == [b[0]["worker_pid"]]
    finally:
        executor.shutdown()


def test_prestarted_worker_hosts_the_next_new_trial(executor, make_launch, wait_for):
    first = _run_trials(executor, make_launch, wait_for, Counter, 1)
    spares = set(executor.worker_pids) - {first[0]["worker_pid"]}
    assert len(spares) == 1
    second = _run_trials(executor, make_launch, wait_for, Counter, 1)
    assert {second[0]["worker_pid"]} == spares


def test_without_prestart_no_spare_is_kept(make_launch, wait_for):
    executor = LocalExecutor(prestart=False)
    try:
        launch = make_launch(Counter, {"sleep": 0.001}, initial_credit=BIG)
        executor.start_trial(launch)
        pid = results(wait_for(executor, n_results(launch.trial_id, 1)))[0]["worker_pid"]
        assert executor.worker_pids == [pid]
    finally:
        executor.shutdown()


def test_preloaded_modules_are_inherited_by_new_workers(executor, make_launch, wait_for):
    executor.preload_modules("tests.executors._preloaded", "no_such_module_exists")
    result = _first_result(executor, make_launch, wait_for)
    assert result["preloaded_in"] == executor._server.server_pid != result["worker_pid"]


def test_shutdown_leaves_no_worker_processes(make_launch, wait_for):
    executor = LocalExecutor()
    busy = make_launch(Counter, {"sleep": 60, "ignore_sigterm": True}, initial_credit=BIG)
    running = make_launch(Counter, {"sleep": 0.001}, initial_credit=BIG)
    executor.start_trial(busy)
    executor.start_trial(running)
    _run_trials(executor, make_launch, wait_for, Counter, 1, reuse=True)  # leaves one idle
    wait_for(executor, n_results(running.trial_id, 1))
    pids = executor.worker_pids
    assert len(pids) == 4  # busy, running, idle and the pre-started spare
    executor.shutdown()
    assert all(gone(pid, timeout=0) for pid in pids)
    server = psutil.Process(executor._server.server_pid)
    assert server.children() == []
    assert executor.worker_pids == []


def _run_script(tmp_path, body: str) -> subprocess.Popen:
    script = tmp_path / "driver.py"
    script.write_text(textwrap.dedent(body))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": root}
    return subprocess.Popen(
        [sys.executable, str(script)], cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True
    )


_SCRIPT_HEAD = """
    import time

    import cloudpickle
    print("MAIN RAN", flush=True)
    from fasttune.executors import LocalExecutor, TrialLaunch, TrialResults
    from tests.executors._trainables import Counter

    executor = LocalExecutor()
    blob = cloudpickle.dumps(Counter)
    config = {"sleep": SLEEP}
    executor.start_trial(TrialLaunch("t", "k", blob, config, "trial", initial_credit=10**9))
    while not any(isinstance(e, TrialResults) for e in executor.poll(5)):
        pass
    print("PIDS", *executor.worker_pids, flush=True)
"""


def test_unguarded_main_script_is_not_rerun_by_workers(tmp_path):
    proc = _run_script(tmp_path, _SCRIPT_HEAD.replace("SLEEP", "0") + "    executor.shutdown()\n")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert out.count("MAIN RAN") == 1 and "PIDS" in out


def test_workers_exit_when_the_driver_dies(tmp_path):
    proc = _run_script(tmp_path, _SCRIPT_HEAD.replace("SLEEP", "0.01") + "    time.sleep(60)\n")
    try:
        line = proc.stdout.readline()
        while line and not line.startswith("PIDS"):
            line = proc.stdout.readline()
        pids = [int(p) for p in line.split()[1:]]
        assert pids
        proc.kill()
        proc.wait()
        assert all(gone(pid, timeout=10) for pid in pids)
    finally:
        proc.kill()
        proc.communicate()


def test_results_after_driver_stop_are_dropped_even_when_buffered(executor, make_launch, wait_for):
    launch = make_launch(Counter, {"sleep": 0.0005}, initial_credit=BIG, buffer_time_s=0.05)
    executor.start_trial(launch)
    wait_for(executor, n_results(launch.trial_id, 1))
    executor.stop_trial(launch.trial_id)
    assert not of(wait_for(executor, ended(launch.trial_id)), TrialResults)


def test_the_fork_server_starts_before_any_executor_is_imported():
    """A Tuner starts the fork server first (its interpreter takes ~0.1 s), so
    ``fasttune.executors`` must not import the executors' modules to do it."""
    script = textwrap.dedent(
        """
        import sys
        import fasttune.executors as executors
        from fasttune.executors import _forkserver

        assert "fasttune.executors.base" not in sys.modules
        executors.start_fork_server()
        server = _forkserver.default_server()
        assert server.server_pid is not None
        assert "fasttune.executors.base" not in sys.modules
        assert "fasttune.executors.local" not in sys.modules
        assert executors.TrialLaunch.__module__ == "fasttune.executors.base"
        server.close()
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
