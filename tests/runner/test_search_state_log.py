"""The search state log: appends instead of file replacements, bounded size, and a
driver killed at or inside an append restores to the uninterrupted run's configs."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest

import fasttune as tune
from fasttune._internal.search_state_log import (
    SEARCH_LOG_HEADER,
    SearchStateLog,
    frame_search_record,
    last_search_record,
)
from fasttune._internal.state_files import load_search_state
from fasttune._internal.state_framing import DamagedStateError, seal_pickle
from fasttune._internal.state_layout import SEARCH_STATE_FILE
from tests.runner._killed_in_search_save import make_tuner

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


def test_saves_append_to_one_open_file_and_the_last_record_wins(tmp_path):
    path = str(tmp_path / SEARCH_STATE_FILE)
    log = SearchStateLog(path)
    log.save(b"first")
    inode = os.stat(path).st_ino
    for i in range(5):
        log.save(f"state {i}".encode())
    assert os.stat(path).st_ino == inode  # appended: the file was not replaced
    data = open(path, "rb").read()
    assert data.startswith(SEARCH_LOG_HEADER)
    assert last_search_record(data) == b"state 4"
    log.save(b"compacted", compact=True)
    data = open(path, "rb").read()
    assert data == SEARCH_LOG_HEADER + frame_search_record(b"compacted")
    log.close()


def test_the_log_is_rewritten_when_it_grows_past_its_bound(tmp_path):
    path = str(tmp_path / SEARCH_STATE_FILE)
    log = SearchStateLog(path)
    payload = b"x" * 300_000  # the bound is 8 records of this size
    for i in range(30):
        log.save(payload + bytes([i]))
        assert os.path.getsize(path) <= len(SEARCH_LOG_HEADER) + 9 * (len(payload) + 17)
    assert last_search_record(open(path, "rb").read()) == payload + bytes([29])
    log.close()


def test_a_record_cut_by_a_crash_leaves_the_one_before_it():
    data = SEARCH_LOG_HEADER + frame_search_record(b"one") + frame_search_record(b"two")
    third = frame_search_record(b"three" * 10)
    for cut in range(1, len(third)):
        assert last_search_record(data + third[:cut]) == b"two"
    assert last_search_record(SEARCH_LOG_HEADER) is None


@pytest.mark.parametrize("where", [2, 9, 13, 20])  # length, its checksum, the payload's, payload
def test_a_changed_byte_is_found_by_a_checksum(where):
    record = frame_search_record(b"the state of the searcher")
    data = bytearray(SEARCH_LOG_HEADER + record + frame_search_record(b"later"))
    data[len(SEARCH_LOG_HEADER) + where] ^= 0x01
    with pytest.raises(DamagedStateError, match="checksum"):
        last_search_record(bytes(data))


def test_a_single_pickle_written_by_an_earlier_version_is_still_read(tmp_path):
    path = tmp_path / SEARCH_STATE_FILE
    state = {"num_trials": 3, "completed_bits": b"", "state": {"a": 1}}
    path.write_bytes(seal_pickle(pickle.dumps(state)))
    assert load_search_state(str(path)) == state
    path.write_bytes(pickle.dumps(state))  # before checksums: a bare pickle
    assert load_search_state(str(path)) == state


def _configs(grid) -> list[tuple[float, int]]:
    assert grid.num_errors == 0 and len(grid) == 8
    assert all(r.metrics["training_iteration"] == 2 for r in grid)
    return sorted((r.config["x"], r.config["g"]) for r in grid)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["after", "torn"])
@pytest.mark.parametrize("k", [1, 3])
def test_a_driver_killed_at_an_append_restores_to_the_same_configs(tmp_path, k, how):
    """SIGKILLed once a record is whole (its trial not started) or halfway through
    one: the restored run ends with the configs of a run never interrupted."""
    expected = _configs(make_tuner(str(tmp_path / "reference")).fit())
    storage = str(tmp_path / "killed")
    proc = subprocess.run(
        [sys.executable, "-m", "tests.runner._killed_in_search_save", storage, str(k), how],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == -9, proc.stderr
    path = os.path.join(storage, "search")
    data = open(os.path.join(path, SEARCH_STATE_FILE), "rb").read()
    assert data.startswith(SEARCH_LOG_HEADER)
    restored = tune.Tuner.restore(path, make_tuner(storage)._trainable, resume_errored=True)
    assert _configs(restored.fit()) == expected
