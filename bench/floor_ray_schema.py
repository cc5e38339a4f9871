"""The shared floor with the results a Ray Tune user gets: 18 keys instead of 5.

``../shared/bench/floor.py`` streams 5-key results; every Tune-compatible runner
must write the keys Ray adds (date, pid, hostname, node_ip, time totals, config,
experiment id and tag...). This runs the same floor with such a result, to tell how
much of the gap to the floor is the result itself. Same usage and output as the
floor: ``python bench/floor_ray_schema.py trials|throughput``.
"""

import os
import sys
import time

from _shared_floor import load_floor

floor = load_floor()


def worker(conn, reports):
    host, pid = os.uname().nodename, os.getpid()
    while True:
        msg = conn.recv()
        if msg is None:
            return
        tid, config = msg
        batch, start = [], time.time()
        for i in range(reports):
            now = time.time()
            batch.append({
                "score": config["x"] + i, "done": i == reports - 1, "training_iteration": i + 1,
                "trial_id": tid, "date": time.strftime("%Y-%m-%d_%H-%M-%S"),
                "timestamp": int(now), "time_this_iter_s": 0.0, "time_total_s": now - start,
                "pid": pid, "hostname": host, "node_ip": "127.0.0.1", "config": config,
                "time_since_restore": now - start, "iterations_since_restore": i + 1,
                "experiment_id": "0123456789abcdef0123456789abcdef", "warmup_time": 0.0,
                "experiment_tag": f"{tid}_x={config['x']:.4f}", "checkpoint_dir_name": None,
            })  # fmt: skip
            if len(batch) >= 1000:
                conn.send(batch)
                batch = []
        conn.send(batch)


floor.worker = worker
if __name__ == "__main__":
    floor.main(sys.argv[1])
