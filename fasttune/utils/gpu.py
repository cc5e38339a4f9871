"""GPU discovery and ``wait_for_gpu`` (as ``ray.tune.utils.wait_for_gpu``).

GPUs are read through NVML (the optional ``pynvml`` module, from the
``nvidia-ml-py`` package) when it is installed and works, else by running
``nvidia-smi``. Both report physical device indices, which is also what
``CUDA_VISIBLE_DEVICES`` holds when fasttune assigns GPUs to a trial.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "NVIDIA_SMI_QUERY",
    "GpuInfo",
    "NoGpuError",
    "detect_gpus",
    "parse_nvidia_smi_csv",
    "query_gpus",
    "wait_for_gpu",
]

logger = logging.getLogger(__name__)

#: The ``nvidia-smi`` arguments whose CSV output :func:`parse_nvidia_smi_csv` reads.
NVIDIA_SMI_QUERY: tuple[str, ...] = (
    "--query-gpu=index,uuid,memory.used,memory.total",
    "--format=csv,noheader,nounits",
)
_NVIDIA_SMI_TIMEOUT_S = 10.0
_MIB = 1024 * 1024

_HOW_TO_GET_A_GPU = (
    "Ask for a GPU for the trial, e.g. tune.with_resources(train_fn, {'gpu': 1}) or "
    "resources_per_trial={'gpu': 1}, on a machine with an NVIDIA GPU and driver "
    "(nvidia-smi must work; `pip install nvidia-ml-py` is optional)."
)


class NoGpuError(RuntimeError):
    """No GPU can be found or read on this machine (or none is assigned to this trial)."""


@dataclass(frozen=True)
class GpuInfo:
    """One GPU as seen by NVML or ``nvidia-smi``.

    Attributes:
        index: Physical device index, as in ``nvidia-smi`` and ``CUDA_VISIBLE_DEVICES``.
        uuid: Device UUID, e.g. ``"GPU-04546190-b68d-65ac-101b-035f8faed77d"``.
        memory_used_mb: Used memory in MiB, or None if the driver does not report it.
        memory_total_mb: Total memory in MiB, or None if the driver does not report it.
    """

    index: int
    uuid: str
    memory_used_mb: float | None
    memory_total_mb: float | None

    @property
    def memory_util(self) -> float | None:
        """Used over total memory, between 0 and 1; None if unknown."""
        if self.memory_used_mb is None or not self.memory_total_mb:
            return None
        return self.memory_used_mb / self.memory_total_mb

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        return asdict(self)


def _number(text: str) -> float | None:
    """A number from an ``nvidia-smi`` field, or None for ``[N/A]``-style values."""
    try:
        return float(text)
    except ValueError:
        return None


def parse_nvidia_smi_csv(text: str) -> list[GpuInfo]:
    """Parse the output of ``nvidia-smi`` run with :data:`NVIDIA_SMI_QUERY`.

    Args:
        text: Lines such as ``"0, GPU-3a4f..., 1024, 81559"``.

    Returns:
        One :class:`GpuInfo` per line; unreadable memory fields become None.

    Raises:
        ValueError: If a line does not have the four expected fields.

    Example:
        >>> parse_nvidia_smi_csv("0, GPU-abc, 512, 1024\\n")[0].memory_util
        0.5
    """
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 4 or not fields[0].isdigit():
            raise ValueError(
                f"Unexpected nvidia-smi output line {line!r}; expected 'index, uuid, "
                "memory.used, memory.total'."
            )
        gpus.append(GpuInfo(int(fields[0]), fields[1], _number(fields[2]), _number(fields[3])))
    return gpus


def _query_nvml() -> list[GpuInfo] | None:
    """GPUs through NVML, or None if ``pynvml`` is missing or NVML cannot start."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception as e:  # NVMLError: library or driver not found
        logger.debug("NVML is unavailable (%s); trying nvidia-smi.", e)
        return None
    try:
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            if isinstance(uuid, bytes):  # older pynvml versions return bytes
                uuid = uuid.decode()
            try:
                mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
                used, total = mem.used / _MIB, mem.total / _MIB
            except Exception:  # NVMLError_NotSupported on some MIG setups
                used = total = None
            gpus.append(GpuInfo(index, uuid, used, total))
        return gpus
    finally:
        pynvml.nvmlShutdown()


def _query_nvidia_smi() -> list[GpuInfo]:
    """GPUs by running ``nvidia-smi``; raises :class:`NoGpuError` if that is impossible."""
    # Looked up first: a machine without GPUs (most) then starts no process (~1 ms).
    executable = shutil.which("nvidia-smi")
    try:
        if executable is None:
            raise FileNotFoundError("nvidia-smi")
        proc = subprocess.run(
            [executable, *NVIDIA_SMI_QUERY],
            capture_output=True,
            text=True,
            timeout=_NVIDIA_SMI_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError as e:
        raise NoGpuError(
            "No GPU found: nvidia-smi is not on PATH and pynvml is not installed. "
            + _HOW_TO_GET_A_GPU
        ) from e
    except subprocess.TimeoutExpired as e:
        raise RuntimeError(
            f"nvidia-smi did not answer within {_NVIDIA_SMI_TIMEOUT_S:g}s; the GPU driver may "
            "be hung. Check `nvidia-smi` by hand."
        ) from e
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip()
        raise NoGpuError(
            f"No GPU found: nvidia-smi failed with exit code {proc.returncode}: {detail} "
            + _HOW_TO_GET_A_GPU
        )
    return parse_nvidia_smi_csv(proc.stdout)


def query_gpus() -> list[GpuInfo]:
    """List this machine's GPUs through NVML, falling back to ``nvidia-smi``.

    Returns:
        One :class:`GpuInfo` per GPU, by physical index (an empty list is possible).

    Raises:
        NoGpuError: If neither NVML nor ``nvidia-smi`` can be used.
    """
    gpus = _query_nvml()
    return gpus if gpus is not None else _query_nvidia_smi()


def detect_gpus() -> list[dict[str, Any]]:
    """List this machine's GPUs as dicts; an empty list when there are none.

    Returns:
        Dicts with keys ``index``, ``uuid``, ``memory_used_mb`` and ``memory_total_mb``.

    Example:
        >>> isinstance(detect_gpus(), list)
        True
    """
    try:
        return [gpu.to_dict() for gpu in query_gpus()]
    except NoGpuError:
        return []


def _visible_gpu_id(environ: Mapping[str, str]) -> str | None:
    """The first entry of ``CUDA_VISIBLE_DEVICES``; None if the variable is unset."""
    value = environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    first = value.split(",")[0].strip()
    if not first or first == "NoDevFiles" or first.startswith("-"):
        raise NoGpuError(
            f"No GPU is assigned to this process (CUDA_VISIBLE_DEVICES={value!r}). "
            + _HOW_TO_GET_A_GPU
        )
    return first


def _matcher(gpu_id: int | str) -> Callable[[GpuInfo], bool]:
    """A test for "is this the GPU that ``gpu_id`` names" (an index or a UUID)."""
    if isinstance(gpu_id, bool) or not isinstance(gpu_id, (int, str)):
        raise ValueError(f"wait_for_gpu(gpu_id=...) must be an int or a str, got {gpu_id!r}.")
    if isinstance(gpu_id, int) or gpu_id.isdigit():
        index = int(gpu_id)
        return lambda gpu: gpu.index == index
    # A UUID such as "GPU-04546190-b68d-...", possibly shortened as CUDA allows.
    prefix_ok = gpu_id.startswith("GPU-") and len(gpu_id) > len("GPU-")
    return lambda gpu: gpu.uuid == gpu_id or (prefix_ok and gpu.uuid.startswith(gpu_id))


def wait_for_gpu(
    gpu_id: int | str | None = None,
    target_util: float = 0.01,
    retry: int = 20,
    delay_s: float = 5,
    gpu_memory_limit: float | None = None,
    *,
    query: Callable[[], Sequence[GpuInfo]] = query_gpus,
    sleep: Callable[[float], Any] = time.sleep,
) -> bool:
    """Block until a GPU's memory is (nearly) free, e.g. after the previous trial.

    Args:
        gpu_id: GPU index (``0`` or ``"0"``) or UUID to watch. None means the first
            entry of ``CUDA_VISIBLE_DEVICES`` (the trial's GPU), or the first GPU
            of the machine when that variable is unset.
        target_util: Unblock once used/total memory is at most this (0 to 1).
        retry: How many times to check before giving up.
        delay_s: Seconds to sleep between checks.
        gpu_memory_limit: Deprecated and ignored, as in Ray; use ``target_util``.
        query: Returns the machine's GPUs; replace it to watch GPUs another way.
        sleep: Called with ``delay_s`` between checks.

    Returns:
        True once the GPU's memory utilisation is at most ``target_util``.

    Raises:
        NoGpuError: (a RuntimeError) if no GPU is assigned or none can be found.
        ValueError: If ``gpu_id`` names no GPU of this machine, or an argument is invalid.
        RuntimeError: If the memory is still in use after ``retry`` checks.

    Example:
        >>> def train_fn(config):
        ...     wait_for_gpu()  # before moving the model to the GPU
        ...     ...
        >>> trainable = tune.with_resources(train_fn, {"gpu": 1})  # doctest: +SKIP
    """
    if gpu_memory_limit is not None:
        warnings.warn(
            "wait_for_gpu(gpu_memory_limit=...) is deprecated and ignored; use target_util.",
            DeprecationWarning,
            stacklevel=2,
        )
    if not 0 <= target_util <= 1:
        raise ValueError(
            f"wait_for_gpu(target_util=...) must be between 0 and 1, got {target_util!r}."
        )
    if retry < 1:
        raise ValueError(f"wait_for_gpu(retry=...) must be at least 1, got {retry!r}.")
    if delay_s < 0:
        raise ValueError(f"wait_for_gpu(delay_s=...) must be >= 0, got {delay_s!r}.")

    if gpu_id is None:
        gpu_id = _visible_gpu_id(os.environ)
    else:
        _matcher(gpu_id)  # reject a malformed gpu_id before looking for GPUs
    gpus = list(query())
    if not gpus:
        raise NoGpuError("No GPU found on this machine. " + _HOW_TO_GET_A_GPU)
    if gpu_id is None:
        gpu_id = gpus[0].index
    matches = _matcher(gpu_id)
    if not any(matches(gpu) for gpu in gpus):
        known = ", ".join(f"{g.index} ({g.uuid})" for g in gpus)
        raise ValueError(
            f"wait_for_gpu(gpu_id={gpu_id!r}) names no GPU of this machine; its GPUs are: "
            f"{known}. Pass an index such as 0 or a UUID such as 'GPU-04546190-...'."
        )

    for attempt in range(1, int(retry) + 1):
        gpu = next((g for g in gpus if matches(g)), None)
        if gpu is None:
            raise RuntimeError(f"GPU {gpu_id!r} disappeared while waiting for it.")
        util = gpu.memory_util
        if util is None:
            raise RuntimeError(
                f"The memory use of GPU {gpu_id!r} cannot be read (the driver reports "
                f"used={gpu.memory_used_mb}, total={gpu.memory_total_mb}), so wait_for_gpu "
                "cannot tell whether it is free."
            )
        if util <= target_util:
            return True
        logger.info(
            "Waiting for GPU %s memory use to reach %.3f (now %.3f, check %d of %d).",
            gpu_id,
            target_util,
            util,
            attempt,
            retry,
        )
        if attempt < retry:
            sleep(delay_s)
            gpus = list(query())
    raise RuntimeError(
        f"GPU memory was not freed: GPU {gpu_id!r} is still {util:.1%} used after {retry} "
        f"checks {delay_s}s apart (target {target_util:.1%}). Another process may hold it; "
        "raise retry or delay_s, or check `nvidia-smi`."
    )
