"""An experiment in S3 for the dashboard's tests (API, command line and browser)."""

from __future__ import annotations

import uuid

import pytest

import fasttune as tune
from tests.experiments import failing


def run_failing(storage_path: str) -> None:
    """The experiment ``errors`` in ``storage_path``: x in 0.1, 0.5, 0.9; 0.9 fails."""
    tune.init(num_cpus=2, num_gpus=0)
    try:
        tune.Tuner(
            failing,
            param_space={"x": tune.grid_search([0.1, 0.5, 0.9])},
            tune_config=tune.TuneConfig(metric="loss", mode="min"),
            run_config=tune.RunConfig(
                storage_path=storage_path, name="errors", verbose=0, log_to_file=True
            ),
        ).fit()
    finally:
        tune.shutdown()


@pytest.fixture(scope="module")
def s3_root(s3_server, _s3_admin, tmp_path_factory):
    """``s3://<bucket>/results`` holding the experiment ``errors`` (3 trials, one fails),
    made by a real run with worker processes."""
    bucket = f"bucket-{uuid.uuid4().hex[:12]}"
    _s3_admin.mkdir(bucket)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FASTTUNE_STAGING_DIR", str(tmp_path_factory.mktemp("staging")))
        run_failing(f"s3://{bucket}/results")
    yield f"s3://{bucket}/results"
    _s3_admin.rm(bucket, recursive=True)
