"""Base records + live-only snapshots + journal: each finished trial written once."""

from __future__ import annotations

import json
import os

from fasttune._internal.experiment_state import ExperimentStateStore
from fasttune._internal.state_framing import read_lines
from fasttune._internal.state_layout import (
    BASE_FILE,
    JOURNAL_FILE,
    SNAPSHOT_FILE,
    CompletionBitmap,
    positions_in_bitmap,
)
from fasttune.experiment.trial import Trial, TrialStatus


def make_trials(path: str, n: int) -> list[Trial]:
    return [Trial("f", trial_id=f"abc_{i:05d}", experiment_path=path) for i in range(n)]


def lines(path: str) -> list[dict]:
    with open(path, "rb") as f:
        read = read_lines(f.read())
    assert not read.damaged and not read.torn_bytes
    return read.records


def started_store(path: str, n: int) -> tuple[ExperimentStateStore, list[Trial]]:
    """A store that recorded ``n`` new trials and took its first snapshot."""
    store = ExperimentStateStore(path)
    trials = make_trials(path, n)
    for t in trials:
        store.record_trial(t)
    store.snapshot(trials, {})
    return store, trials


def finish(store: ExperimentStateStore, trial: Trial, value: int) -> None:
    trial.last_result = {"x": value}
    trial.set_status(TrialStatus.TERMINATED)
    store.record_trial(trial)


def test_snapshot_lists_only_live_trials_and_base_grows_by_finished_ones(tmp_path):
    path = str(tmp_path)
    store, trials = started_store(path, 6)
    assert len(lines(os.path.join(path, BASE_FILE))) == 6  # first snapshot: everyone
    for t in trials[:4]:
        finish(store, t, int(t.trial_id[-1]))
    store.snapshot(trials, {})
    with open(os.path.join(path, SNAPSHOT_FILE)) as f:
        snapshot = json.load(f)
    assert [t["trial_id"] for t in snapshot["trials"]] == ["abc_00004", "abc_00005"]
    assert len(lines(os.path.join(path, BASE_FILE))) == 6 + 4
    # A snapshot with nothing new finished appends nothing.
    store.snapshot(trials, {})
    assert len(lines(os.path.join(path, BASE_FILE))) == 10
    store.close()

    loaded = ExperimentStateStore(path).load()
    assert [t["trial_id"] for t in loaded.trials] == [t.trial_id for t in trials]
    assert [t["status"] for t in loaded.trials] == ["TERMINATED"] * 4 + ["PENDING"] * 2
    assert [t["last_result"].get("x") for t in loaded.trials[:4]] == [0, 1, 2, 3]


def test_journal_and_base_records_are_the_states_encoded_whole(tmp_path):
    # A journal record's state is encoded once and spliced into the record; the base
    # record of a trial that ended is that same text. Both must be what encoding the
    # whole record gives, odd values included.
    from fasttune._internal.experiment_state import encode_record, trial_state
    from fasttune._internal.state_framing import frame_line

    path = str(tmp_path)
    store, trials = started_store(path, 2)
    trial = trials[0]
    trial.evaluated_params = {("a", "b"): 1, "ü": float("nan")}  # a tuple key, a NaN
    trial.last_result = {"x": float("inf"), "text": "per%cent \n ü"}
    trial.set_status(TrialStatus.TERMINATED)
    store.record_trial(trial)
    with open(os.path.join(path, JOURNAL_FILE), "rb") as f:
        journal = f.read()
    state = {**trial_state(trial), "pos": 0}
    assert journal == frame_line(encode_record({"seq": 3, "trial": state}))
    store.snapshot(trials, {})
    with open(os.path.join(path, BASE_FILE), "rb") as f:
        base = f.read()
    assert base.endswith(frame_line(encode_record(state)))
    store.close()
    loaded = ExperimentStateStore(path).load()
    assert loaded.trials[0]["last_result"]["text"] == "per%cent \n ü"


def test_crash_after_base_append_before_snapshot_keeps_the_latest_states(tmp_path):
    """Base appended, old snapshot still there: the journal's later lines win."""
    path = str(tmp_path)
    store, trials = started_store(path, 3)
    with open(os.path.join(path, SNAPSHOT_FILE), "rb") as f:
        old_snapshot = f.read()
    finish(store, trials[0], 7)
    with open(os.path.join(path, JOURNAL_FILE), "rb") as f:
        journal = f.read()
    store.snapshot(trials, {})
    store.close()
    # Put the state back as it was when the process died between the base append
    # and the snapshot's rename: old snapshot, old journal, new base.
    with open(os.path.join(path, SNAPSHOT_FILE), "wb") as f:
        f.write(old_snapshot)
    with open(os.path.join(path, JOURNAL_FILE), "wb") as f:
        f.write(journal)
    loaded = ExperimentStateStore(path).load()
    assert [t["status"] for t in loaded.trials] == ["TERMINATED", "PENDING", "PENDING"]
    assert loaded.trials[0]["last_result"] == {"x": 7}


def test_ended_trials_reach_the_base_file_in_whole_lines_before_the_next_snapshot(tmp_path):
    """Records of trials that end are not held until the next snapshot: they are
    written out in whole lines as they pile up (the snapshot makes them durable), and
    a crash before that snapshot loads the same states."""
    from fasttune._internal import base_records

    path = str(tmp_path)
    store, trials = started_store(path, 400)
    base = os.path.join(path, BASE_FILE)
    for i, trial in enumerate(trials[:300]):
        finish(store, trial, i)  # ended: held until its callbacks are told
        trial.ending_told = True
        store.record_trial(trial)  # told: its last record, written out
    written = lines(base)  # whole lines only: nothing torn, nothing damaged
    assert 400 < len(written) < 400 + 300
    assert all(r["ending_told"] for r in written[400:])  # one line per trial
    assert store._base._size < base_records._WRITE_BYTES
    # The process dies here, before any snapshot: the journal and base agree.
    loaded = ExperimentStateStore(path).load()
    statuses = [t["status"] for t in loaded.trials]
    assert statuses == ["TERMINATED"] * 300 + ["PENDING"] * 100
    assert [t["last_result"] for t in loaded.trials[:300]] == [{"x": i} for i in range(300)]
    store.snapshot(trials, {})
    assert len(lines(base)) == 400 + 300
    store.close()


def test_a_base_write_that_fails_keeps_its_lines_for_the_next_snapshot(tmp_path, monkeypatch):
    """A full disk mid-write: the snapshot fails and keeps listing the trials; once
    there is space, the next one writes their lines whole (a torn one completed)."""
    import errno

    path = str(tmp_path)
    store, trials = started_store(path, 300)
    real_write = os.write
    calls = {"base": 0}

    def write(fd, data):
        if fd == store._base._fd:
            calls["base"] += 1
            if calls["base"] == 1:  # the disk fills up: part of a line is written...
                return real_write(fd, bytes(data[:100]))
            if calls["base"] == 2:  # ...and nothing more
                raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    for i, trial in enumerate(trials[:200]):
        finish(store, trial, i)
        trial.ending_told = True
        try:
            store.record_trial(trial)
        except OSError:
            pass  # the disk was full when its line was written out
    store.snapshot(trials, {})  # space again
    store.close()
    written = lines(os.path.join(path, BASE_FILE))  # nothing torn, nothing damaged
    loaded = ExperimentStateStore(path).load()
    assert [t["status"] for t in loaded.trials] == ["TERMINATED"] * 200 + ["PENDING"] * 100
    assert len(written) == 300 + 200


def test_a_restored_runs_first_snapshot_empties_the_journal_it_found(tmp_path):
    """The earlier run's journal lines are in the new snapshot: left, they would be
    applied again over it after a crash (a trial the restore set to run again read
    back as it was)."""
    path = str(tmp_path)
    store, trials = started_store(path, 2)
    trials[0].set_status(TrialStatus.ERROR)
    store.record_trial(trials[0])  # journaled; the driver dies before a snapshot
    # The restored run: trial 0 runs again (PENDING); its first snapshot, then a crash.
    restored = make_trials(path, 2)
    restored_store = ExperimentStateStore(path)
    restored_store.snapshot(restored, {})
    loaded = ExperimentStateStore(path).load()
    assert [t["status"] for t in loaded.trials] == ["PENDING", "PENDING"]


def test_torn_base_line_is_ignored(tmp_path):
    path = str(tmp_path)
    store, trials = started_store(path, 2)
    finish(store, trials[0], 1)
    store.snapshot(trials, {})
    store.close()
    with open(os.path.join(path, BASE_FILE), "ab") as f:
        f.write(b'{"trial_id": "abc_00001", "sta')  # a write the crash cut
    loaded = ExperimentStateStore(path).load()
    assert [t["status"] for t in loaded.trials] == ["TERMINATED", "PENDING"]


def test_version_1_state_without_positions_still_loads(tmp_path):
    path = str(tmp_path)
    trials = make_trials(path, 3)
    states = [dict(t.to_json(), last_result={}, evaluated_params={}) for t in trials]
    document = {"version": 1, "journal_seq": 0, "meta": {}, "trials": states[:2]}
    with open(os.path.join(path, SNAPSHOT_FILE), "w") as f:
        json.dump(document, f)
    with open(os.path.join(path, JOURNAL_FILE), "w") as f:
        f.write(json.dumps({"seq": 1, "trial": states[2]}) + "\n")
    loaded = ExperimentStateStore(path).load()
    assert [t["trial_id"] for t in loaded.trials] == [t.trial_id for t in trials]


def test_completion_bitmap_round_trip():
    positions = {f"t{i}": i for i in range(1000)}
    done = CompletionBitmap(positions)
    done.update(["t0", "t7", "t8", "t999"])
    assert "t7" in done and "t8" in done and "t1" not in done and "unknown" not in done
    bits = done.to_bytes()
    assert positions_in_bitmap(bits) == [0, 7, 8, 999]
    assert len(bits) < 1000 // 8 + 80  # a bit per trial, not an id


def start(store: ExperimentStateStore, trial: Trial) -> None:
    trial.ending_told = False
    trial.set_status(TrialStatus.RUNNING)
    store.record_start(trial)


def test_a_start_that_changes_nothing_else_is_journaled_as_the_change_alone(tmp_path):
    path = str(tmp_path)
    store, trials = started_store(path, 3)
    start(store, trials[0])
    trials[1].set_experiment_tag("1_x=2")  # changed while pending: the whole record
    start(store, trials[1])
    journal = lines(os.path.join(path, JOURNAL_FILE))
    assert journal[0] == {
        "seq": 4,
        "change": {
            "trial_id": "abc_00000",
            "status": "RUNNING",
            "start_time": trials[0].start_time,
            "ending_told": False,
        },
    }
    assert journal[1]["trial"]["experiment_tag"] == "1_x=2"
    store.close()

    loaded = {t["trial_id"]: t for t in ExperimentStateStore(path).load().trials}
    assert loaded["abc_00000"]["status"] == "RUNNING"
    assert loaded["abc_00000"]["start_time"] == trials[0].start_time
    assert loaded["abc_00000"]["pos"] == 0  # the rest from the record before
    assert loaded["abc_00001"]["experiment_tag"] == "1_x=2"
    assert loaded["abc_00002"]["status"] == "PENDING"


def test_a_start_after_a_snapshot_or_a_restart_is_applied_in_order(tmp_path):
    path = str(tmp_path)
    store, trials = started_store(path, 2)
    start(store, trials[0])
    store.snapshot(trials, {})  # the start is in the snapshot now
    finish(store, trials[0], 7)
    trials[1].num_failures = 1  # changed since its last record: the whole state
    start(store, trials[1])
    store.close()
    loaded = {t["trial_id"]: t for t in ExperimentStateStore(path).load().trials}
    assert loaded["abc_00000"]["status"] == "TERMINATED"
    assert loaded["abc_00000"]["last_result"] == {"x": 7}
    assert loaded["abc_00001"]["status"] == "RUNNING"
    assert loaded["abc_00001"]["num_failures"] == 1

    # A restored store wrote no record of the trials it loaded: their starts are
    # written whole; a trial it records itself starts with the change alone.
    restored = ExperimentStateStore(path)
    restored.load()
    loaded_trial, new_trial = make_trials(path, 3)[1:]
    start(restored, loaded_trial)
    restored.record_trial(new_trial)
    start(restored, new_trial)
    restored.close()
    journal = lines(os.path.join(path, JOURNAL_FILE))
    assert [next(k for k in r if k != "seq") for r in journal[-3:]] == ["trial", "trial", "change"]
    assert journal[-3]["trial"]["trial_id"] == "abc_00001"
    assert journal[-1]["change"]["trial_id"] == "abc_00002"
