"""CPU detection against real limits: an affinity mask and a cgroup CPU quota.

Each case runs detection in a subprocess that really has the limit: an affinity
mask set with ``os.sched_setaffinity`` or ``taskset``, or (as root) a child cgroup
with a CFS quota that the subprocess joins and, in a private mount namespace, sees
mounted at ``/sys/fs/cgroup`` as a container sees its own cgroup. Where the machine
does not allow that, the quota tests skip and say why.
"""

from __future__ import annotations

import itertools
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CGROUP = Path("/sys/fs/cgroup")
PERIOD_US = 100_000
DETECT = (
    "from fasttune._support.resource_detection import detect_total_resources;"
    "print(detect_total_resources()['CPU'])"
)

# Sequential trials under a 1-CPU quota: each records when it ran.
TRIALS = """
import os, sys, time
import fasttune as tune
out = sys.argv[1]
def train(config):
    start = time.monotonic()
    time.sleep(0.05)
    with open(os.path.join(out, f"t{config['i']}"), "w") as f:
        f.write(f"{start} {time.monotonic()}")
    tune.report({"x": 1})
tune.Tuner(train, param_space={"i": tune.grid_search([0, 1, 2])},
           run_config=tune.RunConfig(storage_path=os.path.join(out, "runs"), verbose=0)).fit()
"""

skip_no_affinity = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity"), reason="this platform has no CPU affinity"
)


def _allowed_cpus() -> set[int]:
    return set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set()


def _env(**extra: str) -> dict[str, str]:
    """This environment without CPU overrides, plus ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("FASTTUNE_NUM_CPUS", "LOKY_MAX_CPU_COUNT", "FASTTUNE_EXECUTOR")
    }
    env.update(extra)
    return env


def _run(
    argv: list[str], env: dict[str, str] | None = None, preexec: Callable[[], None] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env if env is not None else _env(),
        preexec_fn=preexec,
        timeout=120,
    )


def _detected(prefix: tuple[str, ...] = (), code: str = DETECT, **kwargs: Any) -> float:
    """The CPUs detection reports in a subprocess run as ``prefix python -c code``."""
    done = _run([*prefix, sys.executable, "-c", code], **kwargs)
    assert done.returncode == 0, done.stderr
    return float(done.stdout.split()[-1])


@pytest.fixture
def one_cpu() -> int:
    allowed = _allowed_cpus()
    if len(allowed) < 2:
        pytest.skip(f"needs 2+ CPUs in the affinity mask to see it narrowed, has {len(allowed)}")
    return min(allowed)


# ---------------------------------------------------------------------- import
def test_import_fasttune_leaves_loky_unloaded_until_a_quota_needs_it():
    code = (
        "import sys, fasttune; before = 'loky' in sys.modules;"
        "from fasttune._support.resource_detection import detect_total_resources;"
        "detect_total_resources(); print(before, 'loky' in sys.modules)"
    )
    # loky computes any count a quota or LOKY_MAX_CPU_COUNT is part of; without them
    # the count is the same minimum, taken without importing it (15-20 ms).
    with_loky = _has_cpu_quota()
    assert _run([sys.executable, "-c", code]).stdout.split() == ["False", str(with_loky)]
    done = _run([sys.executable, "-c", code], env=_env(LOKY_MAX_CPU_COUNT="1"))
    assert done.stdout.split() == ["False", "True"]


def test_detection_gives_lokys_count():
    code = (
        "import loky; from fasttune._support.machine_limits import detect_cpus;"
        "print(detect_cpus(), float(loky.cpu_count()))"
    )
    for env in (_env(), _env(LOKY_MAX_CPU_COUNT="1")):
        done = _run([sys.executable, "-c", code], env=env)
        detected, lokys = done.stdout.split()
        assert detected == lokys, done.stderr


@pytest.mark.parametrize(
    ("files", "quota_set"),
    [
        ({}, False),  # no cgroup files (not Linux, or no cpu controller)
        ({"cpu.max": "max 100000\n"}, False),
        ({"cpu.max": "150000 100000\n"}, True),
        ({"cpu/cpu.cfs_quota_us": "-1\n"}, False),
        ({"cpu/cpu.cfs_quota_us": "50000\n"}, True),
        ({"cpu.max": "odd\n", "cpu/cpu.cfs_quota_us": "-1\n"}, False),  # as loky: v1 then
        ({"cpu.max": "odd\n", "cpu/cpu.cfs_quota_us": "20000\n"}, True),
    ],
)
def test_a_cgroup_cpu_quota_is_seen_where_loky_reads_it(tmp_path, files, quota_set):
    from fasttune._support.machine_limits import _cgroup_cpu_quota_set

    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert _cgroup_cpu_quota_set(tmp_path) is quota_set


def _has_cpu_quota() -> bool:
    """Whether the cgroup at /sys/fs/cgroup (this container's) sets a CPU quota."""
    for path in (CGROUP / "cpu.max", CGROUP / "cpu" / "cpu.cfs_quota_us"):
        try:
            quota = path.read_text().split()[0]
        except (OSError, IndexError):
            continue
        return quota not in ("max", "-1")
    return False


@pytest.mark.skipif(_has_cpu_quota(), reason="this container has a CPU quota (tested below)")
def test_no_quota_and_full_mask_detect_every_allowed_cpu():
    allowed = _allowed_cpus() or set(range(os.cpu_count() or 1))
    assert _detected() == float(len(allowed))


# ---------------------------------------------------------------------- affinity
@skip_no_affinity
def test_affinity_mask_set_by_the_parent_limits_cpus(one_cpu):
    assert _detected(preexec=lambda: os.sched_setaffinity(0, {one_cpu})) == 1.0


@skip_no_affinity
@pytest.mark.skipif(shutil.which("taskset") is None, reason="taskset is not installed")
def test_taskset_limits_cpus(one_cpu):
    assert _detected(("taskset", "-c", str(one_cpu))) == 1.0


@skip_no_affinity
def test_overrides_win_over_the_affinity_mask(one_cpu):
    pin = lambda: os.sched_setaffinity(0, {one_cpu})  # noqa: E731
    assert _detected(preexec=pin, env=_env(FASTTUNE_NUM_CPUS="3")) == 3.0
    code = (
        "import fasttune; fasttune.init(num_cpus=5);"
        "from fasttune._support.resource_detection import detect_total_resources;"
        "print(detect_total_resources()['CPU'])"
    )
    assert _detected(code=code, preexec=pin, env=_env(FASTTUNE_NUM_CPUS="3")) == 5.0


# ---------------------------------------------------------------------- cgroup quota
class QuotaCgroup:
    """A child of this container's CPU cgroup (v2 ``cpu.max`` or v1 CFS quota files)."""

    def __init__(self) -> None:
        if os.geteuid() != 0:
            pytest.skip("creating a cgroup needs root")
        if shutil.which("unshare") is None or shutil.which("mount") is None:
            pytest.skip("needs unshare and mount (util-linux) to give the subprocess its cgroup")
        name = f"fasttune-test-{os.getpid()}"
        if (CGROUP / "cgroup.controllers").exists():  # v2 mounted at /sys/fs/cgroup
            self.mount_point, self.v2 = CGROUP, True
        elif (CGROUP / "cpu" / "cpu.cfs_quota_us").exists():  # v1 cpu controller
            self.mount_point, self.v2 = CGROUP / "cpu", False
        else:
            pytest.skip(f"no CPU quota files under {CGROUP} (no cgroup cpu controller)")
        self.path = self.mount_point / name
        self.enabled_cpu = False
        try:
            if self.v2 and "cpu" not in (CGROUP / "cgroup.subtree_control").read_text().split():
                (CGROUP / "cgroup.subtree_control").write_text("+cpu")
                self.enabled_cpu = True
            self.path.mkdir()
        except OSError as e:
            pytest.skip(f"cannot create a CPU cgroup under {self.mount_point}: {e}")
        try:
            self.set_quota(None)
        except OSError as e:
            self.remove()
            pytest.skip(f"cannot write a CPU quota in {self.path}: {e}")

    def set_quota(self, cpus: float | None) -> None:
        """Limit the cgroup to ``cpus`` CPUs (None: no limit)."""
        quota = -1 if cpus is None else round(cpus * PERIOD_US)
        if self.v2:
            (self.path / "cpu.max").write_text(f"{'max' if quota < 0 else quota} {PERIOD_US}")
        else:
            (self.path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (self.path / "cpu.cfs_quota_us").write_text(str(quota))

    def argv(self, python_args: list[str]) -> list[str]:
        """Run python in the cgroup, with the cgroup mounted where a container has its own."""
        script = (
            f"echo $$ > {shlex.quote(str(self.path / 'cgroup.procs'))} && "
            f"mount --bind {shlex.quote(str(self.path))} {shlex.quote(str(self.mount_point))} && "
            f"exec {shlex.join([sys.executable, *python_args])}"
        )
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]

    def run(self, python_args: list[str]) -> subprocess.CompletedProcess[str]:
        done = _run(self.argv(python_args))
        if done.returncode != 0 and "Traceback" not in done.stderr:
            pytest.skip(f"cannot run a process in the cgroup here: {done.stderr.strip()}")
        return done

    def detected(self) -> float:
        done = self.run(["-c", DETECT])
        assert done.returncode == 0, done.stderr
        return float(done.stdout.split()[-1])

    def remove(self) -> None:
        deadline = time.monotonic() + 10
        while True:  # processes a run left (its workers) exit on EOF from their driver
            try:
                self.path.rmdir()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        if self.enabled_cpu:  # leave the controllers as they were
            try:
                (CGROUP / "cgroup.subtree_control").write_text("-cpu")
            except OSError:
                pass


@pytest.fixture
def quota_cgroup() -> Iterator[QuotaCgroup]:
    if len(_allowed_cpus()) < 2:
        pytest.skip("needs 2+ CPUs so that a quota below them can be seen")
    cgroup = QuotaCgroup()
    try:
        yield cgroup
    finally:
        cgroup.remove()


def test_cgroup_cpu_quota_limits_cpus(quota_cgroup):
    allowed = len(_allowed_cpus())
    assert quota_cgroup.detected() == float(allowed)  # no quota yet: the affinity mask
    quota_cgroup.set_quota(allowed - 1)
    assert quota_cgroup.detected() == float(allowed - 1)
    quota_cgroup.set_quota(0.5)  # a fraction rounds up: a process always gets 1 CPU
    assert quota_cgroup.detected() == 1.0


def test_trials_run_one_at_a_time_under_a_one_cpu_quota(quota_cgroup, tmp_path):
    quota_cgroup.set_quota(1)
    done = quota_cgroup.run(["-c", TRIALS, str(tmp_path)])
    assert done.returncode == 0, done.stderr
    spans = sorted(tuple(map(float, (tmp_path / f"t{i}").read_text().split())) for i in range(3))
    assert all(end <= next_start for (_, end), (next_start, _) in itertools.pairwise(spans)), spans
