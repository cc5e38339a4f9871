"""Where a Tuner's trials run: which executor ``fit()`` uses when none is given.

Local worker processes by default; the inline executor with ``FASTTUNE_EXECUTOR=inline``;
a Ray cluster's actors when one is chosen (``fasttune.init(address=...)``,
``FASTTUNE_ADDRESS``, or a ``ray.init()`` this process already made).
"""

from __future__ import annotations

import os
import sys
from typing import Any


def runs_inline(executor: Any) -> bool:
    """Whether trials run in this process (nothing is pickled for them)."""
    if executor is not None:
        return type(executor).__name__ == "InlineExecutor"
    return os.environ.get("FASTTUNE_EXECUTOR", "local") == "inline"


def local_workers_chosen() -> bool:
    """Whether :func:`default_executor` runs trials in local worker processes."""
    if runs_inline(None):
        return False
    from fasttune._support.cluster_address import ray_target
    from fasttune._support.supported_platform import local_workers_unsupported

    return ray_target() is None and local_workers_unsupported() is None


def start_fork_server() -> None:
    """Start the local workers' fork server (without waiting for it)."""
    from fasttune.executors import start_fork_server as start

    start()


def warm_ray_connection() -> None:
    """If trials will run on the Ray cluster this process is already connected to, let
    Ray build what its first actor start needs, in a thread
    (:func:`fasttune._support.cluster_address.ready_ray_connection`): started when the
    Tuner is built, it is ready by the time ``fit()`` needs it."""
    import threading

    from fasttune._support.cluster_address import ray_target, ready_ray_connection

    ray = sys.modules.get("ray")
    if ray_target() is None or ray is None or not ray.is_initialized():
        return  # local workers, or fit() connects (its ray.init takes seconds anyway)
    threading.Thread(target=ready_ray_connection, name="fasttune-ray-warm-up", daemon=True).start()


def started_local_executor(trainable_blob: bytes | None = None) -> Any:
    """A local executor, its fork server and first worker already starting.

    Args:
        trainable_blob: The pickled trainable: the fork server imports what it names
            before forking that worker (see :func:`trainable_imports`).
    """
    start_fork_server()  # first: the server's start overlaps the imports below
    from fasttune.executors.local import LocalExecutor

    executor = LocalExecutor()
    preload = trainable_imports(trainable_blob)
    if preload:
        executor.preload_modules(*preload, learn=True)
    executor.warm_up()
    return executor


def trainable_imports(trainable_blob: bytes | None) -> list[str]:
    """What the local fork server should import ahead: the third-party modules loading
    the pickled trainable imports (torch, say), so that each worker forked after starts
    with them instead of importing them itself (1-2 s for torch, in every worker that
    ``reuse_actors=False`` makes). The server then also imports what the first workers
    imported under those packages at their first use (``torch._dynamo`` when an
    optimizer is built: ``executors/_learned_imports.py``).

    Only on Linux, with no GPU visible or declared (``fasttune.init(num_gpus=...)``): a
    module that touches CUDA on import (a ``torch.cuda.is_available()`` at module level
    initialises the driver) would leave the GPU unusable in every forked worker, and one
    that reads ``CUDA_VISIBLE_DEVICES`` on import would read the driver's, not its
    trial's; macOS frameworks are not fork-safe. ``FASTTUNE_PRELOAD_IMPORTS=0`` turns it
    off.
    """
    if (
        not trainable_blob
        or sys.platform != "linux"
        or os.environ.get("FASTTUNE_PRELOAD_IMPORTS", "1") == "0"
    ):
        return []
    from fasttune._support.pickled_modules import modules_named_in
    from fasttune._support.resource_detection import detect_total_resources

    modules = modules_named_in(trainable_blob)
    if not modules or detect_total_resources()["GPU"] > 0:
        return []
    return modules


def default_executor(trainable_blob: bytes | None = None) -> Any:
    """The local process executor, its first worker already starting; the inline
    executor when ``FASTTUNE_EXECUTOR=inline``; the Ray executor when a Ray cluster
    is chosen (``fasttune.init(address=...)``, ``FASTTUNE_ADDRESS``, or a ``ray.init()``
    this process already made)."""
    if runs_inline(None):
        from fasttune.executors.inline import InlineExecutor

        return InlineExecutor()
    from fasttune._support.cluster_address import ray_target

    target = ray_target()
    if target is not None:
        from fasttune.executors.ray_executor import RayExecutor

        return RayExecutor(target.address, init_kwargs=target.init_kwargs)
    from fasttune._support.supported_platform import require_local_workers

    require_local_workers()  # a clear error on Windows, before the fork server is imported
    return started_local_executor(trainable_blob)


def prestart(executor: Any, trainable_cls: Any) -> None:
    """Let an executor whose workers take long to start (a Ray actor: ~1 s) start the
    first one now, while the run is being set up, if the trainable's resources do not
    depend on the config."""
    start_first = getattr(executor, "prestart", None)
    if start_first is None:
        return
    from fasttune._internal.spec_builder import resources_function

    try:
        resources = resources_function(trainable_cls)({})
    except Exception:  # they depend on the config: the first trial asks for them
        return
    start_first(resources)
