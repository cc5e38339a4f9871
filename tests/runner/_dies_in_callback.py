"""A driver that SIGKILLs itself inside on_trial_complete, once: the trial's ending is
recorded, its callback has not finished. Run by test_missed_endings.py."""

from __future__ import annotations

import os
import signal
import sys

import fasttune as tune


def one_report(config):
    tune.report({"score": config["x"]})


class DiesOnceThenLogs(tune.Callback):
    """Dies in its first on_trial_complete; logs every later one to ``log``."""

    def __init__(self, marker: str, log: str):
        self.marker, self.log = marker, log

    def on_trial_complete(self, iteration, trials, trial, **info):
        if not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
        with open(self.log, "a") as f:
            f.write(f"{trial.config['x']}\n")


def make_tuner(storage: str, side: str) -> tune.Tuner:
    return tune.Tuner(
        one_report,
        param_space={"x": tune.grid_search([1, 2, 3])},
        tune_config=tune.TuneConfig(max_concurrent_trials=1),
        run_config=tune.RunConfig(
            storage_path=storage,
            name="dies",
            verbose=0,
            callbacks=[
                DiesOnceThenLogs(os.path.join(side, "died"), os.path.join(side, "told.log"))
            ],
        ),
    )


if __name__ == "__main__":
    tune.init(num_cpus=2)
    make_tuner(sys.argv[1], sys.argv[2]).fit()
