"""A restored run keeps the base records it finds intact: the trials it leaves as they
were are not written again, the ones it changes are appended (later records win),
and a damaged or mostly superseded base file is written whole again."""

from __future__ import annotations

import os

import fasttune as tune
from fasttune._internal.experiment_state import ExperimentStateStore
from fasttune._internal.state_framing import read_lines
from fasttune._internal.state_layout import BASE_FILE
from fasttune.experiment.trial import Trial, TrialStatus


def _broken_until_fixed(config):
    with open(os.path.join(config["dir"], "runs"), "a") as f:
        f.write(f"{config['x']}\n")
    if config["x"] == 1 and not os.path.exists(os.path.join(config["dir"], "fixed")):
        raise RuntimeError("broken until fixed")
    tune.report({"x": config["x"]})


def _experiment(tmp_path, run_config) -> str:
    space = {"x": tune.grid_search([0, 1, 2]), "dir": str(tmp_path)}
    grid = tune.Tuner(_broken_until_fixed, param_space=space, run_config=run_config()).fit()
    assert grid.num_errors == 1
    return grid.experiment_path


def _base(path: str) -> bytes:
    with open(os.path.join(path, BASE_FILE), "rb") as f:
        return f.read()


def _runs(tmp_path) -> list[str]:
    with open(os.path.join(tmp_path, "runs")) as f:
        return f.read().split()


def _statuses(path: str) -> dict[str, str]:
    loaded = ExperimentStateStore(path).load()
    return {state["experiment_tag"][:1]: state["status"] for state in loaded.trials}


def test_a_restore_that_changes_nothing_leaves_the_base_file_as_it_was(tmp_path, run_config):
    path = _experiment(tmp_path, run_config)
    before = _base(path)
    grid = tune.Tuner.restore(path, trainable=_broken_until_fixed).fit()
    assert grid.num_errors == 1 and grid.num_terminated == 2
    assert _base(path) == before
    assert _statuses(path) == {"0": "TERMINATED", "1": "ERROR", "2": "TERMINATED"}


def test_trials_a_restore_changes_are_appended_and_read_back_as_they_ended(tmp_path, run_config):
    path = _experiment(tmp_path, run_config)
    before = _base(path)
    open(os.path.join(tmp_path, "fixed"), "w").close()
    grid = tune.Tuner.restore(path, trainable=_broken_until_fixed, restart_errored=True).fit()
    assert grid.num_errors == 0
    after = _base(path)
    assert after.startswith(before) and len(after) > len(before)  # appended, not rewritten
    with open(os.path.join(path, BASE_FILE), "rb") as f:
        records = read_lines(f.read()).records
    assert [r["status"] for r in records[len(read_lines(before).records) :]] == ["TERMINATED"]
    assert _statuses(path) == {"0": "TERMINATED", "1": "TERMINATED", "2": "TERMINATED"}
    # Restored again: nothing runs, every trial is as it ended.
    runs = _runs(tmp_path)
    grid = tune.Tuner.restore(path, trainable=_broken_until_fixed).fit()
    assert grid.num_terminated == 3 and _runs(tmp_path) == runs


def test_a_damaged_base_file_is_written_whole_again(tmp_path, run_config):
    path = _experiment(tmp_path, run_config)
    data = bytearray(_base(path))
    data[20] ^= 0x01  # inside the first record's JSON: its checksum fails
    with open(os.path.join(path, BASE_FILE), "wb") as f:
        f.write(bytes(data))
    tune.Tuner.restore(path, trainable=_broken_until_fixed).fit()
    read = read_lines(_base(path))
    assert not read.damaged
    assert [r["pos"] for r in read.records[:3]] == [0, 1, 2]  # every trial, in order
    assert _statuses(path) == {"0": "TERMINATED", "1": "ERROR", "2": "TERMINATED"}


def test_a_base_file_mostly_superseded_is_written_whole_again(tmp_path, run_config):
    path = _experiment(tmp_path, run_config)
    lines = _base(path).splitlines(keepends=True)
    # Each record twice (as many restores that changed every trial would leave it).
    with open(os.path.join(path, BASE_FILE), "ab") as f:
        f.write(b"".join(lines))
    assert not ExperimentStateStore(path).load().in_base
    tune.Tuner.restore(path, trainable=_broken_until_fixed).fit()
    assert [r["pos"] for r in read_lines(_base(path)).records] == [0, 1, 2]


def test_a_second_fit_of_a_restored_tuner_reads_the_state_the_first_one_left(tmp_path, run_config):
    """The errored trial runs again once: the second fit() sees it terminated."""
    path = _experiment(tmp_path, run_config)
    open(os.path.join(tmp_path, "fixed"), "w").close()
    tuner = tune.Tuner.restore(path, trainable=_broken_until_fixed, restart_errored=True)
    runs = _runs(tmp_path)
    assert tuner.fit().num_errors == 0
    assert _runs(tmp_path) == [*runs, "1"]
    assert tuner.fit().num_terminated == 3
    assert _runs(tmp_path) == [*runs, "1"]


def test_only_trials_whose_latest_record_is_their_base_line_count_as_in_base(tmp_path):
    """A later record (journal, snapshot) supersedes a trial's base line."""
    path = str(tmp_path)
    store = ExperimentStateStore(path)
    trials = [Trial("f", trial_id=f"abc_{i:05d}", experiment_path=path) for i in range(3)]
    for trial in trials:
        trial.set_status(TrialStatus.TERMINATED)
        store.record_trial(trial)
    store.snapshot(trials, {})
    trials[2].last_result = {"x": 1}
    store.record_trial(trials[2])  # journaled after the snapshot
    assert ExperimentStateStore(path).load().in_base == {"abc_00000", "abc_00001"}


def test_a_base_file_written_since_the_restore_read_it_is_written_whole(tmp_path, run_config):
    """Two restores of one experiment fitted one after the other: the second, which
    read the state before the first ran, leaves files that say what its run says."""
    path = _experiment(tmp_path, run_config)
    open(os.path.join(tmp_path, "fixed"), "w").close()
    first = tune.Tuner.restore(path, trainable=_broken_until_fixed, restart_errored=True)
    second = tune.Tuner.restore(path, trainable=_broken_until_fixed)
    assert first.fit().num_errors == 0
    assert _statuses(path)["1"] == "TERMINATED"
    assert second.fit().num_errors == 1  # its state, read before the first fit
    assert _statuses(path) == {"0": "TERMINATED", "1": "ERROR", "2": "TERMINATED"}


def test_a_trial_that_failed_before_reporting_keeps_its_tag_when_rebuilt_from_its_folder(
    tmp_path, run_config
):
    """Its record damaged, the trial is rebuilt from its folder, which holds no result
    (the tag's usual source): the tag comes from the folder's name."""
    path = _experiment(tmp_path, run_config)
    lines = _base(path).split(b"\n")
    index = next(i for i, line in enumerate(lines) if b'_00001"' in line)
    damaged = bytearray(lines[index])
    damaged[20] ^= 0x01  # inside its JSON: its checksum fails
    lines[index] = bytes(damaged)
    with open(os.path.join(path, BASE_FILE), "wb") as f:
        f.write(b"\n".join(lines))
    tune.Tuner.restore(path, trainable=_broken_until_fixed).fit()
    assert _statuses(path) == {"0": "TERMINATED", "1": "ERROR", "2": "TERMINATED"}
