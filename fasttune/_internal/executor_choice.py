"""Where a Tuner's trials run: which executor ``fit()`` uses when none is given.

Local worker processes by default; the inline executor with ``FASTTUNE_EXECUTOR=inline``;
a Ray cluster's actors when one is chosen (``fasttune.init(address=...)``,
``FASTTUNE_ADDRESS``, or a ``ray.init()`` this process already made).
"""

from __future__ import annotations

import os
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


def started_local_executor() -> Any:
    """A local executor, its fork server and first worker already starting."""
    from fasttune.executors import start_fork_server

    start_fork_server()  # first: the server's start overlaps the imports below
    from fasttune.executors.local import LocalExecutor

    executor = LocalExecutor()
    executor.warm_up()
    return executor


def default_executor() -> Any:
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
    return started_local_executor()


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
