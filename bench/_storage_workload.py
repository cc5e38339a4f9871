"""One contender of bench_storage.py: the checkpoint workload with storage_path in S3.

Usage: python _storage_workload.py TARGET STORAGE_URL   (TARGET: fasttune | ray | floor)
The S3 endpoint and credentials come from the environment (AWS_ENDPOINT_URL...).
Prints one line: RESULT {...} with mb_per_s.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

TRIALS, ITERATIONS, KEEP = 4, 10, 2
MB = int(os.environ.get("MB", 8))


def run_tuner(tune, url: str) -> float:
    def fn(config):
        blob = os.urandom(MB << 20)
        start = 0
        checkpoint = tune.get_checkpoint()
        if checkpoint:
            with checkpoint.as_directory() as d, open(os.path.join(d, "it")) as f:
                start = int(f.read())
        for i in range(start, ITERATIONS):
            d = tempfile.mkdtemp()
            with open(os.path.join(d, "blob"), "wb") as f:
                f.write(blob)
            with open(os.path.join(d, "it"), "w") as f:
                f.write(str(i + 1))
            tune.report({"score": i}, checkpoint=tune.Checkpoint.from_directory(d))

    tuner = tune.Tuner(
        fn,
        param_space={"x": tune.grid_search(list(range(TRIALS)))},
        run_config=tune.RunConfig(
            storage_path=url,
            name="ckpt",
            verbose=0,
            checkpoint_config=tune.CheckpointConfig(num_to_keep=KEEP),
        ),
    )
    start = time.perf_counter()
    grid = tuner.fit()
    elapsed = time.perf_counter() - start
    assert not grid.errors and all(r.checkpoint is not None for r in grid)
    return elapsed


def _floor_slot(url: str, trials: list[int]) -> None:
    """Plain s3fs: the same checkpoints written locally and uploaded, two kept."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(url)
    blob = os.urandom(MB << 20)
    for trial in trials:
        for i in range(ITERATIONS):
            d = tempfile.mkdtemp()
            with open(os.path.join(d, "blob"), "wb") as f:
                f.write(blob)
            with open(os.path.join(d, "it"), "w") as f:
                f.write(str(i + 1))
            target = f"{root}/trial_{trial}/checkpoint_{i:06d}"
            fs.put([f"{d}/blob", f"{d}/it"], [f"{target}/blob", f"{target}/it"])
            if i >= KEEP:
                fs.rm(f"{root}/trial_{trial}/checkpoint_{i - KEEP:06d}", recursive=True)


def run_floor(url: str) -> float:
    from multiprocessing import get_context

    ctx = get_context("spawn")
    slots = [
        ctx.Process(target=_floor_slot, args=(url, list(range(s, TRIALS, 2)))) for s in range(2)
    ]
    start = time.perf_counter()
    for p in slots:
        p.start()
    for p in slots:
        p.join()
        assert p.exitcode == 0
    return time.perf_counter() - start


if __name__ == "__main__":
    target, url = sys.argv[1], sys.argv[2]
    if target == "floor":
        elapsed = run_floor(url)
    elif target == "ray":
        os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
        import ray
        from ray import tune as ray_tune

        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR")
        elapsed = run_tuner(ray_tune, url)
    else:
        import fasttune

        fasttune.init(num_cpus=2)
        elapsed = run_tuner(fasttune, url)
    mb = TRIALS * ITERATIONS * MB
    result = {"target": target, "fit_s": round(elapsed, 3), "mb_per_s": round(mb / elapsed, 1)}
    print("RESULT " + json.dumps(result), flush=True)
