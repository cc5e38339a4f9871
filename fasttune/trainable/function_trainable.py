"""The function API: a plain ``def train_fn(config)`` run as a Trainable.

The user's function runs in a greenlet on the caller's thread. ``train()``
switches into it; ``report()`` switches back with the result. There is no thread
and no queue, so one result costs two stack switches (about a microsecond), the
function never runs ahead of ``train()``, and stopping it mid-run simply raises
``GreenletExit`` at the ``report()`` call it is suspended in.
"""

from __future__ import annotations

import logging
import numbers
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from greenlet import GreenletExit, getcurrent, greenlet

from fasttune import result as R
from fasttune.checkpoint import Checkpoint, storage_filesystem_of
from fasttune.trainable import checkpoint_io as ckpt_io
from fasttune.trainable._checkpoint_staging import staged_dir
from fasttune.trainable.session import TrialSession, attach_session
from fasttune.trainable.trainable import Trainable

logger = logging.getLogger(__name__)

_FINISHED = object()
_MAX_STOP_ATTEMPTS = 3
_abandoned: list[greenlet] = []


class FunctionTrainable(Trainable):
    """A Trainable that runs a training function (see :func:`wrap_function`)."""

    _name: str = "func"
    _train_func: Callable[..., Any]

    # ------------------------------------------------------------------ lifecycle
    def setup(self, config: dict[str, Any]) -> None:
        self._fn_config = config
        self._glet: greenlet | None = None
        self._stopping = False
        self._finished = False
        self._step_start = time.time()
        info = self._trial_info
        self._checkpoint_index = info.checkpoint_index if info is not None else 0
        self._restored_copies: list[str] = []

    def _make_session(self) -> TrialSession:
        return TrialSession(self._trial_info, self._logdir, report_fn=self._on_report)

    def step(self) -> dict[str, Any]:
        if self._finished:
            return self._duplicate_of_last()
        self._step_start = time.time()
        glet = self._glet
        if glet is None:
            glet = self._glet = greenlet(self._run_function)
            attach_session(glet, self._session)
        else:
            glet.parent = getcurrent()
        message = glet.switch()
        if message is _FINISHED:
            self._finished = True
            self._glet = None
            return self._duplicate_of_last()
        metrics, checkpoint = message
        result = dict(metrics)
        if checkpoint is not None:
            # As Ray: a result that carries a checkpoint says so (the runner takes the
            # checkpoint from checkpoint_dir_name; nothing is saved again).
            result[R.SHOULD_CHECKPOINT] = True
            result[R.CHECKPOINT_DIR_NAME] = os.path.basename(checkpoint.path)
        return result

    def _duplicate_of_last(self) -> dict[str, Any]:
        """The result that ends a finished function: its last one again, marked as a
        duplicate (never logged), which asks for no checkpoint."""
        return {
            **(self._last_result or {}),
            R.DONE: True,
            R.RESULT_DUPLICATE: True,
            R.SHOULD_CHECKPOINT: False,
        }

    def _run_function(self) -> object:
        output = self._train_func(self._fn_config)
        if output is None:
            return _FINISHED
        if isinstance(output, Mapping):
            self._on_report(output, None)
        elif isinstance(output, numbers.Number):
            self._on_report({R.DEFAULT_METRIC: output}, None)
        else:
            raise TypeError(
                f"The training function {self._name!r} returned {type(output).__name__}; "
                "it may return None, a dict of final metrics, or a number."
            )
        return _FINISHED

    def _on_report(self, metrics: Mapping[str, Any], checkpoint: Checkpoint | None) -> None:
        glet = self._glet
        if glet is None or glet.dead:
            raise RuntimeError(
                f"fasttune.report() was called while the training function {self._name!r} "
                "is not running: call it from inside the training function."
            )
        if getcurrent() is not glet:
            raise RuntimeError(
                "fasttune.report() must be called by the training function itself (on the "
                "thread that runs it), not from another thread or greenlet."
            )
        if self._stopping:
            glet.parent.switch(None)  # a stop request was swallowed: hand control back
            return
        persisted = None
        if checkpoint is not None:
            if not isinstance(checkpoint, Checkpoint):
                raise TypeError(
                    "fasttune.report(checkpoint=...) expects a fasttune.Checkpoint, got "
                    f"{type(checkpoint).__name__}; use Checkpoint.from_directory(path)."
                )
            persisted = self._persist_checkpoint(checkpoint, metrics)
            self._session.loaded_checkpoint = persisted
        glet.parent.switch((metrics, persisted))

    def _persist_checkpoint(self, checkpoint: Checkpoint, metrics: Mapping[str, Any]) -> Checkpoint:
        """Copy a reported checkpoint into the trial directory, with the trainable state."""
        index = self._checkpoint_index
        self._checkpoint_index += 1
        final = os.path.join(self._logdir, ckpt_io.checkpoint_dir_name(index))
        import shutil  # here: the fork server imports it after it is ready

        with staged_dir(final, self._logdir) as staging:
            with checkpoint.as_directory() as source:
                shutil.copytree(source, staging, dirs_exist_ok=True)
            state = self.get_state()
            state.update(
                iteration=self._iteration + 1,
                time_total=self._time_total + (time.time() - self._step_start),
                last_result=dict(metrics),
                payload_kind=ckpt_io.PAYLOAD_FILES,
                payload_path="",
                checkpoint_index=index,
            )
            ckpt_io.write_state(staging, state)
        return Checkpoint(final)

    def _end_function(self) -> None:
        """Stop a suspended training function by raising ``GreenletExit`` inside it."""
        glet = self._glet
        if glet is None or glet.dead or not glet:
            self._glet = None
            return
        self._stopping = True
        try:
            for _ in range(_MAX_STOP_ATTEMPTS):
                glet.parent = getcurrent()
                try:
                    glet.throw(GreenletExit)
                except Exception:
                    logger.warning("The training function raised while stopping", exc_info=True)
                if glet.dead:
                    return
            logger.warning(
                "The training function %r kept running after %d stop requests (does it "
                "catch BaseException around fasttune.report()?); abandoning it.",
                self._name,
                _MAX_STOP_ATTEMPTS,
            )
            _abandoned.append(glet)  # never resumed; kept so garbage collection cannot run it
        finally:
            self._stopping = False
            self._glet = None

    def cleanup(self) -> None:
        self._end_function()
        if self._restored_copies:
            import shutil  # here: the fork server imports it after it is ready

            for path in self._restored_copies:
                shutil.rmtree(path, ignore_errors=True)
            self._restored_copies.clear()

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        self._end_function()
        self._fn_config = new_config
        self._finished = False
        info = self._trial_info
        self._checkpoint_index = info.checkpoint_index if info is not None else 0
        return True

    # ------------------------------------------------------------------ checkpoints
    def save(self, checkpoint_dir: str | None = None, prevent_upload: bool = False) -> str:
        """Return the latest reported checkpoint (copied to ``checkpoint_dir`` if given).

        Before any checkpoint was reported this saves the counters only; restoring
        it restarts the function with ``get_checkpoint()`` returning None.
        """
        latest = self._session.loaded_checkpoint
        if latest is None:
            return super().save(checkpoint_dir, prevent_upload)
        if checkpoint_dir is None:
            return latest.path
        import shutil

        os.makedirs(checkpoint_dir, exist_ok=True)
        with latest.as_directory() as source:
            shutil.copytree(source, checkpoint_dir, dirs_exist_ok=True)
        return os.path.abspath(checkpoint_dir)

    def has_checkpoint_state(self) -> bool:
        return self._session.loaded_checkpoint is not None

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        # Only reached before any checkpoint was reported: there is no user state.
        return None

    def _save_into(self, directory: str) -> None:
        state = self.get_state()
        state.update(payload_kind=ckpt_io.PAYLOAD_NONE, payload_path="")
        ckpt_io.write_state(directory, state)

    def restore(
        self,
        checkpoint_path: str | os.PathLike[str] | Checkpoint,
        checkpoint_node_ip: str | None = None,
        fallback_to_latest: bool = False,
    ) -> bool:
        if (
            isinstance(checkpoint_path, Checkpoint)
            and not storage_filesystem_of(checkpoint_path).is_local
        ):
            local = self._new_restore_dir()
            checkpoint_path.to_directory(local)
            checkpoint_path = local
        return super().restore(checkpoint_path, checkpoint_node_ip, fallback_to_latest)

    def restore_from_object(self, obj: bytes) -> None:
        # The function keeps using the restored files, so they must outlive this call.
        local = self._new_restore_dir()
        ckpt_io.unpack_dir(obj, local)
        self._restore_local(local)

    def _new_restore_dir(self) -> str:
        path = os.path.join(self._logdir, f".restored_{os.urandom(4).hex()}")
        self._restored_copies.append(path)
        return path

    # Narrower than Trainable's (dict | str): it only restores its own checkpoints, a
    # directory, or None for one saved before the function reported any.
    def load_checkpoint(self, checkpoint: str | None) -> None:  # type: ignore[override]
        self._end_function()
        self._finished = False
        self._session.loaded_checkpoint = None if checkpoint is None else Checkpoint(checkpoint)
        if checkpoint is not None:
            state = ckpt_io.read_state(checkpoint) or {}
            if "checkpoint_index" in state:
                self._checkpoint_index = max(self._checkpoint_index, state["checkpoint_index"] + 1)


def wrap_function(
    train_func: Callable[..., Any], name: str | None = None
) -> type[FunctionTrainable]:
    """Turn a training function ``train_func(config)`` into a Trainable class.

    Args:
        train_func: Function taking the config dict; reports with ``fasttune.report``
            and may return a final dict of metrics.
        name: Name of the trainable (defaults to the function's name).

    Example:
        >>> def train_fn(config):
        ...     return {"score": config["x"] ** 2}
        >>> TrainFn = wrap_function(train_fn)
        >>> TrainFn.__name__
        'train_fn'
    """
    if isinstance(train_func, type) and issubclass(train_func, Trainable):
        return train_func  # type: ignore[return-value]
    if not callable(train_func):
        raise TypeError(
            f"wrap_function(train_func=...) expects a callable taking a config dict, got "
            f"{type(train_func).__name__}: {train_func!r}"
        )
    trainable_name = name or getattr(train_func, "__name__", None) or type(train_func).__name__
    attributes = {
        "_name": trainable_name,
        "_train_func": staticmethod(train_func),
        "__module__": getattr(train_func, "__module__", __name__),
        "__doc__": getattr(train_func, "__doc__", None),
    }
    resources = getattr(train_func, "_resources", None)
    if resources is not None:
        from fasttune.trainable.util import resource_request_method

        attributes["default_resource_request"] = resource_request_method(resources)
    cls = type(trainable_name, (FunctionTrainable,), attributes)
    cls.__qualname__ = trainable_name
    return cls


def check_takes_config(train_func: Callable[..., Any], name: str) -> None:
    """Refuse, before any trial runs, a function that cannot be called with the config.

    Raises:
        TypeError: ``train_func`` takes no positional argument, or needs more than one.
    """
    import inspect

    try:
        signature = inspect.signature(train_func)
    except (TypeError, ValueError):  # a builtin or C callable: cannot tell, let it run
        return
    try:
        signature.bind({})
    except TypeError as e:
        raise TypeError(
            f"The training function {name!r} must take the trial's config as its one "
            f"argument, e.g. `def {name}(config):`, but its signature is "
            f"{name}{signature} ({e}). Pass other objects with "
            "tune.with_parameters(trainable, name=value)."
        ) from None
