"""Tests for GPU discovery and wait_for_gpu.

The retry logic is driven by a fake GPU query (a plain callable fed to the
``query`` parameter) and a recording ``sleep``; the nvidia-smi path runs a real
subprocess (a small script named ``nvidia-smi`` put first on PATH), and the
"no GPU" path runs against a PATH without nvidia-smi and without pynvml.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import stat
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from fasttune.utils.gpu import (
    NVIDIA_SMI_QUERY,
    GpuInfo,
    NoGpuError,
    detect_gpus,
    parse_nvidia_smi_csv,
    query_gpus,
    wait_for_gpu,
)

UUID0 = "GPU-04546190-b68d-65ac-101b-035f8faed77d"
UUID1 = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"

# Output of `nvidia-smi --query-gpu=index,uuid,memory.used,memory.total
# --format=csv,noheader,nounits` on a two-GPU machine, one of them busy.
SMI_TWO_GPUS = f"0, {UUID0}, 4, 81559\n1, {UUID1}, 40780, 81559\n"


def gpu(index: int, used: float | None, total: float | None = 1000.0) -> GpuInfo:
    return GpuInfo(index, UUID0 if index == 0 else UUID1, used, total)


class FakeQuery:
    """Returns one prepared GPU listing per call (the last one repeats)."""

    def __init__(self, *listings: Sequence[GpuInfo]) -> None:
        self.listings = list(listings)
        self.calls = 0

    def __call__(self) -> list[GpuInfo]:
        listing = self.listings[min(self.calls, len(self.listings) - 1)]
        self.calls += 1
        return list(listing)


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def record_sleep(sleeps: list[float]) -> Callable[[float], None]:
    return sleeps.append


@pytest.fixture(autouse=True)
def _no_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


@pytest.fixture
def no_gpu_tools(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A PATH without nvidia-smi and a pynvml that cannot be imported."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    return bin_dir


def install_nvidia_smi(bin_dir: Path, script_body: str) -> None:
    """Write an executable ``nvidia-smi`` shell script into ``bin_dir``."""
    path = bin_dir / "nvidia-smi"
    path.write_text("#!/bin/sh\n" + script_body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


# --- parsing -------------------------------------------------------------------------


def test_parse_real_nvidia_smi_output():
    gpus = parse_nvidia_smi_csv(SMI_TWO_GPUS)
    assert gpus == [GpuInfo(0, UUID0, 4.0, 81559.0), GpuInfo(1, UUID1, 40780.0, 81559.0)]
    assert gpus[0].memory_util == pytest.approx(4 / 81559)
    assert gpus[1].memory_util == pytest.approx(0.5, abs=0.001)


def test_parse_unreported_memory_as_none():
    (info,) = parse_nvidia_smi_csv(f"0, {UUID0}, [N/A], [Not Supported]\n")
    assert info.memory_used_mb is None
    assert info.memory_total_mb is None
    assert info.memory_util is None


def test_parse_empty_output_and_blank_lines():
    assert parse_nvidia_smi_csv("") == []
    assert len(parse_nvidia_smi_csv("\n" + SMI_TWO_GPUS + "\n\n")) == 2


@pytest.mark.parametrize("line", ["index, uuid, memory.used, memory.total", "0, GPU-x, 1"])
def test_parse_rejects_unexpected_lines(line):
    with pytest.raises(ValueError, match="Unexpected nvidia-smi output line"):
        parse_nvidia_smi_csv(line)


def test_gpu_info_to_dict():
    assert gpu(0, 1.0).to_dict() == {
        "index": 0,
        "uuid": UUID0,
        "memory_used_mb": 1.0,
        "memory_total_mb": 1000.0,
    }


# --- retry logic with an injected query ------------------------------------------------


def test_returns_true_at_once_when_free(sleeps, record_sleep):
    query = FakeQuery([gpu(0, 5.0)])
    assert wait_for_gpu(0, query=query, sleep=record_sleep) is True
    assert sleeps == []
    assert query.calls == 1


def test_waits_until_memory_is_freed(sleeps, record_sleep):
    query = FakeQuery([gpu(0, 800.0)], [gpu(0, 300.0)], [gpu(0, 0.0)])
    assert wait_for_gpu(0, retry=5, delay_s=2, query=query, sleep=record_sleep) is True
    assert sleeps == [2, 2]
    assert query.calls == 3


def test_target_util_is_inclusive(record_sleep):
    assert wait_for_gpu(0, target_util=0.5, query=FakeQuery([gpu(0, 500.0)]), sleep=record_sleep)


def test_raises_after_retries_when_never_freed(sleeps, record_sleep):
    query = FakeQuery([gpu(0, 900.0)])
    with pytest.raises(RuntimeError, match="GPU memory was not freed") as info:
        wait_for_gpu(0, retry=4, delay_s=1.5, query=query, sleep=record_sleep)
    assert "90.0% used after 4 checks" in str(info.value)
    assert query.calls == 4
    assert sleeps == [1.5, 1.5, 1.5]  # no sleep after the last check


@pytest.mark.parametrize("gpu_id", [1, "1", UUID1, UUID1[:12]])
def test_gpu_id_as_index_or_uuid(gpu_id, record_sleep):
    busy0_free1 = FakeQuery([gpu(0, 900.0), gpu(1, 0.0)])
    assert wait_for_gpu(gpu_id, retry=1, query=busy0_free1, sleep=record_sleep) is True
    free0_busy1 = FakeQuery([gpu(0, 0.0), gpu(1, 900.0)])
    with pytest.raises(RuntimeError, match="not freed"):
        wait_for_gpu(gpu_id, retry=1, query=free0_busy1, sleep=record_sleep)


@pytest.mark.parametrize("gpu_id", [7, "7", "GPU-ffffffff", "GPU-"])
def test_unknown_gpu_id_lists_the_gpus(gpu_id, record_sleep):
    query = FakeQuery([gpu(0, 0.0), gpu(1, 0.0)])
    with pytest.raises(ValueError, match=f"names no GPU of this machine.*0 \\({UUID0}\\)"):
        wait_for_gpu(gpu_id, query=query, sleep=record_sleep)


@pytest.mark.parametrize("visible", ["1", "1,0", f"{UUID1},{UUID0}"])
def test_default_gpu_is_first_cuda_visible_device(visible, monkeypatch, record_sleep):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert wait_for_gpu(retry=1, query=FakeQuery([gpu(0, 900.0), gpu(1, 0.0)]), sleep=record_sleep)
    with pytest.raises(RuntimeError, match="not freed"):
        wait_for_gpu(retry=1, query=FakeQuery([gpu(0, 0.0), gpu(1, 900.0)]), sleep=record_sleep)


def test_default_gpu_without_cuda_visible_devices_is_the_first(record_sleep):
    assert wait_for_gpu(retry=1, query=FakeQuery([gpu(0, 0.0), gpu(1, 900.0)]), sleep=record_sleep)


@pytest.mark.parametrize("visible", ["", "NoDevFiles", "-1"])
def test_no_gpu_assigned_to_the_trial(visible, monkeypatch, record_sleep):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    query = FakeQuery([gpu(0, 0.0)])
    with pytest.raises(NoGpuError, match=r"No GPU is assigned.*with_resources"):
        wait_for_gpu(query=query, sleep=record_sleep)
    assert query.calls == 0


def test_machine_without_gpus(record_sleep):
    with pytest.raises(NoGpuError, match=r"No GPU found on this machine.*'gpu': 1"):
        wait_for_gpu(query=FakeQuery([]), sleep=record_sleep)


def test_unreadable_memory_is_an_error(record_sleep):
    with pytest.raises(RuntimeError, match="cannot be read"):
        wait_for_gpu(0, query=FakeQuery([gpu(0, None, None)]), sleep=record_sleep)


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"target_util": 1.5}, "target_util"),
        ({"target_util": -0.1}, "target_util"),
        ({"retry": 0}, "retry"),
        ({"delay_s": -1}, "delay_s"),
        ({"gpu_id": 1.5}, "gpu_id"),
        ({"gpu_id": True}, "gpu_id"),
    ],
)
def test_invalid_arguments(kwargs, pattern, record_sleep):
    with pytest.raises(ValueError, match=pattern):
        wait_for_gpu(**{"gpu_id": 0, **kwargs}, query=FakeQuery([gpu(0, 0.0)]), sleep=record_sleep)


def test_malformed_gpu_id_is_rejected_before_looking_for_gpus(no_gpu_tools):
    with pytest.raises(ValueError, match="gpu_id"):
        wait_for_gpu(2.0)  # type: ignore[arg-type]


def test_gpu_memory_limit_is_deprecated_and_ignored(record_sleep):
    with pytest.warns(DeprecationWarning, match="gpu_memory_limit"):
        assert wait_for_gpu(
            0, gpu_memory_limit=0.9, query=FakeQuery([gpu(0, 0.0)]), sleep=record_sleep
        )


# --- the real nvidia-smi subprocess path -----------------------------------------------


@pytest.mark.skipif(os.name != "posix", reason="the fake nvidia-smi is a shell script")
def test_query_gpus_runs_nvidia_smi(no_gpu_tools):
    install_nvidia_smi(
        no_gpu_tools,
        f'[ "$1 $2" = "{" ".join(NVIDIA_SMI_QUERY)}" ] || exit 3\nprintf "{SMI_TWO_GPUS}"\n',
    )
    assert query_gpus() == parse_nvidia_smi_csv(SMI_TWO_GPUS)
    assert [g["index"] for g in detect_gpus()] == [0, 1]


@pytest.mark.skipif(os.name != "posix", reason="the fake nvidia-smi is a shell script")
def test_wait_for_gpu_through_nvidia_smi(no_gpu_tools, tmp_path, sleeps, record_sleep):
    # Busy on the first two calls, free from the third: state kept in a counter file.
    # PATH holds only the fake nvidia-smi, so the script uses shell builtins only.
    counter = tmp_path / "calls"
    install_nvidia_smi(
        no_gpu_tools,
        f'n=0; [ -f "{counter}" ] && read n < "{counter}"; n=$((n+1)); echo $n > "{counter}"\n'
        f'if [ $n -le 2 ]; then echo "0, {UUID0}, 70000, 81559"; '
        f'else echo "0, {UUID0}, 3, 81559"; fi\n',
    )
    assert wait_for_gpu(0, retry=5, delay_s=0.25, sleep=record_sleep) is True
    assert sleeps == [0.25, 0.25]
    assert counter.read_text().strip() == "3"


@pytest.mark.skipif(os.name != "posix", reason="the fake nvidia-smi is a shell script")
def test_failing_nvidia_smi_means_no_gpu(no_gpu_tools):
    install_nvidia_smi(
        no_gpu_tools,
        'echo "NVIDIA-SMI has failed because it could not communicate with the NVIDIA '
        'driver." >&2\nexit 9\n',
    )
    with pytest.raises(NoGpuError, match="exit code 9: NVIDIA-SMI has failed"):
        query_gpus()
    assert detect_gpus() == []


# --- no GPU tooling at all -------------------------------------------------------------


def test_no_nvidia_smi_and_no_pynvml(no_gpu_tools, record_sleep):
    with pytest.raises(NoGpuError, match="No GPU found: nvidia-smi is not on PATH") as info:
        wait_for_gpu(0, sleep=record_sleep)
    assert isinstance(info.value, RuntimeError)
    assert "with_resources" in str(info.value)
    assert detect_gpus() == []


_HAS_GPU_TOOLS = shutil.which("nvidia-smi") is not None or bool(importlib.util.find_spec("pynvml"))


@pytest.mark.skipif(_HAS_GPU_TOOLS, reason="this machine has GPU tooling")
def test_this_machine_has_no_gpu(record_sleep):
    # Nothing patched: the real lookup on a machine without nvidia-smi and pynvml.
    with pytest.raises(RuntimeError, match="No GPU found"):
        wait_for_gpu(sleep=record_sleep)
    assert detect_gpus() == []
