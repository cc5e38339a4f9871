"""The function-API example from Ray's "Training in Tune" page, with only the import swapped.

Timed as a whole process by ``bench_runner.py`` (Ray Tune 2.60: 9.5 s on 2 cores).
"""

import fasttune as tune  # was: from ray import tune


def objective(x, a, b):
    return a * (x**0.5) + b


def trainable(config):
    for x in range(20):
        score = objective(x, config["a"], config["b"])
        tune.report({"score": score})


if __name__ == "__main__":
    import sys

    tuner = tune.Tuner(
        trainable,
        param_space={"a": 2, "b": 4},
        run_config=tune.RunConfig(storage_path=sys.argv[1] if len(sys.argv) > 1 else None),
    )
    results = tuner.fit()
