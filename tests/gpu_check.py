"""Checks that need a real NVIDIA GPU, run by hand on a machine that has one.

``python -m tests.gpu_check OUT.json``: GPU detection, trials given whole and
fractional GPUs (``CUDA_VISIBLE_DEVICES``, real CUDA work, how many ran at once),
``wait_for_gpu`` against the real ``nvidia-smi``, a request for more GPUs than exist,
and that the fork server does not preload modules on a GPU machine (a module that asks
CUDA on import then works in every worker). Not collected by pytest: CI has no GPU.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time

CUDA_MODULE = """
import torch

AVAILABLE_AT_IMPORT = torch.cuda.is_available()  # initialises CUDA in the importer
"""


def _overlaps(spans: list[tuple[float, float]]) -> int:
    """The most spans open at one moment."""
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def main(out_path: str) -> dict:
    import fasttune as tune
    from fasttune._internal.executor_choice import trainable_imports
    from fasttune._internal.trainable_resolution import pickle_trainable, resolve_trainable
    from fasttune._support.resource_detection import detect_gpu_ids, detect_total_resources
    from fasttune.utils import wait_for_gpu

    store = tempfile.mkdtemp(prefix="gpu_check_")
    module_dir = tempfile.mkdtemp(prefix="gpu_mod_")
    with open(os.path.join(module_dir, "cuda_at_import.py"), "w") as f:
        f.write(CUDA_MODULE)
    sys.path.insert(0, module_dir)
    import cuda_at_import  # the driver has it, as a user's helper module

    report: dict = {"resources": detect_total_resources(), "gpu_ids": detect_gpu_ids()}

    def gpu_trial(config):
        import torch

        start = time.time()
        waited = wait_for_gpu(target_util=0.5, retry=3, delay_s=1)
        x = torch.ones(2048, 2048, device="cuda")
        total = float((x @ x).sum().item())
        time.sleep(config["hold"])
        tune.report(
            {
                "cvd": os.environ.get("CUDA_VISIBLE_DEVICES"),
                "count": torch.cuda.device_count(),
                "name": torch.cuda.get_device_name(0),
                "total": total,
                "waited": waited,
                "helper_saw_cuda": cuda_at_import.AVAILABLE_AT_IMPORT,
                "start": start,
                "end": time.time(),
            }
        )

    def run(resources, n, hold, name):
        t0 = time.time()
        grid = tune.Tuner(
            tune.with_resources(gpu_trial, resources),
            param_space={"hold": hold, "i": tune.grid_search(list(range(n)))},
            run_config=tune.RunConfig(storage_path=store, name=name, verbose=0),
        ).fit()
        rows = [r.metrics for r in grid if r.error is None]
        return {
            "errors": [str(r.error)[:300] for r in grid if r.error is not None],
            "cvd": sorted({m["cvd"] for m in rows}),
            "device_counts": sorted({m["count"] for m in rows}),
            "names": sorted({m["name"] for m in rows}),
            "cuda_results_ok": all(m["total"] == 2048.0**3 for m in rows),
            "wait_for_gpu": sorted({m["waited"] for m in rows}),
            "helper_saw_cuda": sorted({m["helper_saw_cuda"] for m in rows}),
            "most_at_once": _overlaps([(m["start"], m["end"]) for m in rows]),
            "seconds": round(time.time() - t0, 2),
        }

    blob = pickle_trainable(resolve_trainable(gpu_trial))[0]
    report["preloaded_on_gpu_machine"] = trainable_imports(blob)
    report["half_gpu_x4"] = run({"cpu": 1, "gpu": 0.5}, 4, 3.0, "half")
    report["whole_gpu_x2"] = run({"cpu": 1, "gpu": 1}, 2, 2.0, "whole")
    try:
        run({"cpu": 1, "gpu": 2}, 1, 0.0, "too_many")
        report["two_gpus"] = "ran (wrong)"
    except Exception as e:  # the clear error a request that never fits gets
        report["two_gpus"] = f"{type(e).__name__}: {str(e)[:400]}"
    with open(out_path, "w") as f:
        json.dump(report, f, indent=1, default=str)
    return report


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1]), indent=1, default=str))
