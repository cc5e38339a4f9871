"""`make bench`: fasttune against the floor and Ray Tune, as ratios measured in one run.

Absolute times move by 3x between machines of the same size; ratios measured side by
side do not. So each workload runs the floor (``../shared/bench/floor.py``: the least
work any Tune-like runner must do), fasttune and, when available, Ray Tune
(``../shared/bench/workloads.py`` runs both), interleaved, and the table gives medians
and their ratios.

Ray Tune runs when ``ray`` imports in this interpreter (``pip install "fasttune[ray]"``)
or in the interpreter named by ``FASTTUNE_BENCH_RAY_PYTHON`` (a separate venv keeps Ray
out of the test environment).

fasttune on Ray (``bench/_on_ray.py``): the same workloads with
``fasttune.init(address="auto")`` on a Ray instance of this machine started as Ray Tune's
(``ray.init(num_cpus=2)``), when ``ray`` imports in this interpreter; its columns compare it
with Ray Tune on the same Ray (``--no-fasttune-ray`` leaves them out).

Run: ``.venv/bin/python bench/run_all.py [--runs N] [--only trials,throughput] [--no-ray]
[--no-fasttune-ray]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARED_BENCH = os.environ.get(
    "FASTTUNE_SHARED_BENCH", os.path.join(os.path.dirname(ROOT), "shared", "bench")
)
WORKLOADS = os.path.join(SHARED_BENCH, "workloads.py")
FLOOR = os.path.join(SHARED_BENCH, "floor.py")
NO_REUSE = os.path.join(HERE, "_trials_no_reuse.py")
SCHEMA_FLOOR = os.path.join(HERE, "floor_ray_schema.py")
FRESH_PROCESS_FLOOR = os.path.join(HERE, "floor_fresh_process.py")
ON_RAY = os.path.join(HERE, "_on_ray.py")


@dataclass(frozen=True)
class Workload:
    """One row of the table: how to run each contender and which figure to compare."""

    name: str
    key: str  # the figure in each RESULT line
    higher_is_better: bool
    floor: Callable[[], float] | None
    target: str  # the goal, in words
    script: str = WORKLOADS
    workload: str = ""
    # The floor again with the 18-key results Ray Tune users get (bench/floor_ray_schema.py).
    schema_floor: Callable[[], float] | None = None
    # Settings for Ray Tune's runs only (fewer trials where Ray takes seconds per trial).
    ray_env: tuple[tuple[str, str], ...] = ()
    ident: str = ""  # what --only names; the workload's name when empty
    # The goal of fasttune on Ray against Ray Tune, in words; "" runs no fasttune on Ray
    # (the cold start of a whole process, whose Ray start is not fasttune's).
    on_ray_target: str = ""
    # A floor that bounds this workload closer than the shared one, and what it is.
    bound: Callable[[], float] | None = None
    bound_name: str = ""

    @property
    def id(self) -> str:
        return self.ident or self.workload


def _result_line(out: str) -> dict:
    for line in reversed(out.splitlines()):
        if line.startswith("RESULT "):
            payload = line[len("RESULT ") :]
            return json.loads(payload)
    raise RuntimeError(f"no RESULT line in:\n{out[-2000:]}")


def bench_env() -> dict[str, str]:
    """The environment benches run in: bytecode caches on, as for an installed package.

    With ``PYTHONDONTWRITEBYTECODE`` set (some CI images set it), every run of an
    editable install compiles fasttune's modules again (~0.15 s), which no user with
    a normal install pays.
    """
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


# Each run's temporary directory, removed when the bench ends (see run_script).
_SCRATCH: list[str] = []


def run_script(python: str, args: list[str], extra_env: tuple[tuple[str, str], ...] = ()) -> dict:
    """Run one contender's script with a temporary directory of its own (its ``TMPDIR``
    and working directory).

    The workloads leave their experiments in the temporary directory: a bench's tens
    of thousands of trial folders, which piled up over many benches (45 GB in /tmp),
    slowed later runs (file creation on the fuller disk: back-to-back throughput runs
    fell from ~95,000 to ~65,000 results/s). They are removed when the bench ends, not
    after each run: removing a run's folders slows the run after it (this disk
    discards freed blocks, and the floor fell to ~400 trials/s for ~30 s after).
    """
    scratch = tempfile.mkdtemp(prefix="bench_run_")
    _SCRATCH.append(scratch)
    proc = subprocess.run(
        [python, *args],
        capture_output=True,
        text=True,
        cwd=scratch,
        env={**bench_env(), **dict(extra_env), "TMPDIR": scratch},
        timeout=1800,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}")
    return _result_line(proc.stdout)


def floor(kind: str, script: str = FLOOR) -> Callable[[], float]:
    key = "trials_per_s" if kind == "trials" else "results_per_s"
    return lambda: run_script(sys.executable, [script, kind])[key]


def _raw_checkpoints(base: str, trials: list[int], blob: bytes, iterations: int) -> None:
    """One slot's share of the checkpoint workload, in plain Python: per iteration, write
    the checkpoint into a new temporary directory (kept, as the workload keeps it), copy
    it into the trial's directory and delete the one beyond the two kept."""
    for trial in trials:
        trial_dir = os.path.join(base, f"trial_{trial}")
        for i in range(iterations):
            src = tempfile.mkdtemp(dir=base)
            with open(os.path.join(src, "blob"), "wb") as f:
                f.write(blob)
            shutil.copytree(src, os.path.join(trial_dir, f"checkpoint_{i:06d}"))
            if i >= 2:
                shutil.rmtree(os.path.join(trial_dir, f"checkpoint_{i - 2:06d}"))


def raw_checkpoint_rate(mb: int = 8, trials: int = 4, iterations: int = 10) -> float:
    """MB/s of the checkpoint workload's file work alone: two processes (the workload's
    two slots), no runner."""
    from multiprocessing import get_context

    blob = os.urandom(mb << 20)
    base = tempfile.mkdtemp(prefix="raw_ckpt_")
    ctx = get_context("fork")
    shares = [list(range(slot, trials, 2)) for slot in range(2)]
    slots = [
        ctx.Process(target=_raw_checkpoints, args=(base, share, blob, iterations))
        for share in shares
    ]
    start = time.perf_counter()
    for p in slots:
        p.start()
    for p in slots:
        p.join()
    rate = trials * iterations * mb / (time.perf_counter() - start)
    shutil.rmtree(base)
    return rate


WORKLOAD_TABLE = [
    Workload("trials", "trials_per_s", True, floor("trials"), ">= 50% of floor",
             workload="trials", schema_floor=floor("trials", SCHEMA_FLOOR),
             on_ray_target=">= 5x Ray Tune"),
    Workload("trials, reuse_actors=False", "trials_per_s", True, floor("trials"),
             ">= 35% of floor", script=NO_REUSE, workload="trials",
             schema_floor=floor("trials", SCHEMA_FLOOR),
             ray_env=(("N", "100"),), ident="trials-no-reuse",  # Ray: an actor per trial
             on_ray_target="Ray's actor start (~1 s) bounds both",
             bound=floor("trials", FRESH_PROCESS_FLOOR),
             bound_name="the floor with a new process per trial (bench/floor_fresh_process.py)"),
    Workload("throughput", "results_per_s", True, floor("throughput"), ">= 50% of floor",
             workload="throughput", schema_floor=floor("throughput", SCHEMA_FLOOR),
             on_ray_target=">= 5x Ray Tune"),
    Workload("cold (docs example, whole process)", "process_s", False, None,
             "<= 5% of Ray, <= 0.35 s", workload="cold"),
    Workload("overhead (fit / ideal)", "ratio", False, None, "<= 1.02", workload="overhead",
             on_ray_target="<= 1.05"),
    Workload("checkpoint (MB/s)", "mb_per_s", True, raw_checkpoint_rate,
             ">= 80% of the same file work in plain Python", workload="checkpoint",
             on_ray_target="-"),
]  # fmt: skip


def ray_python(disabled: bool) -> str | None:
    if disabled:
        return None
    named = os.environ.get("FASTTUNE_BENCH_RAY_PYTHON")
    candidates = [named] if named else [sys.executable]
    for python in candidates:
        probe = subprocess.run([python, "-c", "import ray.tune"], capture_output=True)
        if probe.returncode == 0:
            return python
    if named:
        sys.exit(f"FASTTUNE_BENCH_RAY_PYTHON={named!r} cannot import ray.tune")
    return None


def fasttune_on_ray(disabled: bool) -> bool:
    """Whether fasttune on Ray runs: ``ray`` imports in this interpreter."""
    if disabled:
        return False
    return subprocess.run([sys.executable, "-c", "import ray"], capture_output=True).returncode == 0


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 100:
        return f"{value:,.0f}"
    if value < 10:  # ratios near 1 (fit/ideal 1.024 is not 1.02)
        return f"{value:.4g}"
    return f"{value:.3g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="runs per contender (median)")
    parser.add_argument("--ray-runs", type=int, default=None, help="runs of Ray (default: --runs)")
    parser.add_argument(
        "--only", default="", help="comma-separated: trials, trials-no-reuse, throughput, ..."
    )
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--no-fasttune-ray", action="store_true", help="leave out fasttune on Ray")
    parser.add_argument("--json", default="", help="also write the rows to this file")
    args = parser.parse_args()
    for path in (WORKLOADS, FLOOR):
        if not os.path.exists(path):
            sys.exit(f"{path} is missing: set FASTTUNE_SHARED_BENCH to the shared bench folder.")
    subprocess.run(  # bytecode caches, as a normal install has them
        [sys.executable, "-m", "compileall", "-q", os.path.join(ROOT, "fasttune")],
        env=bench_env(),
        check=True,
    )
    ray = ray_python(args.no_ray)
    on_ray = fasttune_on_ray(args.no_fasttune_ray)
    ray_runs = args.runs if args.ray_runs is None else args.ray_runs
    only = {w.strip() for w in args.only.split(",") if w.strip()}
    rows = []
    ray_note = ray_runs if ray else "not installed"
    print(
        f"runs: {args.runs} (Ray: {ray_note}; fasttune on Ray: "
        f"{args.runs if on_ray else 'not installed'}), cpus: {os.cpu_count()}"
    )
    for w in WORKLOAD_TABLE:
        if only and w.id not in only:
            continue
        floors: list[float] = []
        schema_floors: list[float] = []
        bounds: list[float] = []
        ours: list[float] = []
        theirs: list[float] = []
        ours_on_ray: list[float] = []
        for i in range(args.runs):  # interleaved, so that all see the same machine
            if w.floor is not None:
                floors.append(w.floor())
            if w.schema_floor is not None:
                schema_floors.append(w.schema_floor())
            if w.bound is not None:
                bounds.append(w.bound())
            ours.append(run_script(sys.executable, [w.script, "fasttune", w.workload])[w.key])
            if ray and i < ray_runs:
                theirs.append(run_script(ray, [w.script, "ray", w.workload], w.ray_env)[w.key])
            if on_ray and w.on_ray_target:  # the same trials as Ray Tune's
                args_on_ray = [ON_RAY, w.script, w.workload]
                ours_on_ray.append(run_script(sys.executable, args_on_ray, w.ray_env)[w.key])
        row = {
            "workload": w.name,
            "figure": w.key,
            "floor": median(floors),
            "schema_floor": median(schema_floors),
            "fasttune": median(ours),
            "ray": median(theirs),
            "fasttune_on_ray": median(ours_on_ray),
            "target": w.target,
            "on_ray_target": w.on_ray_target,
            "bound": median(bounds),
            "bound_name": w.bound_name,
            "runs": {
                "floor": floors,
                "schema_floor": schema_floors,
                "bound": bounds,
                "fasttune": ours,
                "ray": theirs,
                "fasttune_on_ray": ours_on_ray,
            },
        }
        rows.append(row)
        _print_row(row, w.higher_is_better, header=len(rows) == 1)
    for row in rows:
        if row["bound"] is not None:
            print(
                f"{row['workload']}: {row['bound_name']}: {fmt(row['bound'])} "
                f"({_ratio(row['bound'], row['floor']):.0%} of the floor; fasttune "
                f"{_ratio(row['fasttune'], row['bound']):.0%} of it)"
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _print_row(row: dict, higher_is_better: bool, header: bool) -> None:
    if header:
        print(
            "| workload | figure | floor | floor, Ray's keys | fasttune | Ray Tune "
            "| fasttune/floor | fasttune/floor with Ray's keys | fasttune vs Ray | target "
            "| fasttune on Ray | on Ray vs Ray Tune | target on Ray |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    vs_floor = _ratio(row["fasttune"], row["floor"])
    vs_schema = _ratio(row["fasttune"], row["schema_floor"])
    vs_ray_text = _vs_ray(row["fasttune"], row["ray"], higher_is_better)
    on_ray_text = _vs_ray(row["fasttune_on_ray"], row["ray"], higher_is_better)
    print(
        f"| {row['workload']} | {row['figure']} | {fmt(row['floor'])} "
        f"| {fmt(row['schema_floor'])} | {fmt(row['fasttune'])} | {fmt(row['ray'])} "
        f"| {f'{vs_floor:.0%}' if vs_floor else '-'} | {f'{vs_schema:.0%}' if vs_schema else '-'} "
        f"| {vs_ray_text} | {row['target']} | {fmt(row['fasttune_on_ray'])} | {on_ray_text} "
        f"| {row['on_ray_target'] or '-'} |",
        flush=True,
    )


def _vs_ray(ours: float | None, ray: float | None, higher_is_better: bool) -> str:
    ratio = _ratio(ours, ray)
    if not ratio:
        return "-"
    return f"{ratio:.1f}x faster" if higher_is_better else f"{ratio:.1%} of Ray"


if __name__ == "__main__":
    try:
        main()
    finally:
        for folder in _SCRATCH:
            shutil.rmtree(folder, ignore_errors=True)
