"""Keras 3 callbacks reporting to Tune (``ray.tune.integration.keras``).

Works with Keras 3 on any backend (``KERAS_BACKEND``: ``torch``, ``jax``,
``tensorflow``). Each callback reports ``model.fit``'s logs (``loss``, ``val_loss``,
the compiled metrics...) on the Keras hooks it is given, less the ``on_``
(``"epoch_end"`` by default); the checkpointing one also saves the model with
``model.save`` into each Tune checkpoint, which ``keras.models.load_model`` reads back.

Example:
    >>> from fasttune.integration.keras import TuneReportCheckpointCallback
    >>> callback = TuneReportCheckpointCallback(
    ...     metrics={"loss": "val_loss"}, filename="model.keras", frequency=2
    ... )
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import tempfile
from collections import Counter
from typing import Any

from fasttune._support.imports import import_optional
from fasttune.checkpoint import Checkpoint
from fasttune.integration._metrics import MetricsArg, metrics_mapping, select_metrics
from fasttune.trainable.session import report


def _import_keras() -> Any:
    """Keras, or an error saying what to install or which backend to choose."""
    if importlib.util.find_spec("keras") is None:
        return import_optional("keras", extra="keras", feature="fasttune.integration.keras")
    try:
        return importlib.import_module("keras")
    except ImportError as e:  # Keras is there, its backend is not
        backend = os.environ.get("KERAS_BACKEND", "tensorflow")
        raise ImportError(
            f"fasttune.integration.keras: Keras is installed but cannot load its backend "
            f"{backend!r} ({e}). Install that backend, or choose an installed one by "
            "setting the environment variable KERAS_BACKEND (e.g. KERAS_BACKEND=torch) "
            "before keras is first imported."
        ) from e


keras = _import_keras()

__all__ = ["TuneReportCallback", "TuneReportCheckpointCallback"]

_Callback: Any = keras.callbacks.Callback

# The Keras hooks a callback may report on, as Ray names them (the method less ``on_``).
HOOKS = (
    "epoch_begin",
    "epoch_end",
    "train_batch_begin",
    "train_batch_end",
    "test_batch_begin",
    "test_batch_end",
    "predict_batch_begin",
    "predict_batch_end",
    "train_begin",
    "train_end",
    "test_begin",
    "test_end",
    "predict_begin",
    "predict_end",
)
_SAVE_SUFFIXES = (".keras", ".h5")


def check_hooks(owner: str, name: str, on: Any) -> tuple[str, ...]:
    """``on`` (one Keras hook name or a list of them) as a tuple, each checked."""
    hooks = [on] if isinstance(on, str) else on
    if not isinstance(hooks, (list, tuple)) or not hooks:
        raise TypeError(f"{owner}({name}={on!r}): {name} must be a hook name or a list of them.")
    for hook in hooks:
        if hook not in HOOKS:
            raise ValueError(
                f"{owner}({name}={on!r}): {hook!r} is not a Keras callback hook; use one "
                f"of {list(HOOKS)} (the hook's name less 'on_')."
            )
    return tuple(dict.fromkeys(hooks))


def check_filename(owner: str, filename: Any) -> str:
    """A file name Keras 3's ``model.save`` accepts (it needs ``.keras`` or ``.h5``)."""
    if (
        not isinstance(filename, str)
        or "/" in filename
        or not filename.endswith(_SAVE_SUFFIXES)
        or filename in _SAVE_SUFFIXES
    ):
        raise ValueError(
            f"{owner}(filename={filename!r}): filename must be a file name (no '/') ending "
            "in '.keras' (or '.h5'), as Keras 3's model.save requires, e.g. 'model.keras'."
        )
    return filename


def _plain(value: Any) -> Any:
    """A backend's one-element tensor (jax, torch, tf) as a Python number."""
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "size", getattr(value, "ndim", 1)) in (0, 1):
        try:
            return item()
        except Exception:
            return value
    return value


class KerasReporter(_Callback):
    """Report Keras logs on some hooks, and save the model on some hooks.

    The shared engine of this module's callbacks and of
    ``fasttune.air.integrations.keras.ReportCheckpointCallback``.

    Args:
        owner: The public class's name, for error messages.
        metrics: What to report (see :class:`TuneReportCheckpointCallback`).
        report_on: The hooks that report metrics.
        checkpoint_every: ``{hook: n}``: save a checkpoint every n-th call of the hook
            (a hook there also reports, with the checkpoint).
        filename: The model's file name inside each checkpoint.
    """

    def __init__(
        self,
        owner: str,
        metrics: MetricsArg,
        report_on: tuple[str, ...],
        checkpoint_every: dict[str, int],
        filename: str,
    ) -> None:
        super().__init__()
        self._owner = owner
        self._mapping = metrics_mapping(owner, metrics)
        self._report_on = frozenset(report_on)
        self._checkpoint_every = dict(checkpoint_every)
        self._filename = filename
        self._calls: Counter[str] = Counter()
        for hook in (*report_on, *checkpoint_every):  # Keras calls the instance's methods
            setattr(self, "on_" + hook, self._hook(hook))

    def _hook(self, when: str) -> Any:
        def handle(*args: Any, **kwargs: Any) -> None:
            logs = kwargs.get("logs", args[-1] if args else None)
            self._handle(when, logs if isinstance(logs, dict) else {})

        handle.__name__ = "on_" + when
        return handle

    def _handle(self, when: str, logs: dict[str, Any]) -> None:
        self._calls[when] += 1
        every = self._checkpoint_every.get(when)
        save = every is not None and every > 0 and self._calls[when] % every == 0
        if not save and when not in self._report_on:
            return
        available = {k: _plain(v) for k, v in logs.items()}
        metrics = select_metrics(self._owner, "Keras", available, self._mapping)
        if not save:
            report(metrics)
            return
        with tempfile.TemporaryDirectory(prefix="keras_ckpt_") as tmp:
            self.model.save(os.path.join(tmp, self._filename))
            report(metrics, checkpoint=Checkpoint.from_directory(tmp))


class TuneReportCheckpointCallback(KerasReporter):
    """Report Keras logs to Tune on a hook, saving the model every ``frequency`` calls.

    Args:
        metrics: What to report: ``None`` (every entry of Keras' logs), one name, a
            list of names, or ``{name_in_tune: name_in_keras}`` to rename.
        filename: The model's file name inside each checkpoint; Keras 3 saves only to
            ``.keras`` (or ``.h5``) files.
        frequency: Save a checkpoint every that many calls of each hook (1: every
            call), or a list with one frequency per entry of ``on``.
        on: The hook(s) to report on, Keras' hook names less the ``on_``
            (``"epoch_end"``, ``"train_batch_end"``, ``"test_end"``...).

    Raises:
        TypeError, ValueError: On a bad argument, naming it.

    Resume from a Tune checkpoint with ``keras.models.load_model``::

        checkpoint = fasttune.get_checkpoint()
        if checkpoint:
            with checkpoint.as_directory() as d:
                model = keras.models.load_model(os.path.join(d, "checkpoint.keras"))
    """

    def __init__(
        self,
        metrics: MetricsArg = None,
        filename: str = "checkpoint.keras",
        frequency: int | list[int] = 1,
        on: str | list[str] = "epoch_end",
    ) -> None:
        owner = type(self).__name__
        hooks = check_hooks(owner, "on", on)
        frequencies = frequency if isinstance(frequency, list) else [frequency] * len(hooks)
        if len(frequencies) != len(hooks):
            raise ValueError(
                f"{owner}(frequency={frequency!r}, on={on!r}): a list of frequencies needs "
                "one per hook in on (a list of the same length)."
            )
        for f in frequencies:
            if isinstance(f, bool) or not isinstance(f, int) or f < 1:
                raise ValueError(
                    f"{owner}(frequency={frequency!r}): each frequency must be an int >= 1 "
                    "(save a checkpoint every that many calls of the hook)."
                )
        super().__init__(
            owner,
            metrics,
            report_on=hooks,
            checkpoint_every=dict(zip(hooks, frequencies)),
            filename=check_filename(owner, filename),
        )


class TuneReportCallback(KerasReporter):
    """Report Keras logs to Tune on a hook, without checkpoints.

    Args:
        metrics: As for :class:`TuneReportCheckpointCallback`.
        on: As for :class:`TuneReportCheckpointCallback`.
    """

    def __init__(self, metrics: MetricsArg = None, on: str | list[str] = "epoch_end") -> None:
        owner = type(self).__name__
        hooks = check_hooks(owner, "on", on)
        super().__init__(owner, metrics, hooks, {}, filename="checkpoint.keras")
