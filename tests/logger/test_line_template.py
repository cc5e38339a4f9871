"""Lines encoded from a template are the general encoders' lines, byte for byte.

``LineTemplate`` (logger/_line_template.py) writes the ``result.json`` line and the
``progress.csv`` row of a result from the text of an earlier result of the same shape;
anything it cannot encode exactly must be refused (None) and left to the encoders.
"""

from __future__ import annotations

import csv
import os
import random

import pytest

from fasttune._support.encoding import encode_result_line
from fasttune._support.flatten import flatten_result
from fasttune.logger._line_template import LineTemplate
from fasttune.logger.logger_callback import default_logger_callbacks
from fasttune.logger.trial_result_files import (
    ResultFileKinds,
    TrialFilesSpec,
    TrialResultFiles,
    offloadable_loggers,
)

_TEXTS = [
    "", "plain", "with, comma", 'with "quotes"', "per%cent %s %d %%", "new\nline", "cr\rlf",
    "üñí©ødé", "\x1e0\x1e", '"\\u001e0\\u001e"', " leading space", "tab\there", "NaN", "null",
]  # fmt: skip
_NUMBERS = [
    0, 1, -7, 2**63, 10**30, 0.0, -0.0, 0.1, 1e-300, 1.7976931348623157e308, 3.0e-06, -2.5,
    1 / 3, 123456789.123456789,
]  # fmt: skip


def _csv_row(flat):
    rows = []

    class Sink:
        write = rows.append

    csv.writer(Sink(), lineterminator="\n").writerow(flat.values())
    return rows[0]


def _general(result):
    return encode_result_line(result), _csv_row(flatten_result(result, {"config"}))


# Auto-filled keys a template writes in its own ways: numbers that stay the same
# through a trial, and time_since_restore from time_total_s's text while they are equal.
_SPECIAL = [("pid", "int"), ("warmup_time", "float"), ("time_total_s", "float"),
            ("time_since_restore", "float")]  # fmt: skip


def _random_result(rng, keys):
    result = {}
    for key, kind in keys:
        if kind == "config":
            result[key] = {"lr": rng.choice(_NUMBERS), "name": rng.choice(_TEXTS), "n": {"d": 1}}
        elif kind == "int":
            result[key] = rng.choice([n for n in _NUMBERS if type(n) is int])
        elif kind == "float":
            result[key] = rng.choice([n for n in _NUMBERS if type(n) is float])
        elif kind == "text":
            result[key] = rng.choice(_TEXTS)
        elif kind == "bool":
            result[key] = rng.random() < 0.5
        else:
            result[key] = None
    if "time_since_restore" in result and rng.random() < 0.6:  # a trial never restored
        result["time_since_restore"] = result["time_total_s"]
    return result


def _random_shape(rng):
    kinds = ["int", "float", "text", "bool", "none"]
    names = [f"k{i}" for i in range(rng.randint(1, 12))] + ["per%cent", 'quo"te', "ü"]
    rng.shuffle(names)
    shape = [(name, rng.choice(kinds)) for name in names[: rng.randint(1, len(names))]]
    if rng.random() < 0.7:
        shape.insert(rng.randint(0, len(shape)), ("config", "config"))
    if rng.random() < 0.5:
        for special in _SPECIAL:
            shape.insert(rng.randint(0, len(shape)), special)
    return shape


@pytest.mark.parametrize("seed", range(40))
def test_a_template_writes_what_the_encoders_write_or_refuses(seed):
    rng = random.Random(seed)
    checked = 0
    for _ in range(50):
        shape = _random_shape(rng)
        first = _random_result(rng, shape)
        template = LineTemplate.make(first, *_general(first))
        if template is None:
            continue
        for _ in range(20):
            other = _random_result(rng, shape)
            if rng.random() < 0.5:  # the text values and the config of the first
                other.update({k: first[k] for k, kind in shape if kind not in ("int", "float")})
                other.update({k: first[k] for k in ("pid", "warmup_time") if k in first})
            lines = template.encode(other)
            if lines is not None:
                assert lines == _general(other), (first, other)
                checked += 1
    assert checked > 100  # the comparison ran on many results


@pytest.mark.parametrize("seed", range(40))
def test_a_shape_known_from_one_result_binds_the_texts_and_config_of_others(seed):
    # The trials of a worker share a shape: a template for a later trial's result is
    # bound from it, its texts and config written by their own encoders, and is
    # never checked against the general encoders as a made one is.
    rng = random.Random(1000 + seed)
    checked = 0
    for _ in range(50):
        shape = _random_shape(rng)
        first = _random_result(rng, shape)
        if LineTemplate.make(first, *_general(first)) is None:
            continue
        for _ in range(10):
            other = _random_result(rng, shape)
            template = LineTemplate.for_known_shape(other)
            if template is None:  # a fixed float zero (-0.0 == 0.0): left to the encoders
                assert other.get("warmup_time") == 0, other
                continue
            lines = template.encode(other)
            if lines is not None:
                assert lines == _general(other), (first, other)
                checked += 1
    assert checked > 100


def test_no_template_is_bound_for_a_shape_never_made():
    assert LineTemplate.for_known_shape({"never_made_here": 0.5, "date": "x"}) is None


def _result(**changes):
    result = {"score": 0.25, "iteration": 3, "date": "2026-11-24_10-00-00", "done": False,
              "config": {"x": 0.5}, "checkpoint_dir_name": None}  # fmt: skip
    result.update(changes)
    return result


def test_a_template_encodes_the_numbers_of_results_of_its_shape():
    first = _result()
    template = LineTemplate.make(first, None, _general(first)[1])
    assert template is not None
    later = _result(score=1e-07, iteration=4, config=first["config"])
    assert template.encode(later) == _general(later)
    assert template.encode(later)[0] == (
        b'{"score": 1e-07, "iteration": 4, "date": "2026-11-24_10-00-00", "done": false, '
        b'"config": {"x": 0.5}, "checkpoint_dir_name": null}\n'
    )


@pytest.mark.parametrize(
    "later",
    [
        _result(date="2026-11-24_10-00-01"),  # another text
        _result(done=True),  # another flag
        _result(iteration=4.0),  # a number of another type
        _result(score=float("nan")),  # JSON writes NaN its own way
        _result(score=float("inf")),
        _result(iteration=10**400),  # beyond a float
        _result(config={"x": 0.75}),  # another config
        {**_result(), "extra": 1},  # another key
        {k: v for k, v in reversed(_result().items())},  # another order
        _result(score=True),  # True == 1: a flag is not a number
    ],
    ids=["date", "done", "type", "nan", "inf", "huge", "config", "key", "order", "bool"],
)
def test_a_template_refuses_results_of_another_shape(later):
    first = _result()
    template = LineTemplate.make(first, None, _general(first)[1])
    assert template is not None
    assert template.encode(later) is None


@pytest.mark.parametrize(
    "first",
    [
        _result(score=[1, 2]),  # a list: the general path
        _result(nested={"a": 1}),  # flattened into columns
        {"date": "x", "done": False},  # no number
        {1: 0.5, "date": "x"},  # a key JSON turns into text
    ],
    ids=["list", "nested", "no-number", "int-key"],
)
def test_no_template_for_results_it_cannot_write(first):
    assert LineTemplate.make(first, None, None) is None


def test_a_config_holding_arrays_is_refused_not_raised():
    np = pytest.importorskip("numpy")
    first = _result(config={"w": np.zeros(3)})
    template = LineTemplate.make(first, None, _general(first)[1])
    assert template is not None
    assert template.encode(_result(config={"w": np.ones(3)})) is None


def _files_of(trial_dir):
    names = ("result.json", "progress.csv")
    return {n: open(os.path.join(trial_dir, n), "rb").read() for n in names}


def _write(trial_dir, batches, config):
    kinds, _ = offloadable_loggers(default_logger_callbacks())
    kinds = ResultFileKinds(json=kinds.json, csv=kinds.csv)
    files = TrialResultFiles(str(trial_dir), TrialFilesSpec(kinds, experiment_tag="0_x=1"), config)
    for batch in batches:
        files.write([dict(r) for r in batch])
    files.close()
    return _files_of(trial_dir)


def test_batches_write_the_files_result_by_result_writing_writes(tmp_path):
    config = {"x": 1}
    results = [_result(score=i / 7, iteration=i, config=config) for i in range(30)]
    results[12]["date"] = "2026-11-24_10-00-01"  # the date moves on mid-batch
    for r in results[13:]:
        r["date"] = "2026-11-24_10-00-01"
    results[20]["new_metric"] = 5  # a new column: the CSV header grows
    results[25]["score"] = float("nan")
    completed = {**results[0], "experiment_tag": "0_x=1"}  # as the writing completes it
    assert LineTemplate.make(completed, None, _general(completed)[1]) is not None  # batches use one
    one_by_one = _write(tmp_path / "a", [[r] for r in results], config)
    batched = _write(tmp_path / "b", [results[:17], results[17:]], config)
    assert batched == one_by_one
    assert batched["progress.csv"].splitlines()[0].endswith(b",new_metric")


def test_a_config_changed_in_place_between_batches_is_written_as_it_is_then(tmp_path):
    config = {"x": 1}
    spec = TrialFilesSpec(ResultFileKinds(json=True, csv=True), experiment_tag="0_x=1")
    files = TrialResultFiles(str(tmp_path), spec, config)
    files.write([_result(iteration=i, config=config) for i in range(5)])
    config["x"] = 2  # a trainable may change its config between reports
    files.write([_result(iteration=i, config=config) for i in range(5, 10)])
    files.close()
    lines = _files_of(tmp_path)["result.json"].splitlines()
    assert [b'"config": {"x": 1}' in line for line in lines] == [True] * 5 + [False] * 5
    assert all(b'"config": {"x": 2}' in line for line in lines[5:])


def test_a_restored_csv_with_other_columns_gets_rows_under_its_header(tmp_path):
    trial_dir = tmp_path / "t"
    trial_dir.mkdir()
    (trial_dir / "progress.csv").write_text("iteration,score,old_metric\n1,0.5,3\n")
    config = {"x": 1}
    results = [_result(score=i / 3, iteration=i, config=config) for i in range(2, 8)]
    _write(trial_dir, [results], config)
    rows = list(csv.DictReader(open(trial_dir / "progress.csv")))
    assert [row["iteration"] for row in rows] == ["1", "2", "3", "4", "5", "6", "7"]
    assert rows[2]["score"] == repr(3 / 3) and rows[2]["old_metric"] == ""


_CONFIG = {"x": 0.5}  # one object: a trial's results share its config


def _auto_filled(**changes):
    result = {"score": 0.25, "done": False, "training_iteration": 3, "trial_id": "a_00001",
              "date": "2026-11-24_10-00-00", "timestamp": 1795635972,
              "time_this_iter_s": 2.86102294921875e-06, "time_total_s": 6.222724914550781e-05,
              "pid": 3094, "hostname": "vm", "node_ip": "127.0.0.1", "config": _CONFIG,
              "time_since_restore": 6.222724914550781e-05, "iterations_since_restore": 3,
              "warmup_time": 0.00021648406982421875, "checkpoint_dir_name": None}  # fmt: skip
    result.update(changes)
    return result


def test_a_trials_fixed_numbers_and_its_time_since_restore_are_written_without_formatting():
    first = _auto_filled()
    template = LineTemplate.make(first, *_general(first))
    assert template is not None
    # Neither pid nor warmup_time is among the numbers formatted for each result, and
    # time_since_restore is written with time_total_s's text.
    assert len(template._numbers(first)) == 6 and template._expand is not None
    for i in range(1, 6):
        total = 6.222724914550781e-05 * i + 1 / 3
        later = _auto_filled(score=i / 7, training_iteration=3 + i, time_total_s=total,
                             time_since_restore=total, iterations_since_restore=3 + i)  # fmt: skip
        assert template.encode(later) == _general(later)
    # Anything else is refused, for the encoders to write.
    for refused in (
        _auto_filled(time_since_restore=1.5),  # restored: the two times differ
        _auto_filled(pid=3095),
        _auto_filled(warmup_time=0.5),
        _auto_filled(config={"x": 0.5}),  # another config object (checked by identity)
        _auto_filled(time_total_s=0.0, time_since_restore=0.0),  # -0.0 == 0.0: zeros refused
        _auto_filled(time_total_s=-0.0, time_since_restore=0.0),
    ):
        assert template.encode(refused) is None, refused


def test_a_restored_trials_template_formats_both_times():
    restored = _auto_filled(time_total_s=12.5, time_since_restore=6.222724914550781e-05)
    template = LineTemplate.for_known_shape(restored) or LineTemplate.make(
        restored, *_general(restored)
    )
    assert template is not None and template._expand is None
    later = _auto_filled(time_total_s=13.75, time_since_restore=1.25)
    assert template.encode(later) == _general(later)
    same = _auto_filled(time_total_s=2.0, time_since_restore=2.0)  # equal now: no matter
    assert template.encode(same) == _general(same)


def test_no_template_is_bound_to_a_result_whose_fixed_float_is_not_finite_or_zero():
    first = _auto_filled()
    assert LineTemplate.make(first, *_general(first)) is not None
    assert LineTemplate.for_known_shape(_auto_filled(warmup_time=float("nan"))) is None
    assert LineTemplate.for_known_shape(_auto_filled(warmup_time=float("inf"))) is None
    # Nor to one whose fixed float is a zero: -0.0 == 0.0, but they are written apart.
    assert LineTemplate.for_known_shape(_auto_filled(warmup_time=0.0)) is None
    assert LineTemplate.for_known_shape(_auto_filled(warmup_time=-0.0)) is None
    # An int of any size is written as it is (a float could not hold this one).
    huge = _auto_filled(pid=10**400)
    template = LineTemplate.for_known_shape(huge)
    assert template is not None and template.encode(huge) == _general(huge)
