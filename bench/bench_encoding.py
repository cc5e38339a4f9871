"""What encoding one result costs in the default loggers' files, per path.

A worker turns each result of a trial into a ``result.json`` line, a ``progress.csv``
row and a TensorBoard event. For a result like the throughput workload's (one metric
plus the keys every result gets), this prints the microseconds per result of:

- the general encoders: the JSON line (C encoder) and the CSV row (``csv.writer``);
- a ``LineTemplate`` (logger/_line_template.py) making both from one formatting of
  the numbers;
- the TensorBoard summary: the one-call ``struct`` plan of a result shape, and the
  general path that encodes value by value.

Medians of several rounds; run: ``.venv/bin/python bench/bench_encoding.py``.
"""

from __future__ import annotations

import csv
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from fasttune._support.encoding import encode_result_line
from fasttune._support.flatten import flatten_result
from fasttune.logger._line_template import LineTemplate
from fasttune.logger.tensorboardx import TBXResultWriter

ROUNDS, N = 7, 20_000


def results() -> list[dict[str, Any]]:
    """Results as a function trainable reports them, with their auto-filled keys."""
    config = {"x": 0.5}
    rng = random.Random(0)
    out = []
    for i in range(N):
        total = rng.random() * 10
        out.append({
            "score": 0.5 + i, "timestamp": 1795530483, "checkpoint_dir_name": None,
            "done": False, "training_iteration": i + 1, "trial_id": "a1b2c_00000",
            "date": "2026-11-24_14-28-03", "time_this_iter_s": rng.random() * 1e-5,
            "time_total_s": total, "pid": 27011, "hostname": "vm", "node_ip": "127.0.0.1",
            "config": config, "time_since_restore": total, "iterations_since_restore": i + 1,
            "warmup_time": 5.4e-05, "experiment_tag": "0_x=0.5",
        })  # fmt: skip
    return out


def per_result_us(label: str, body: Callable[[], None]) -> None:
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        body()
        times.append((time.perf_counter() - start) / N * 1e6)
    print(f"{label:44s} {statistics.median(times):6.2f} us")


def main() -> None:
    batch = results()
    flats = [flatten_result(r, {"config"}) for r in batch]
    rows: list[str] = []

    class Sink:
        write = rows.append

    writer = csv.writer(Sink(), lineterminator="\n")

    def general() -> None:
        for result, flat in zip(batch, flats):
            encode_result_line(result)
            writer.writerow(flat.values())
        rows.clear()

    writer.writerow(flats[0].values())
    template = LineTemplate.make(batch[0], None, rows.pop())
    assert template is not None

    def templated() -> None:
        encode = template.encode
        for result in batch:
            encode(result)

    tb = TBXResultWriter(tempfile.mkdtemp())

    def tb_plan() -> None:
        for result, flat in zip(batch, flats):
            tb.write_result(result, flat)

    def tb_general() -> None:
        for result, flat in zip(batch, flats):
            tb._write_general(flat, result["training_iteration"])

    per_result_us("JSON line + CSV row, general encoders", general)
    per_result_us("JSON line + CSV row, LineTemplate", templated)
    per_result_us("TensorBoard event, struct plan", tb_plan)
    per_result_us("TensorBoard event, value by value", tb_general)
    tb.close()


if __name__ == "__main__":
    main()
