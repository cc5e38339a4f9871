"""What the framework callbacks share: their arguments, checked, and the metric mapping."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

MetricsArg = str | list[str] | dict[str, str] | None
PostprocessFn = Callable[[dict[str, Any]], dict[str, Any]]


def metrics_mapping(owner: str, metrics: Any) -> dict[str, str] | None:
    """``metrics`` as ``{name reported to Tune: name in the framework}``, or None for all.

    Args:
        owner: The callback's name, for the error message.
        metrics: ``None`` (report every metric), one name, a list of names (each
            reported under the same name) or a dict ``{tune_name: framework_name}``.

    Raises:
        TypeError: When ``metrics`` is none of these.
    """
    if metrics is None:
        return None
    if isinstance(metrics, str):
        return {metrics: metrics}
    if isinstance(metrics, Mapping):
        if all(isinstance(k, str) and isinstance(v, str) for k, v in metrics.items()):
            return dict(metrics)
    elif isinstance(metrics, (list, tuple)) and all(isinstance(m, str) for m in metrics):
        return {m: m for m in metrics}
    raise TypeError(
        f"{owner}(metrics={metrics!r}): metrics must be None (report every metric), a "
        "metric name, a list of names, or a dict {name_reported_to_tune: framework_name}."
    )


def check_callback_args(
    owner: str, filename: Any, frequency: Any, results_postprocessing_fn: Any
) -> None:
    """Refuse a bad ``filename``, ``frequency`` or ``results_postprocessing_fn`` at once."""
    if not isinstance(filename, str) or not filename or "/" in filename:
        raise ValueError(
            f"{owner}(filename={filename!r}): filename must be a non-empty file name "
            "(no '/'), e.g. 'model.ubj'."
        )
    if isinstance(frequency, bool) or not isinstance(frequency, int) or frequency < 0:
        raise ValueError(
            f"{owner}(frequency={frequency!r}): frequency must be an int >= 0 "
            "(checkpoint every that many iterations; 0: never during training)."
        )
    if results_postprocessing_fn is not None and not callable(results_postprocessing_fn):
        raise TypeError(
            f"{owner}(results_postprocessing_fn={results_postprocessing_fn!r}) must be a "
            "callable taking and returning the metrics dict, or None."
        )


def select_metrics(
    owner: str, library: str, available: dict[str, Any], mapping: dict[str, str] | None
) -> dict[str, Any]:
    """The metrics to report: all of ``available``, or those ``mapping`` names, renamed.

    Raises:
        ValueError: When ``mapping`` names a metric the framework did not report; the
            message lists the metrics it did report.
    """
    if mapping is None:
        return dict(available)
    out: dict[str, Any] = {}
    for tune_name, name in mapping.items():
        if name not in available:
            raise ValueError(
                f"{owner}(metrics=...): {name!r} is not a metric that {library} reported; "
                f"the available metrics are {sorted(available)}. Name one of these in "
                f"metrics (as a list entry or as the value of {{{tune_name!r}: ...}})."
            )
        out[tune_name] = available[name]
    return out


def postprocess(owner: str, fn: PostprocessFn | None, metrics: dict[str, Any]) -> dict[str, Any]:
    """``fn(metrics)`` when given, checked to be a dict."""
    if fn is None:
        return metrics
    out = fn(metrics)
    if not isinstance(out, dict):
        raise TypeError(
            f"{owner}(results_postprocessing_fn=...) returned {type(out).__name__}, not "
            "a dict of metrics; return the (modified) dict it is given."
        )
    return out
