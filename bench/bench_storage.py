"""Checkpoints to S3: MB/s of the checkpoint workload with ``storage_path`` in S3.

The checkpoint workload of ``../shared/bench/workloads.py`` (4 trials x 10 iterations x
an 8 MB checkpoint each, ``num_to_keep=2``), with ``storage_path="s3://..."`` on a moto
S3 server on loopback that this script starts; side by side: fasttune, Ray Tune (when
``ray.tune`` imports) and a floor, the same uploads and deletions with s3fs from two
processes and no runner. moto is slow (a Python server), so the figures compare the
contenders on one server; they are not what a real S3 gives.

Run: ``.venv/bin/python bench/bench_storage.py [--runs N] [--mb 8] [--no-ray]``
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import statistics
import subprocess
import sys
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOAD = os.path.join(HERE, "_storage_workload.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--mb", type=int, default=8)
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args()

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    env = dict(
        os.environ,
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}",
        MB=str(args.mb),
    )
    os.environ.update(env)
    import s3fs

    s3 = s3fs.S3FileSystem(skip_instance_cache=True)
    s3.mkdir("bench")
    targets = ["floor", "fasttune"]
    if not args.no_ray:
        probe = subprocess.run([sys.executable, "-c", "import ray.tune"], capture_output=True)
        if probe.returncode == 0:
            targets.append("ray")
    rates: dict[str, list[float]] = {t: [] for t in targets}
    try:
        for _ in range(args.runs):
            for target in targets:  # interleaved: the machine's load hits all alike
                url = f"s3://bench/{target}-{uuid.uuid4().hex[:8]}"
                proc = subprocess.run(
                    [sys.executable, WORKLOAD, target, url],
                    capture_output=True,
                    text=True,
                    env=env,
                    timeout=1200,
                )
                if proc.returncode != 0:
                    raise RuntimeError(f"{target} failed:\n{proc.stderr[-4000:]}")
                line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
                rates[target].append(json.loads(line[len("RESULT ") :])["mb_per_s"])
                s3.rm(url, recursive=True)
    finally:
        server.stop()
    print(f"runs: {args.runs}, checkpoint {args.mb} MB, moto on loopback")
    print("| contender | MB/s (median) | runs | vs floor |")
    print("|---|---|---|---|")
    floor = statistics.median(rates["floor"])
    for target in targets:
        median = statistics.median(rates[target])
        print(f"| {target} | {median:,.1f} | {rates[target]} | {median / floor:.0%} |")


if __name__ == "__main__":
    main()
