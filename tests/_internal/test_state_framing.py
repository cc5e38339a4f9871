"""Checksummed framing of the state logs: every damage found, old formats still read."""

from __future__ import annotations

import json
import pickle

import pytest

from fasttune._internal.state_framing import (
    CONFIGS_HEADER,
    frame_blob,
    frame_line,
    read_blobs,
    read_document,
    read_lines,
    seal_document,
)


def _line(i: int) -> bytes:
    return (json.dumps({"seq": i, "trial": {"trial_id": f"abc_{i:05d}"}}) + "\n").encode()


def _journal(n: int) -> bytes:
    return b"".join(frame_line(_line(i)) for i in range(n))


def test_lines_round_trip_and_plain_lines_of_old_experiments_are_read():
    data = _line(0) + _journal(3)[len(frame_line(_line(0))) :] + _line(9)
    read = read_lines(data)
    assert [r["seq"] for r in read.records] == [0, 1, 2, 9]
    assert read.loss("j") is None


def test_every_flipped_byte_of_a_record_is_found_and_only_that_record_is_lost():
    data = _journal(5)
    start = len(_journal(2))  # record 3 (1-based)
    end = len(_journal(3))
    for offset in range(start, end - 1):  # the newline itself: see the next test
        damaged = bytearray(data)
        damaged[offset] ^= 0x20
        read = read_lines(bytes(damaged))
        assert [r["seq"] for r in read.records] == [0, 1, 3, 4], offset
        assert read.damaged == [3], offset
        loss = read.loss("exp/experiment_state.journal")
        assert loss is not None and "exp/experiment_state.journal" in loss
        assert "1 damaged record(s)" in loss and "4 intact record(s)" in loss


def test_a_lost_newline_merges_two_records_and_both_are_reported():
    data = bytearray(_journal(4))
    data[len(_journal(2)) - 1] = ord(" ")
    read = read_lines(bytes(data))
    assert [r["seq"] for r in read.records] == [0, 3]
    assert read.damaged == [2]
    assert "abc_00001" in (read.loss("j") or "")  # the trial whose state was lost is named


def test_a_record_cut_at_every_byte_keeps_every_record_before_it():
    data = _journal(4)
    start = len(_journal(3))
    for cut in range(start, len(data)):
        read = read_lines(data[:cut])
        assert [r["seq"] for r in read.records] == [0, 1, 2], cut
        assert read.torn_bytes == cut - start
        if cut > start:
            assert "not a whole record" in (read.loss("j") or "")


def test_garbage_is_reported_not_raised():
    read = read_lines(bytes(range(256)) * 4)
    assert read.records == [] and read.damaged
    assert read.loss("j") is not None


def _configs(n: int) -> bytes:
    return CONFIGS_HEADER + b"".join(frame_blob(pickle.dumps((i, {"x": i}))) for i in range(n))


def test_many_lines_decoded_together_keep_their_order_among_plain_and_damaged_ones():
    """Checked lines are decoded many at a time (one JSON array): the records come
    out in file order, across chunks, plain lines and damaged lines alike."""
    from fasttune._internal import state_framing

    count = state_framing._DECODED_TOGETHER * 2 + 7
    lines = [frame_line(_line(i)) for i in range(count)]
    lines[5] = _line(5)  # written before checksums
    lines[state_framing._DECODED_TOGETHER + 1] = (
        b"0" + lines[state_framing._DECODED_TOGETHER + 1][1:]
    )
    read = read_lines(b"".join(lines))
    expected = [i for i in range(count) if i != state_framing._DECODED_TOGETHER + 1]
    assert [r["seq"] for r in read.records] == expected
    assert read.damaged == [state_framing._DECODED_TOGETHER + 2]


def test_a_checksum_that_matches_text_that_is_not_json_loses_that_line_alone():
    """A line whose checksum holds but whose text is no JSON object (damage the
    checksum missed by chance) is reported; the lines decoded with it are kept."""
    bad = [b"{not json\n", b"[1, 2]\n", b'{"seq": 1}, {"seq": 2}\n']
    for text in bad:
        data = _journal(3) + frame_line(text) + frame_line(_line(7))
        read = read_lines(data)
        assert [r["seq"] for r in read.records] == [0, 1, 2, 7], text
        assert read.damaged == [4], text


def test_configs_log_round_trip_and_the_format_before_checksums_is_read():
    assert [pickle.loads(b) for b in read_blobs(_configs(3)).records] == [
        (i, {"x": i}) for i in range(3)
    ]
    blobs = [pickle.dumps((i, {"x": i})) for i in range(3)]
    old = b"".join(len(b).to_bytes(8, "little") + b for b in blobs)
    assert read_blobs(old).records == blobs


def test_a_damaged_config_record_ends_the_reading_and_says_how_much_was_lost():
    data = _configs(4)
    start = len(_configs(2))
    payload = start + 12
    for offset in range(payload, len(_configs(3))):
        damaged = bytearray(data)
        damaged[offset] ^= 0x01
        read = read_blobs(bytes(damaged))
        assert len(read.records) == 2, offset
        assert read.unread_bytes == len(data) - start
        assert "record 3 is damaged" in (read.loss("trial_configs.pkl") or "")


def test_a_config_record_cut_at_every_byte_keeps_the_ones_before():
    data = _configs(3)
    start = len(_configs(2))
    for cut in range(start, len(data)):
        read = read_blobs(data[:cut])
        assert len(read.records) == 2, cut
    for cut in range(1, len(CONFIGS_HEADER)):  # a crash at the very first write
        assert read_blobs(CONFIGS_HEADER[:cut]).records == []


def test_a_sealed_snapshot_is_still_json_and_any_changed_byte_is_found():
    trials = [{"trial_id": "a", "x": 12345}]
    document = (json.dumps({"version": 3, "trials": trials}) + "\n").encode()
    sealed = seal_document(document)
    assert json.loads(sealed)["trials"] == trials  # JSON readers see one key more
    assert read_document(sealed, sealed_since=3)["trials"] == trials
    for offset in range(len(sealed) - 1):
        damaged = bytearray(sealed)
        damaged[offset] ^= 0x01
        with pytest.raises(ValueError):
            read_document(bytes(damaged), sealed_since=3)
    old = (json.dumps({"version": 2, "trials": trials}) + "\n").encode()
    assert read_document(old, sealed_since=3)["trials"] == trials  # before checksums
    with pytest.raises(ValueError, match="missing"):
        read_document(document, sealed_since=3)
