"""``validate_save_restore``: check that a trainable's checkpoints round-trip."""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

import cloudpickle

from fasttune.result import TRAINING_ITERATION


def validate_save_restore(
    trainable_cls: Any, config: dict[str, Any] | None = None, num_gpus: int = 0
) -> bool:
    """Train a trainable 3 steps, save, restore into a fresh instance, and train on.

    Checks that the class survives pickling (as it must to reach a worker) and that
    the restored instance continues at iterations 4 and 5.

    Args:
        trainable_cls: A Trainable class or a training function.
        config: The config both instances are created with.
        num_gpus: Accepted for compatibility (no GPU is reserved).

    Returns:
        True when the round trip works.

    Raises:
        RuntimeError: Naming what went wrong (pickling, missing iteration, restore).

    Example:
        >>> from fasttune import Trainable
        >>> class Counter(Trainable):
        ...     def setup(self, config): self.n = 0
        ...     def step(self): self.n += 1; return {"n": self.n}
        ...     def save_checkpoint(self, d): return {"n": self.n}
        ...     def load_checkpoint(self, c): self.n = c["n"]
        >>> validate_save_restore(Counter)
        True
    """
    from fasttune.trainable.function_trainable import wrap_function
    from fasttune.trainable.trainable import Trainable

    cls = trainable_cls
    if not (isinstance(cls, type) and issubclass(cls, Trainable)):
        cls = wrap_function(cls)
    try:
        cls = cloudpickle.loads(cloudpickle.dumps(cls))
    except Exception as e:
        raise RuntimeError(
            f"{cls.__name__} cannot be serialised, so it cannot reach a worker process: {e}. "
            "Run fasttune.utils.diagnose_serialization() on it to find the culprit."
        ) from e

    workdir = tempfile.mkdtemp(prefix="fasttune_validate_")

    def make() -> Trainable:
        from fasttune.logger import NoopLogger

        logdir = tempfile.mkdtemp(dir=workdir)
        return cls(config=dict(config or {}), logger_creator=lambda c: NoopLogger(c, logdir))

    first = second = None
    try:
        first = make()
        result: dict[str, Any] = {}
        for _ in range(3):
            result = first.train()
        if not result.get(TRAINING_ITERATION):
            raise RuntimeError(
                f"{cls.__name__} reported no {TRAINING_ITERATION!r}; validation needs it."
            )
        path = first.save()
        second = make()
        second.restore(path)
        for expected in (4, 5):
            got = second.train().get(TRAINING_ITERATION)
            if got != expected:
                raise RuntimeError(
                    f"After restoring a checkpoint saved at iteration 3, {cls.__name__} "
                    f"reported {TRAINING_ITERATION}={got}, expected {expected}: check "
                    "save_checkpoint()/load_checkpoint()."
                )
        return True
    finally:
        for trainable in (first, second):
            if trainable is not None:
                trainable.stop()
        shutil.rmtree(workdir, ignore_errors=True)
