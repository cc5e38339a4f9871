"""The shared floor's ``trials`` workload with a new worker process for each trial.

``reuse_actors=False`` promises each trial a process of its own (Ray Tune starts an
actor per trial). ``../shared/bench/floor.py`` keeps two worker processes for all its
trials, so no runner keeping that promise can approach it: this is the same floor with
the cheapest new process there is, ``os.fork()`` of the floor's own bare interpreter,
for each trial (reaped when it ends). Its ratio to the floor bounds every runner that
starts a process per trial, fasttune with ``reuse_actors=False`` included.

Usage: ``python bench/floor_fresh_process.py trials``; prints a RESULT line as the floor.
"""

import json
import os
import sys
import tempfile
import time
from multiprocessing import Pipe
from multiprocessing.connection import wait

from _shared_floor import load_floor

floor = load_floor()


def main() -> None:
    store = tempfile.mkdtemp(prefix="floor_fresh_")
    n, reports = 500, 10
    start = time.time()
    next_trial, busy = 0, {}

    def launch() -> None:
        nonlocal next_trial
        ours, theirs = Pipe()
        pid = os.fork()
        if pid == 0:  # the trial's process: one trial, then it exits
            ours.close()
            try:
                floor.worker(theirs, reports)
            finally:
                os._exit(0)
        theirs.close()
        tid, cfg = f"t{next_trial:05d}", {"x": next_trial / n}
        tdir = os.path.join(store, tid)
        os.makedirs(tdir)
        tmp = os.path.join(tdir, ".params.json.tmp")
        with open(tmp, "w") as f:
            json.dump(cfg, f)
        os.replace(tmp, os.path.join(tdir, "params.json"))
        ours.send((tid, cfg))
        ours.send(None)  # its worker returns after this trial
        busy[ours] = (tdir, pid)
        next_trial += 1

    for _ in range(2):
        launch()
    while busy:
        for conn in wait(list(busy)):
            batch = conn.recv()
            tdir, pid = busy[conn]
            floor.write_results(tdir, batch)
            if batch[-1]["done"]:
                del busy[conn]
                conn.close()
                os.waitpid(pid, 0)
                if next_trial < n:
                    launch()
    rate = n / (time.time() - start)
    print(
        "RESULT "
        + json.dumps({"workload": "floor-trials-fresh-process", "trials_per_s": round(rate, 1)})
    )


if __name__ == "__main__":
    if sys.argv[1:] != ["trials"]:
        sys.exit("usage: floor_fresh_process.py trials")
    main()
