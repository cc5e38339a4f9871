"""Trainables run by the executor tests.

They live in their own light module (no pytest import) because workers import it
when they unpickle a trainable.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import uuid
from typing import Any

import numpy as np

from fasttune.checkpoint import Checkpoint
from fasttune.trainable import Trainable, report

# Read when a worker imports this module, i.e. when it unpickles a trainable.
CUDA_AT_IMPORT = os.environ.get("CUDA_VISIBLE_DEVICES")
SETUPS_IN_PROCESS = 0
PRELOADED = "tests.executors._preloaded"


class Counter(Trainable):
    """Counts iterations; config: ``stop_at``, ``sleep``, ``step_log`` (a file to append to)."""

    def setup(self, config: dict[str, Any]) -> None:
        global SETUPS_IN_PROCESS
        SETUPS_IN_PROCESS += 1
        self.token = uuid.uuid4().hex
        self.count = 0
        if config.get("ignore_sigterm"):
            signal.signal(signal.SIGTERM, signal.SIG_IGN)

    def step(self) -> dict[str, Any]:
        self.count += 1
        if self.config.get("step_log"):
            with open(self.config["step_log"], "a") as f:
                f.write(f"{self.count}\n")
        if self.config.get("sleep"):
            time.sleep(self.config["sleep"])
        if self.config.get("exit_at") == self.count:
            os._exit(3)
        return {
            "count": self.count,
            "token": self.token,
            "setups": SETUPS_IN_PROCESS,
            "worker_pid": os.getpid(),
            "cwd": os.getcwd(),
            "cuda": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "cuda_at_import": CUDA_AT_IMPORT,
            "orig_dir": os.environ.get("TUNE_ORIG_WORKING_DIR"),
            "random": float(np.random.rand()),
            "preloaded_in": getattr(sys.modules.get(PRELOADED), "IMPORTED_IN", None),
            "env": os.environ.get(self.config.get("env", ""), None),
            "done": self.count >= self.config.get("stop_at", float("inf")),
        }

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        with open(os.path.join(checkpoint_dir, "count.txt"), "w") as f:
            f.write(str(self.count))

    def load_checkpoint(self, checkpoint: str) -> None:
        with open(os.path.join(checkpoint, "count.txt")) as f:
            self.count = int(f.read())

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        self.count = 0
        return True


class GatedReset(Counter):
    """A Counter whose ``reset_config`` waits until the file ``config["gate"]`` exists
    (30 s at most): user code that a worker must not make the driver wait for."""

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        gate = new_config.get("gate")
        deadline = time.monotonic() + 30
        while gate and not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.01)
        return super().reset_config(new_config)


class NoReset(Counter):
    """A Counter without ``reset_config`` (a reused worker must build a fresh one)."""

    reset_config = Trainable.reset_config


class BadError(Exception):
    """Pickles, but cannot be unpickled (its constructor takes two arguments)."""

    def __init__(self, a: str, b: str):
        super().__init__(f"{a}-{b}")


class Failing(Trainable):
    """Raises at iteration ``fail_at`` (``BadError`` when ``bad`` is set), or in setup."""

    def setup(self, config: dict[str, Any]) -> None:
        if config.get("fail_in_setup"):
            raise RuntimeError("setup exploded")

    def step(self) -> dict[str, Any]:
        if self.iteration + 1 >= self.config.get("fail_at", 1):
            if self.config.get("bad"):
                raise BadError("bad", "error")
            raise ValueError(f"boom at {self.iteration + 1}")
        return {"ok": True}


class Unsendable(Trainable):
    """Reports a value that no pickler can send."""

    def step(self) -> dict[str, Any]:
        return {"lock": threading.Lock()}


def counting_fn(config: dict[str, Any]) -> None:
    """Reports ``n`` times; a checkpoint every ``checkpoint_every`` reports if set."""
    every = config.get("checkpoint_every")
    for i in range(config["n"]):
        checkpoint = None
        if every and (i + 1) % every == 0:
            directory = os.path.join(config["scratch"], f"ckpt_{i}")
            os.makedirs(directory, exist_ok=True)
            with open(os.path.join(directory, "state.txt"), "w") as f:
                f.write(str(i))
            checkpoint = Checkpoint.from_directory(directory)
        report({"i": i}, checkpoint=checkpoint)


def failing_fn(config: dict[str, Any]) -> None:
    report({"i": 0})
    raise ValueError("the function exploded")


def sleep_forever(fd: int) -> None:
    """A fork-server child target that only waits (to be killed)."""
    time.sleep(3600)


def _thread() -> dict[str, Any]:
    current = threading.current_thread()
    return {"thread": current.name, "main_thread": current is threading.main_thread()}


def thread_reporting_fn(config: dict[str, Any]) -> None:
    """Reports ``n`` times, sleeping ``sleep`` s before each, which thread it runs in."""
    for i in range(config["n"]):
        if config.get("sleep"):
            time.sleep(config["sleep"])
        report({"i": i, "worker_pid": os.getpid(), **_thread()})


class ThreadReporting(Trainable):
    """Says which thread its ``step`` runs in; done after ``n`` iterations."""

    def step(self) -> dict[str, Any]:
        return {"done": self.iteration + 1 >= self.config["n"], **_thread()}


def slow_cleanup_fn(config: dict[str, Any]) -> None:
    """Reports every 2 ms until stopped, then takes ``cleanup_s`` to clean up (closing a
    data loader, say): its stop ends after the batch it interrupted was sent."""
    i = 0
    try:
        while True:
            time.sleep(0.002)
            i += 1
            report({"i": i})
    finally:
        time.sleep(config.get("cleanup_s", 0.2))
