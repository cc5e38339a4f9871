"""Fixtures shared by the searcher integration tests."""

from __future__ import annotations

import pytest

import fasttune as tune


@pytest.fixture
def two_cpus():
    """fasttune on two CPUs and no GPU for the test (``pytest.mark.usefixtures("two_cpus")``)."""
    tune.init(num_cpus=2, num_gpus=0)
    yield
    tune.shutdown()


@pytest.fixture
def run_tuner(tmp_path):
    """Run ``fn`` through a real Tuner (worker processes, files in tmp_path)."""

    def run(fn, searcher, param_space=None, num_samples=8, concurrent=None, **tune_kwargs):
        tuner = tune.Tuner(
            fn,
            param_space=param_space,
            tune_config=tune.TuneConfig(
                search_alg=searcher,
                num_samples=num_samples,
                max_concurrent_trials=concurrent,
                **tune_kwargs,
            ),
            run_config=tune.RunConfig(storage_path=str(tmp_path / "results"), verbose=0),
        )
        return tuner.fit()

    return run
