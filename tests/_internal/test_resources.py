"""Tests for local resource detection and accounting.

Detection runs against the real environment, adjusted with ``monkeypatch``
(environment variables, and a fake ``nvidia-smi`` script first on PATH); the
randomized test checks the manager against an independent model in exact
fractions.
"""

from __future__ import annotations

import random
import stat
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from fasttune._internal import resources
from fasttune._internal.resources import (
    ResourceManager,
    detect_gpu_ids,
    detect_total_resources,
    parse_visible_devices,
)
from fasttune._support import machine_limits
from fasttune.execution.placement_groups import PlacementGroupFactory
from fasttune.executors.base import Allocation

ENV_VARS = ("FASTTUNE_NUM_CPUS", "FASTTUNE_NUM_GPUS", "FASTTUNE_MEMORY", "FASTTUNE_RESOURCES")
UUID0 = "GPU-04546190-b68d-65ac-101b-035f8faed77d"
UUID1 = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"


@pytest.fixture(autouse=True)
def _clean_state(monkeypatch: pytest.MonkeyPatch):
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    resources.shutdown()
    yield
    resources.shutdown()


def pgf(**amounts: float) -> PlacementGroupFactory:
    return PlacementGroupFactory([amounts])


def fake_nvidia_smi(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, output: str) -> None:
    """Put an ``nvidia-smi`` printing ``output`` alone on PATH, and hide pynvml."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "nvidia-smi"
    script.write_text(f"#!/bin/sh\nprintf '{output}'\n")  # printf: a shell builtin
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")


# --- detection ------------------------------------------------------------------------


# CPU detection (affinity mask, cgroup quota): test_resource_detection.py


def test_detects_memory_no_more_than_physical():
    total = detect_total_resources()
    assert set(total) == {"CPU", "GPU", "memory"}
    assert total["memory"] > 0
    if Path("/proc/meminfo").exists():
        line = next(x for x in Path("/proc/meminfo").read_text().splitlines() if "MemTotal" in x)
        assert total["memory"] <= int(line.split()[1]) * 1024


@pytest.mark.parametrize(
    ("value", "ids"),
    [
        ("0,1", ["0", "1"]),
        (" 2 , 3 ", ["2", "3"]),
        ("", []),
        ("-1", []),
        ("NoDevFiles", []),
        ("1,-1,2", ["1"]),  # CUDA ignores everything after an invalid entry
        ("0,,1", ["0", "1"]),
        (f"{UUID0},{UUID1}", [UUID0, UUID1]),
        ("MIG-1234abcd", ["MIG-1234abcd"]),
    ],
)
def test_cuda_visible_devices(monkeypatch, value, ids):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    assert parse_visible_devices(value) == ids
    assert detect_total_resources()["GPU"] == len(ids)
    assert detect_gpu_ids() == ids
    assert ResourceManager().gpu_ids == tuple(ids)


def test_gpus_from_nvidia_smi_when_cuda_visible_devices_unset(monkeypatch, tmp_path):
    fake_nvidia_smi(monkeypatch, tmp_path, f"0, {UUID0}, 10, 1000\n1, {UUID1}, 10, 1000\n")
    assert detect_total_resources()["GPU"] == 2.0
    assert detect_gpu_ids() == ["0", "1"]
    assert detect_gpu_ids(1) == ["0"]


def test_gpus_are_looked_up_once_per_process(monkeypatch, tmp_path):
    # nvidia-smi takes up to a second on a GPU machine; a run needs the GPUs twice.
    calls = tmp_path / "calls"
    fake_nvidia_smi(monkeypatch, tmp_path, f"0, {UUID0}, 10, 1000\\n")
    script = tmp_path / "bin" / "nvidia-smi"
    script.write_text(f"#!/bin/sh\necho call >> '{calls}'\nprintf '0, {UUID0}, 10, 1000\\n'\n")
    assert detect_total_resources()["GPU"] == 1.0
    assert detect_total_resources()["GPU"] == 1.0
    assert detect_gpu_ids() == ["0"]
    assert calls.read_text().split() == ["call"]


def test_no_gpus_when_nvidia_smi_is_missing(monkeypatch, tmp_path):
    fake_nvidia_smi(monkeypatch, tmp_path, "")
    (tmp_path / "bin" / "nvidia-smi").unlink()
    assert detect_total_resources()["GPU"] == 0.0


def test_gpu_override_picks_visible_ids_or_numbers_them(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert detect_gpu_ids(1) == ["2"]
    assert detect_gpu_ids(2) == ["2", "3"]
    assert detect_gpu_ids(3) == ["0", "1", "2"]  # more than exist: "0".."N-1"
    monkeypatch.setenv("FASTTUNE_NUM_GPUS", "4")
    assert ResourceManager().gpu_ids == ("0", "1", "2", "3")


def test_env_overrides(monkeypatch):
    monkeypatch.setenv("FASTTUNE_NUM_CPUS", "3")
    monkeypatch.setenv("FASTTUNE_NUM_GPUS", "2")
    monkeypatch.setenv("FASTTUNE_MEMORY", "1e9")
    monkeypatch.setenv("FASTTUNE_RESOURCES", '{"TPU": 4, "license": 0.5}')
    total = detect_total_resources()
    assert total == {"CPU": 3.0, "GPU": 2.0, "memory": 1e9, "TPU": 4.0, "license": 0.5}


def test_precedence_argument_over_init_over_env(monkeypatch):
    monkeypatch.setenv("FASTTUNE_NUM_CPUS", "3")
    monkeypatch.setenv("FASTTUNE_RESOURCES", '{"TPU": 4, "A": 1}')
    assert detect_total_resources()["CPU"] == 3.0
    resources.init(num_cpus=5, resources={"TPU": 2})
    total = detect_total_resources()
    assert (total["CPU"], total["TPU"], total["A"]) == (5.0, 2.0, 1.0)
    total = detect_total_resources({"CPU": 7, "TPU": None, "B": 1})
    assert (total["CPU"], total["TPU"], total["B"]) == (7.0, 2.0, 1.0)


@pytest.mark.parametrize(
    ("var", "value", "match"),
    [
        ("FASTTUNE_NUM_CPUS", "four", "FASTTUNE_NUM_CPUS='four' is not a number"),
        ("FASTTUNE_NUM_CPUS", "-1", ">= 0"),
        ("FASTTUNE_NUM_GPUS", "1.5", "whole number of GPUs"),
        ("FASTTUNE_MEMORY", "nan", "finite"),
        ("FASTTUNE_RESOURCES", "{TPU: 4}", "not valid JSON"),
        ("FASTTUNE_RESOURCES", "[4]", "must be a dict"),
        ("FASTTUNE_RESOURCES", '{"TPU": "x"}', "'TPU' must be a number"),
        ("FASTTUNE_RESOURCES", '{"CPU": 4}', "FASTTUNE_NUM_CPUS instead"),
    ],
)
def test_bad_env_values_are_rejected(monkeypatch, var, value, match):
    monkeypatch.setenv(var, value)
    with pytest.raises(ValueError, match=match):
        detect_total_resources()


def test_cgroup_memory_limit(tmp_path):
    assert machine_limits._cgroup_memory_limit(tmp_path) is None
    (tmp_path / "memory.max").write_text("max\n")
    assert machine_limits._cgroup_memory_limit(tmp_path) is None
    (tmp_path / "memory.max").write_text("2147483648\n")
    assert machine_limits._cgroup_memory_limit(tmp_path) == 2**31
    (tmp_path / "memory.max").unlink()
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert machine_limits._cgroup_memory_limit(tmp_path) is None  # cgroup v1 "unlimited"


# --- init / shutdown ------------------------------------------------------------------


def test_init_and_shutdown():
    detected = detect_total_resources()["CPU"]
    assert not resources.is_initialized()
    resources.init(num_cpus=2.5, num_gpus=0, memory=2**30, resources={"TPU": 1})
    assert resources.is_initialized()
    assert detect_total_resources() == {"CPU": 2.5, "GPU": 0.0, "memory": 2.0**30, "TPU": 1.0}
    resources.init(num_cpus=1)  # a second call replaces the first
    assert "TPU" not in detect_total_resources()
    resources.shutdown()
    assert not resources.is_initialized()
    assert detect_total_resources()["CPU"] == detected


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_cpus": -1}, "'num_cpus' must be a finite number >= 0"),
        ({"num_gpus": 0.5}, "'num_gpus' must be a whole number"),
        ({"memory": "8G"}, "'memory' must be a number"),
        ({"resources": {"GPU": 1}}, r"fasttune.init\(num_gpus=...\)"),
        ({"resources": ["TPU"]}, "must be a dict"),
    ],
)
def test_init_rejects_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        resources.init(**kwargs)
    assert not resources.is_initialized()


def test_init_accepts_ray_arguments(recwarn):
    resources.init(num_cpus=1, ignore_reinit_error=True, log_to_driver=False, _temp_dir="/x")
    assert len(recwarn) == 0
    with pytest.warns(UserWarning, match=r"ignores \['runtime_env'\]"):
        resources.init(num_cpus=1, runtime_env={"pip": ["x"]})
    with pytest.raises(TypeError, match="num_cpu"):
        resources.init(num_cpu=4)


# --- allocation -----------------------------------------------------------------------


def test_allocate_and_release_cpus():
    rm = ResourceManager({"CPU": 4})
    allocs = [rm.try_allocate(f"t{i}", pgf(CPU=1)) for i in range(4)]
    assert all(isinstance(a, Allocation) and a.cpu == 1.0 and a.gpu_ids == () for a in allocs)
    assert rm.try_allocate("t4", pgf(CPU=1)) is None
    assert rm.num_allocated == 4
    assert rm.used()["CPU"] == 4.0 and rm.available()["CPU"] == 0.0
    assert rm.release("t2") == allocs[2]
    assert rm.release("t2") is None
    assert rm.allocation("t2") is None and rm.allocation("t1") == allocs[1]
    assert rm.try_allocate("t4", pgf(CPU=1)) is not None
    assert rm.num_allocated == 4


def test_fractional_cpus_do_not_drift():
    rm = ResourceManager({"CPU": 1})
    for i in range(10):
        assert rm.try_allocate(f"t{i}", pgf(CPU=0.1)) is not None
    assert rm.try_allocate("t10", pgf(CPU=0.1)) is None
    assert rm.used()["CPU"] == 1.0
    for i in range(10):
        rm.release(f"t{i}")
    assert rm.used()["CPU"] == 0.0
    assert rm.try_allocate("big", pgf(CPU=1)) is not None


def test_accepts_resource_dicts():
    rm = ResourceManager({"CPU": 2})
    assert rm.try_allocate("a", {"cpu": 2}).cpu == 2.0
    assert rm.try_allocate("b", None) is None  # default request: one CPU


def test_same_trial_cannot_allocate_twice():
    rm = ResourceManager({"CPU": 4})
    rm.try_allocate("a", pgf(CPU=1))
    with pytest.raises(ValueError, match="already holds"):
        rm.try_allocate("a", pgf(CPU=1))


def test_fractional_gpus_pack_onto_one_gpu():
    rm = ResourceManager({"CPU": 8, "GPU": 2})
    ids = [rm.try_allocate(f"t{i}", pgf(CPU=1, GPU=0.5)).gpu_ids for i in range(3)]
    assert ids == [("0",), ("0",), ("1",)]
    assert rm.try_allocate("whole", pgf(GPU=1)) is None  # 1.0 free, but split
    assert rm.available()["GPU"] == 0.5
    assert rm.try_allocate("t3", pgf(GPU=0.5)).gpu_ids == ("1",)
    assert rm.try_allocate("t4", pgf(GPU=0.5)) is None
    rm.release("t0")
    rm.release("t1")
    assert rm.try_allocate("whole", pgf(GPU=1)).gpu_ids == ("0",)


def test_fractional_gpu_goes_to_the_fullest_gpu_it_fits():
    rm = ResourceManager({"GPU": 3})
    assert rm.try_allocate("a", pgf(GPU=1)).gpu_ids == ("0",)
    assert rm.try_allocate("b", pgf(GPU=0.5)).gpu_ids == ("1",)  # lowest of equals
    assert rm.try_allocate("c", pgf(GPU=0.25)).gpu_ids == ("1",)  # 0.25 left on GPU 1
    rm.release("a")
    assert rm.try_allocate("d", pgf(GPU=0.25)).gpu_ids == ("1",)  # not the free GPU 0
    assert rm.try_allocate("e", pgf(GPU=0.75)).gpu_ids == ("0",)
    assert rm.try_allocate("f", pgf(GPU=1)).gpu_ids == ("2",)


def test_whole_gpus_get_distinct_ids():
    rm = ResourceManager({"CPU": 8, "GPU": 4}, gpu_ids=["3", "5", UUID0, UUID1])
    a = rm.try_allocate("a", pgf(GPU=2))
    b = rm.try_allocate("b", pgf(GPU=2))
    assert (a.gpu, a.gpu_ids, b.gpu_ids) == (2.0, ("3", "5"), (UUID0, UUID1))
    assert rm.try_allocate("c", pgf(GPU=1)) is None
    rm.release("a")
    assert rm.try_allocate("c", pgf(GPU=1)).gpu_ids == ("3",)
    assert rm.try_allocate("d", pgf(GPU=0.5)).gpu_ids == ("5",)


@pytest.mark.parametrize(
    "request_",
    [pgf(GPU=1.5), PlacementGroupFactory([{"GPU": 0.5}, {"GPU": 0.5}, {"GPU": 0.5}])],
)
def test_non_integer_gpus_above_one_are_rejected(request_):
    rm = ResourceManager({"GPU": 4})
    with pytest.raises(ValueError, match=r"1\.5 GPUs; GPU requests above 1 must be whole"):
        rm.check_fits(request_, "t")
    with pytest.raises(ValueError, match="whole"):
        rm.try_allocate("t", request_)
    assert rm.num_allocated == 0


def test_summed_bundles_of_whole_gpus():
    rm = ResourceManager({"CPU": 4, "GPU": 2})
    alloc = rm.try_allocate("t", PlacementGroupFactory([{"CPU": 1, "GPU": 0.5}, {"GPU": 0.5}]))
    assert (alloc.cpu, alloc.gpu, alloc.gpu_ids) == (1.0, 1.0, ("0",))


def test_too_fine_fractions_are_rejected():
    rm = ResourceManager({"CPU": 4})
    with pytest.raises(ValueError, match=r"finer than 0\.0001"):
        rm.try_allocate("t", pgf(CPU=0.00001))


def test_memory_and_custom_resources():
    rm = ResourceManager({"CPU": 8, "memory": 10 * 2**30, "TPU": 2, "license": 1})
    a = rm.try_allocate("a", {"cpu": 1, "memory": 6 * 2**30, "TPU": 1, "license": 0.5})
    assert a.memory == 6.0 * 2**30 and a.custom == {"TPU": 1.0, "license": 0.5}
    assert rm.try_allocate("b", {"cpu": 1, "memory": 6 * 2**30}) is None
    assert rm.try_allocate("b", {"cpu": 1, "TPU": 1.5}) is None
    b = rm.try_allocate("b", {"cpu": 1, "memory": 4 * 2**30, "TPU": 1, "license": 0.5})
    assert b is not None
    assert rm.available() == {"CPU": 6.0, "GPU": 0.0, "memory": 0.0, "TPU": 0.0, "license": 0.0}
    rm.release("a")
    assert rm.used() == {"CPU": 1.0, "GPU": 0.0, "memory": 4.0 * 2**30, "TPU": 1.0, "license": 0.5}


# --- never fits -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("total", "request_", "parts"),
    [
        (
            {"CPU": 8},
            {"cpu": 16},
            ["'train_0'", "16 CPUs", "has 8 CPUs", "tune.with_resources", "resources_per_trial",
             "fasttune.init(num_cpus=16)", "FASTTUNE_NUM_CPUS=16"],
        ),
        (
            {"CPU": 8},
            {"gpu": 1},
            ["asks for 1 GPU,", "has no GPU detected", "Remove 'gpu'",
             "fasttune.init(num_gpus=1)", "FASTTUNE_NUM_GPUS=1"],
        ),
        (
            {"CPU": 8, "GPU": 2},
            {"gpu": 3},
            ["3 GPUs", "has 2 GPUs", "at most 2", "'gpu'"],
        ),
        (
            {"CPU": 8, "memory": 2**30},
            {"cpu": 1, "memory": 2**31},
            ["2147483648 bytes (2.00 GiB) of memory", "has 1073741824 bytes",
             "fasttune.init(memory=2147483648)", "FASTTUNE_MEMORY="],
        ),
        (
            {"CPU": 8},
            {"cpu": 1, "TPU": 2},
            ["2 of the custom resource 'TPU'", "has none", "fasttune.init(resources={'TPU': 2})",
             'FASTTUNE_RESOURCES=\'{"TPU": 2}\''],
        ),
    ],
)  # fmt: skip
def test_never_fits_errors_explain_what_to_do(total, request_, parts):
    rm = ResourceManager(total)
    with pytest.raises(ValueError) as info:
        rm.check_fits(request_, trial_name="train_0")
    for part in parts:
        assert part in str(info.value)
    with pytest.raises(ValueError, match="can never start"):
        rm.try_allocate("train_0", request_)
    assert rm.num_allocated == 0


def test_fitting_request_passes_check_even_when_busy():
    rm = ResourceManager({"CPU": 2, "GPU": 1})
    rm.try_allocate("a", pgf(CPU=2, GPU=1))
    rm.check_fits(pgf(CPU=2, GPU=1))
    rm.check_fits(pgf(GPU=0.5))
    assert rm.try_allocate("b", pgf(CPU=2, GPU=1)) is None


# --- usage string ---------------------------------------------------------------------


def test_usage_string_matches_ray():
    rm = ResourceManager({"CPU": 8, "GPU": 1})
    assert rm.usage_string() == "Logical resource usage: 0/8 CPUs, 0/1 GPUs"
    rm.try_allocate("a", pgf(CPU=2, GPU=0.5))
    assert rm.usage_string() == "Logical resource usage: 2.0/8 CPUs, 0.5/1 GPUs"
    rm.try_allocate("b", pgf(CPU=0.1))
    rm.try_allocate("c", pgf(CPU=0.2))
    assert rm.usage_string() == "Logical resource usage: 2.3/8 CPUs, 0.5/1 GPUs"


def test_usage_string_lists_custom_resources():
    rm = ResourceManager({"CPU": 4, "TPU": 4, "license": 1})
    rm.try_allocate("a", {"cpu": 1, "TPU": 1})
    assert rm.usage_string() == (
        "Logical resource usage: 1.0/4 CPUs, 0/0 GPUs (1.0/4.0 TPU, 0.0/1.0 license)"
    )


def test_bad_manager_arguments():
    with pytest.raises(ValueError, match="2 distinct ids"):
        ResourceManager({"GPU": 2}, gpu_ids=["0"])
    with pytest.raises(ValueError, match="2 distinct ids"):
        ResourceManager({"GPU": 2}, gpu_ids=["0", "0"])
    with pytest.raises(ValueError, match="whole number of GPUs"):
        ResourceManager({"GPU": 1.5})


def test_default_manager_uses_declared_resources(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,2")
    resources.init(num_cpus=3, resources={"TPU": 1})
    rm = ResourceManager()
    assert rm.total["CPU"] == 3.0 and rm.total["TPU"] == 1.0
    assert rm.try_allocate("a", pgf(GPU=1)).gpu_ids == ("1",)
    assert rm.try_allocate("b", pgf(GPU=1)).gpu_ids == ("2",)


# --- randomized invariants ------------------------------------------------------------

CHOICES = {
    "CPU": [0, 0.1, 0.25, 0.3, 0.5, 1, 2, 3],
    "GPU": [0, 0.1, 0.25, 0.3, 0.5, 0.7, 1, 2],
    "memory": [0, 1, 100, 333, 500],
    "A": [0, 0.5, 1, 1.5],
}


@pytest.mark.parametrize("seed", range(5))
def test_random_allocations_never_over_allocate(seed):
    rng = random.Random(seed)
    total = {"CPU": 8, "GPU": 4, "memory": 1000, "A": 3}
    rm = ResourceManager(total, gpu_ids=["a", "b", "c", "d"])
    held: dict[str, dict[str, Fraction]] = {}  # trial -> exact request
    shares: dict[str, dict[str, Fraction]] = {}  # trial -> GPU id -> share
    refusals = 0
    for step in range(400):
        if held and rng.random() < 0.4:
            trial = rng.choice(sorted(held))
            assert rm.release(trial) is not None
            del held[trial], shares[trial]
        else:
            req = {k: rng.choice(v) for k, v in CHOICES.items()}
            if not any(req.values()):
                continue
            exact = {k: Fraction(str(v)) for k, v in req.items()}
            used = {k: sum((h[k] for h in held.values()), Fraction(0)) for k in total}
            gpu_used = {g: sum((s.get(g, 0) for s in shares.values()), Fraction(0)) for g in "abcd"}
            if exact["GPU"] == 0:
                gpu_fits = True
            elif exact["GPU"] < 1:
                gpu_fits = any(1 - u >= exact["GPU"] for u in gpu_used.values())
            else:
                gpu_fits = sum(u == 0 for u in gpu_used.values()) >= exact["GPU"]
            fits = gpu_fits and all(used[k] + exact[k] <= total[k] for k in ("CPU", "memory", "A"))
            trial = f"t{step}"
            alloc = rm.try_allocate(trial, PlacementGroupFactory([req]))
            assert (alloc is not None) == fits, (req, used, gpu_used)
            if alloc is None:
                refusals += 1
                continue
            assert alloc.cpu == req["CPU"] and alloc.gpu == req["GPU"]
            assert alloc.memory == req["memory"] and alloc.custom.get("A", 0) == req["A"]
            if exact["GPU"] < 1:
                share = {g: exact["GPU"] for g in alloc.gpu_ids}
                assert len(alloc.gpu_ids) == (1 if exact["GPU"] else 0)
            else:
                share = dict.fromkeys(alloc.gpu_ids, Fraction(1))
                assert len(set(alloc.gpu_ids)) == exact["GPU"]
            held[trial], shares[trial] = exact, share
        # invariants after every step
        for g in "abcd":
            assert sum((s.get(g, 0) for s in shares.values()), Fraction(0)) <= 1
        used = {k: sum((h[k] for h in held.values()), Fraction(0)) for k in total}
        assert all(used[k] <= total[k] for k in total)
        assert rm.used() == {k: float(used[k]) for k in total}
        assert rm.num_allocated == len(held)
    assert refusals > 0  # the run exercised full machines too
    for trial in list(held):
        rm.release(trial)
    assert rm.used() == dict.fromkeys(total, 0.0)
    assert rm.available() == {k: float(v) for k, v in total.items()}
