"""Damaged experiment state: each case is made for real on a crashed experiment, then
restored; it recovers, or fails clearly, with nothing silently lost.

One driver is SIGKILLed mid-run (some trials finished, some running, some never
started); each test damages a copy of what it left, and restores it in this process.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import time

import pytest

import fasttune as tune
from tests.runner._driver_script import slow_counter
from tests.runner.test_resume import _start_driver, _wait_for_results

pytestmark = pytest.mark.slow


def _crash(storage: str, *args: str) -> str:
    proc = _start_driver(storage, *args)
    _wait_for_results(storage, 25)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    path = os.path.join(storage, "killed")
    _wait_until_quiet(path)
    return path


@pytest.fixture(scope="module")
def crashed(tmp_path_factory):
    return _crash(str(tmp_path_factory.mktemp("crashed") / "store"))


def _wait_until_quiet(path: str, timeout: float = 20) -> None:
    """Wait until nothing changes under ``path``: the killed driver's workers notice
    it is gone at their next report and leave, possibly in the middle of writing a
    checkpoint, which a copy taken meanwhile would race with."""

    def listing() -> list[tuple[str, int, int]]:
        found = []
        for root, _dirs, files in os.walk(path):
            for name in files:
                with contextlib.suppress(FileNotFoundError):
                    st = os.stat(os.path.join(root, name))
                    found.append((os.path.join(root, name), st.st_size, st.st_mtime_ns))
        return sorted(found)

    deadline = time.time() + timeout
    before = listing()
    while time.time() < deadline:
        time.sleep(0.5)
        now = listing()
        if now == before:
            return
        before = now


@pytest.fixture
def copy(crashed, tmp_path):
    path = str(tmp_path / "killed")
    shutil.copytree(crashed, path)
    return path


def _restore(path):
    tune.init(num_cpus=2)
    try:
        return tune.Tuner.restore(path, trainable=slow_counter).fit()
    finally:
        tune.shutdown()


def _all_finished(grid):
    assert len(grid) == 10 and grid.num_errors == 0
    assert [r.metrics["training_iteration"] for r in grid] == [8] * 10
    return sorted(r.config["x"] for r in grid)


def test_undamaged_reference(copy):
    _all_finished(_restore(copy))


@pytest.mark.parametrize(
    "damage",
    ["delete", "truncate", "empty", "garbage", "flip"],
)
def test_a_lost_or_damaged_snapshot_is_rebuilt(copy, damage, caplog):
    path = os.path.join(copy, "experiment_state.json")
    data = open(path, "rb").read()
    if damage == "delete":
        os.remove(path)
    elif damage == "flip":  # a byte changed in the middle: still JSON, maybe
        flipped = bytearray(data)
        flipped[len(data) // 2] ^= 0x01
        open(path, "wb").write(bytes(flipped))
    else:
        new = {"truncate": data[: len(data) // 2], "empty": b"", "garbage": os.urandom(200)}
        open(path, "wb").write(new[damage])
    assert tune.Tuner.can_restore(copy)
    with caplog.at_level(logging.WARNING):
        _all_finished(_restore(copy))
    assert "experiment_state.json is damaged or missing" in caplog.text


def test_a_deleted_journal_loses_no_trial(copy, caplog):
    os.remove(os.path.join(copy, "experiment_state.journal"))
    with caplog.at_level(logging.WARNING):
        _all_finished(_restore(copy))  # was: 0 trials, and that state written over
    assert "were rebuilt from their folders" in caplog.text


def test_a_garbled_journal_line_drops_only_itself(copy, caplog):
    path = os.path.join(copy, "experiment_state.journal")
    lines = open(path, "rb").read().split(b"\n")
    middle = len(lines) // 2
    lines[middle] = b"{garbage" + lines[middle][8:]
    open(path, "wb").write(b"\n".join(lines))
    with caplog.at_level(logging.WARNING):
        _all_finished(_restore(copy))
    assert "experiment_state.journal: 1 damaged record(s) skipped" in caplog.text


def _journal_records(path):
    """The journal's bytes and the (start, end) of each record in it."""
    data = open(path, "rb").read()
    bounds, start = [], 0
    while (end := data.find(b"\n", start)) >= 0:
        bounds.append((start, end + 1))
        start = end + 1
    return data, bounds


def test_a_flipped_byte_in_any_journal_record_is_found_and_said(crashed, tmp_path, caplog):
    """A byte flipped in the middle of each record in turn (damage JSON parsing alone
    would miss, such as a changed digit): the checksum finds it, the load says which
    file and how many records, and no trial is lost."""
    from fasttune._internal.experiment_state import ExperimentStateStore

    path = str(tmp_path / "flipped")
    shutil.copytree(crashed, path)
    target = os.path.join(path, "experiment_state.journal")
    data, bounds = _journal_records(target)
    if len(bounds) < 2:
        pytest.fail("the crashed run left fewer than 2 journal records")
    whole = {t["trial_id"] for t in ExperimentStateStore(path).load().trials}
    for start, end in bounds:
        damaged = bytearray(data)
        damaged[(start + end) // 2] ^= 0x04
        open(target, "wb").write(bytes(damaged))
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            loaded = ExperimentStateStore(path).load()
        assert {t["trial_id"] for t in loaded.trials} == whole
        assert f"{target}: 1 damaged record(s) skipped" in caplog.text
        assert f"{len(bounds) - 1} intact record(s) read" in caplog.text


def test_a_flipped_byte_in_the_journal_still_finishes_every_trial(copy, caplog):
    target = os.path.join(copy, "experiment_state.journal")
    data, bounds = _journal_records(target)
    damaged = bytearray(data)
    start, end = bounds[len(bounds) // 2]
    damaged[(start + end) // 2] ^= 0x04
    open(target, "wb").write(bytes(damaged))
    with caplog.at_level(logging.WARNING):
        _all_finished(_restore(copy))
    assert "1 damaged record(s) skipped" in caplog.text


def test_a_journal_of_garbage_loses_no_trial(copy, caplog):
    open(os.path.join(copy, "experiment_state.journal"), "wb").write(os.urandom(3000))
    with caplog.at_level(logging.WARNING):
        _all_finished(_restore(copy))
    assert "damaged record(s) skipped" in caplog.text or "not a whole record" in caplog.text


@pytest.mark.parametrize(
    "name",
    [
        "experiment_state.json",
        "experiment_state.journal",
        "trial_states.jsonl",
        "trial_configs.pkl",
        "search_state.pkl",
        "scheduler_state.pkl",
        "callback_state.pkl",
    ],
)
def test_each_state_file_deleted_in_turn_loses_no_started_trial(copy, name, caplog):
    """Every file but tuner.pkl (its own test): the run finishes every trial that
    had started; a never-started trial whose config went with the configs log ends in
    ERROR saying so, never with an empty config."""
    from fasttune._internal.state_layout import STATE_FILES

    assert name in STATE_FILES
    started = {n for n in os.listdir(copy) if os.path.isdir(os.path.join(copy, n)) and "_" in n}
    target = os.path.join(copy, name)
    if os.path.exists(target):
        os.remove(target)
    assert tune.Tuner.can_restore(copy)
    grid = _restore(copy)
    assert len(grid) == 10
    finished = [r for r in grid if r.error is None]
    assert all(r.metrics["training_iteration"] == 8 for r in finished)
    for result in grid:
        if result.error is not None:
            assert name == "trial_configs.pkl" and "config was lost" in str(result.error)
    assert len(finished) >= len(started)


@pytest.mark.parametrize("damage", ["delete", "truncate", "flip"])
def test_a_lost_search_state_does_not_draw_the_samples_again(
    copy, crashed, damage, tmp_path, caplog
):
    reference = str(tmp_path / "reference")
    shutil.copytree(crashed, reference)
    expected = _all_finished(_restore(reference))
    path = os.path.join(copy, "search_state.pkl")
    data = open(path, "rb").read()
    if damage == "delete":
        os.remove(path)
    elif damage == "truncate":
        open(path, "wb").write(data[:20])
    else:  # one changed byte, which could unpickle into other values: found by its checksum
        middle = len(data) // 2
        open(path, "wb").write(data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1 :])
    with caplog.at_level(logging.WARNING):
        assert _all_finished(_restore(copy)) == expected  # was: 20 trials, 10 configs twice
    if damage == "flip":
        assert "search_state.pkl is damaged" in caplog.text and "checksum" in caplog.text


def test_deleted_base_records_are_rebuilt(copy):
    os.remove(os.path.join(copy, "trial_states.jsonl"))
    _all_finished(_restore(copy))


def test_a_lost_config_ends_its_never_started_trials_in_error_not_with_empty_configs(tmp_path):
    # A run whose trials are created ahead of time: some were never started.
    copy = _crash(str(tmp_path / "store"), "ahead")
    path = os.path.join(copy, "trial_configs.pkl")
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 3])
    started = {n for n in os.listdir(copy) if os.path.isdir(os.path.join(copy, n))}
    grid = _restore(copy)
    assert len(grid) == 10
    lost = [r for r in grid if r.error is not None]
    assert lost, "the truncated log should have lost the config of a trial not yet started"
    for result in lost:
        assert "config was lost" in str(result.error)
    finished = [r for r in grid if r.error is None]
    assert all(r.metrics["training_iteration"] == 8 for r in finished)
    assert len(finished) >= len(started)  # every trial that had started kept its config


def test_a_changed_params_pkl_is_not_run_with_its_other_config(copy, caplog):
    """Without the configs log a started trial's config comes from its params.pkl, a
    plain pickle as Ray's: one whose value was changed (and still unpickles) disagrees
    with params.json, so the trial ends in ERROR instead of running with the wrong x."""
    import json
    import pickle
    import struct

    os.remove(os.path.join(copy, "trial_configs.pkl"))
    unfinished = []
    for name in sorted(os.listdir(copy)):
        folder = os.path.join(copy, name)
        results = os.path.join(folder, "result.json")
        if os.path.isfile(results) and os.path.isfile(os.path.join(folder, "params.pkl")):
            lines = open(results).read().splitlines()
            if lines and json.loads(lines[-1])["training_iteration"] < 8:
                unfinished.append(folder)
    assert unfinished, "the crashed run left no started, unfinished trial"
    target = os.path.join(unfinished[0], "params.pkl")
    data = open(target, "rb").read()
    x = pickle.loads(data)["x"]
    packed = struct.pack(">d", x)
    assert data.count(packed) == 1
    changed = struct.pack(">d", x + 0.25)
    open(target, "wb").write(data.replace(packed, changed))
    assert pickle.loads(open(target, "rb").read())["x"] == x + 0.25  # still a pickle
    with caplog.at_level(logging.WARNING):
        grid = _restore(copy)
    assert "hold different configs" in caplog.text and target in caplog.text
    assert all(r.config.get("x") != x + 0.25 for r in grid)
    errored = [r for r in grid if r.error is not None]
    assert any(r.path == unfinished[0] for r in errored)
    assert all("config was lost" in str(r.error) for r in errored)


def test_a_lost_tuner_file_says_what_is_intact(copy):
    os.remove(os.path.join(copy, "tuner.pkl"))
    with pytest.raises(ValueError, match=r"tuner\.pkl .* is missing.*ExperimentAnalysis"):
        tune.Tuner.restore(copy, trainable=slow_counter)


def _flip_a_byte(path: str) -> None:
    data = open(path, "rb").read()
    middle = len(data) // 2
    open(path, "wb").write(data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1 :])


def test_a_damaged_tuner_file_says_so_and_what_is_intact(copy):
    _flip_a_byte(os.path.join(copy, "tuner.pkl"))
    with pytest.raises(ValueError, match=r"tuner\.pkl is damaged.*checksum.*param_space="):
        tune.Tuner.restore(copy, trainable=slow_counter)


SPACE = {"x": tune.uniform(0, 1), "n": 8, "sleep": 0.05}  # the driver's param_space


def _restore_with_space(path):
    tune.init(num_cpus=2)
    try:
        return tune.Tuner.restore(path, trainable=slow_counter, param_space=SPACE).fit()
    finally:
        tune.shutdown()


def _found_trials_finished(grid, path):
    """Without tuner.pkl the run's num_samples is lost: the trials found (every one
    that was created, and started, under max_concurrent_trials) run to their end."""
    found = [n for n in os.listdir(path) if os.path.isdir(os.path.join(path, n))]
    assert found and len(grid) == len(found) and grid.num_errors == 0
    assert [r.metrics["training_iteration"] for r in grid] == [8] * len(found)


def test_a_lost_tuner_file_and_the_param_space_given_again_finish_the_run(copy, caplog):
    os.remove(os.path.join(copy, "tuner.pkl"))
    assert not tune.Tuner.can_restore(copy)
    with caplog.at_level(logging.WARNING):
        _found_trials_finished(_restore_with_space(copy), copy)
    assert "has no tuner.pkl" in caplog.text and "defaults" in caplog.text
    assert tune.Tuner.can_restore(copy)  # the restored run wrote a tuner.pkl again


def test_a_damaged_tuner_file_and_the_param_space_given_again_finish_the_run(copy, caplog):
    _flip_a_byte(os.path.join(copy, "tuner.pkl"))
    with caplog.at_level(logging.WARNING):
        _found_trials_finished(_restore_with_space(copy), copy)
    assert "tuner.pkl is damaged" in caplog.text and "trial folders" in caplog.text


def test_trial_folders_alone_rebuild_the_results(copy, crashed, tmp_path):
    """Every state file deleted: the trials that had started are rebuilt from their
    folders (config, results, checkpoints), resume and finish with the configs they
    had; restoring without the param_space says what to pass."""
    from fasttune._internal.state_layout import STATE_FILES

    reference = str(tmp_path / "reference")
    shutil.copytree(crashed, reference)
    expected = {r.path.rsplit(os.sep, 1)[-1]: r.config["x"] for r in _restore(reference)}
    for name in STATE_FILES:
        if os.path.exists(os.path.join(copy, name)):
            os.remove(os.path.join(copy, name))
    started = {n for n in os.listdir(copy) if os.path.isdir(os.path.join(copy, n))}
    assert started, "the crashed run left no trial folder"
    with pytest.raises(ValueError, match=r"tuner\.pkl.*missing.*param_space="):
        tune.Tuner.restore(copy, trainable=slow_counter)
    grid = _restore_with_space(copy)
    assert grid.num_errors == 0
    got = {r.path.rsplit(os.sep, 1)[-1]: r.config["x"] for r in grid}
    assert set(got) == started
    assert got == {name: expected[name] for name in started}
    assert [r.metrics["training_iteration"] for r in grid] == [8] * len(started)


def test_an_empty_folder_is_not_taken_for_an_experiment(tmp_path):
    with pytest.raises(ValueError, match="no fasttune experiment there"):
        tune.Tuner.restore(str(tmp_path), trainable=slow_counter, param_space=SPACE)


@pytest.mark.parametrize("name", ["experiment_state.journal"])
def test_the_last_record_torn_at_every_byte_still_loads(crashed, tmp_path, name):
    """A crash mid-write leaves any prefix of the last record: each one loads, and
    every trial the intact records knew is still there."""
    from fasttune._internal.experiment_state import ExperimentStateStore

    path = str(tmp_path / "torn")
    shutil.copytree(crashed, path)
    target = os.path.join(path, name)
    data = open(target, "rb").read()
    if not data:
        pytest.fail(f"the crashed run left an empty {name}: nothing to tear")
    start = data.rstrip(b"\n").rfind(b"\n") + 1  # the last record
    whole = {t["trial_id"] for t in ExperimentStateStore(path).load().trials}
    for cut in range(start, len(data)):
        open(target, "wb").write(data[:cut])
        loaded = ExperimentStateStore(path).load()
        assert {t["trial_id"] for t in loaded.trials} == whole, f"cut at byte {cut}"


def test_the_configs_log_torn_at_every_byte_of_its_last_record_still_loads(crashed, tmp_path):
    from fasttune._internal.experiment_state import ExperimentStateStore

    path = str(tmp_path / "torn")
    shutil.copytree(crashed, path)
    target = os.path.join(path, "trial_configs.pkl")
    data = open(target, "rb").read()
    complete = ExperimentStateStore(path).load().configs
    # The last record starts after the previous ones: find it by re-reading lengths
    # (after the header, each record is an 8-byte length, a 4-byte checksum, the pickle).
    from fasttune._internal.state_framing import CONFIGS_HEADER

    assert data.startswith(CONFIGS_HEADER)
    offset = last = len(CONFIGS_HEADER)
    while offset + 12 <= len(data):
        last = offset
        offset += 12 + int.from_bytes(data[offset : offset + 8], "little")
    for cut in range(last, len(data)):
        open(target, "wb").write(data[:cut])
        configs = ExperimentStateStore(path).load().configs
        assert len(configs) >= len(complete) - 1, f"cut at byte {cut}"
        assert all(configs[k] == complete[k] for k in configs)


def test_an_experiment_written_before_checksums_still_restores(copy, caplog):
    """State format 2 (plain JSON lines, a configs log without checksums), as the
    experiments of earlier fasttune versions: restored, and appended to in its format."""
    import json

    from fasttune._internal.state_framing import (
        CONFIGS_HEADER,
        open_pickle,
        read_blobs,
        read_lines,
    )

    for name in ("experiment_state.journal", "trial_states.jsonl"):
        path = os.path.join(copy, name)
        records = read_lines(open(path, "rb").read()).records
        open(path, "w").write("".join(json.dumps(r) + "\n" for r in records))
    configs = os.path.join(copy, "trial_configs.pkl")
    blobs = read_blobs(open(configs, "rb").read()).records
    open(configs, "wb").write(b"".join(len(b).to_bytes(8, "little") + b for b in blobs))
    for name in ("tuner.pkl", "search_state.pkl", "scheduler_state.pkl", "callback_state.pkl"):
        path = os.path.join(copy, name)
        if os.path.exists(path):  # bare pickles, without header and checksum
            bare = open_pickle(open(path, "rb").read())
            open(path, "wb").write(bare)
    snapshot = os.path.join(copy, "experiment_state.json")
    document = json.load(open(snapshot))
    document["version"] = 2
    open(snapshot, "w").write(json.dumps(document))
    with caplog.at_level(logging.WARNING):
        _all_finished(_restore(copy))
    assert "damaged" not in caplog.text
    assert not open(configs, "rb").read().startswith(CONFIGS_HEADER)
    assert len(read_blobs(open(configs, "rb").read()).records) >= len(blobs)


def test_a_new_fit_moves_trial_folders_left_without_state_aside(copy, caplog):
    """Trial folders whose state files were lost are an earlier run still (they restore
    with the param_space): a new fit with the same name keeps them apart."""
    from fasttune._internal.state_layout import STATE_FILES
    from tests.runner._driver_script import make_tuner

    for name in STATE_FILES:
        if os.path.exists(os.path.join(copy, name)):
            os.remove(os.path.join(copy, name))
    earlier = sorted(n for n in os.listdir(copy) if os.path.isdir(os.path.join(copy, n)))
    storage = os.path.dirname(copy)
    tune.init(num_cpus=2)
    try:
        with caplog.at_level(logging.WARNING):
            grid = make_tuner(storage).fit()
    finally:
        tune.shutdown()
    assert len(grid) == 10 and grid.num_errors == 0
    assert "was moved to" in caplog.text and "param_space=... (its tuner.pkl" in caplog.text
    (aside,) = [n for n in os.listdir(storage) if n.startswith("killed_")]
    moved = sorted(n for n in os.listdir(os.path.join(storage, aside)) if n[0] != ".")
    assert moved == earlier
    assert not set(earlier) & set(os.listdir(copy))
