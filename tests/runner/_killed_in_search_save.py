"""A driver that SIGKILLs itself at its k-th append to the search state log.

``after``: once the record is whole (the trial it was written for has not started);
``torn``: halfway through the record, as a crash during the write leaves it.
Run: ``python -m tests.runner._killed_in_search_save <storage> <k> after|torn``.
"""

from __future__ import annotations

import os
import signal
import sys

import fasttune as tune
from fasttune._internal import search_state_log
from fasttune.search import BasicVariantGenerator


def objective(config):
    for i in range(2):
        tune.report({"score": config["x"] * 10 + i})


def make_tuner(storage: str) -> tune.Tuner:
    return tune.Tuner(
        objective,
        param_space={"x": tune.uniform(0, 1), "g": tune.grid_search([1, 2])},
        tune_config=tune.TuneConfig(
            num_samples=4,
            max_concurrent_trials=2,
            search_alg=BasicVariantGenerator(random_state=7),
        ),
        run_config=tune.RunConfig(storage_path=storage, name="search", verbose=0),
    )


def _kill_at_append(k: int, torn: bool) -> None:
    seen = [0]
    real_save = search_state_log.SearchStateLog.save

    def save(self, payload, *, compact=False):
        if self._file is not None and not compact:  # an append, not a rewrite
            seen[0] += 1
            if seen[0] == k:
                record = search_state_log.frame_search_record(payload)
                if torn:
                    self._file.write(record[: len(record) // 2])
                else:
                    self._file.write(record)
                os.kill(os.getpid(), signal.SIGKILL)
        return real_save(self, payload, compact=compact)

    search_state_log.SearchStateLog.save = save  # type: ignore[method-assign]


if __name__ == "__main__":
    storage, k, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    tune.init(num_cpus=2)
    _kill_at_append(k, how == "torn")
    make_tuner(storage).fit()
    print("finished", flush=True)
