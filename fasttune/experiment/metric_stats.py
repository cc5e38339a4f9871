"""Per-metric running statistics of a trial's results (``Trial.metric_analysis``).

An entry is ``[max, min, sum, count, last values]`` (at most :data:`STATS_WINDOW`
last values) per flattened numeric key. :class:`~fasttune.experiment.trial.Trial`
updates its entries one result at a time; a worker that sends only the last result
of a batch (the others are in the trial's files already) sends the entries of the
others, made by :func:`stats_of`, which the trial merges with :func:`merge_stats`.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fasttune import result as R

STATS_WINDOW = 10  # results behind "last-10-avg"

NOT_NUMBERS = frozenset((bool, str, type(None), list, tuple, dict))

# Bookkeeping keys that get no statistics (they are never metrics to rank by).
NO_STATS = frozenset(
    (
        R.TIMESTAMP, R.PID, R.TIME_THIS_ITER_S, R.TIME_SINCE_RESTORE, R.WARMUP_TIME,
        R.ITERATIONS_SINCE_RESTORE, R.TIMESTEPS_SINCE_RESTORE, R.DONE,
    )
)  # fmt: skip

_PLAIN = frozenset((int, float))


def stat_value(value: Any) -> int | float | None:
    """``value`` as statistics count it: ints and floats as they are, other real
    numbers (numpy, Decimal) as float, anything else (bools included) None."""
    cls = type(value)
    if cls is float or cls is int:
        return value
    if cls in NOT_NUMBERS or not isinstance(value, numbers.Real):
        return None
    return float(value)


def stats_of(flats: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """The statistics entries of consecutive flattened results, as a trial that
    recorded them one by one from nothing would hold them.

    Results of one shape (the usual case) are taken column by column, in C.
    """
    out: dict[str, list[Any]] = {}
    if not flats:
        return out
    keys = tuple(flats[0])
    columns: Iterable[tuple[str, Sequence[Any]]]
    if all(tuple(flat) == keys for flat in flats):
        # Transposed in C: one tuple of values per key.
        columns = (
            column
            for column in zip(keys, zip(*(flat.values() for flat in flats)))
            if column[0] not in NO_STATS
        )
    else:
        seen = dict.fromkeys(key for flat in flats for key in flat)
        columns = (
            (key, [flat[key] for flat in flats if key in flat])
            for key in seen
            if key not in NO_STATS
        )
    for key, column in columns:
        types = set(map(type, column))
        if not types <= _PLAIN:
            if types <= NOT_NUMBERS:  # text, flags, None: no statistics
                continue
            column = [v for v in map(stat_value, column) if v is not None]
            if not column:
                continue
        window = list(column[-STATS_WINDOW:])
        out[key] = [max(column), min(column), sum(column), len(column), window]
    return out


def merge_stats(stats: dict[str, Any], later: Mapping[str, list[Any]]) -> None:
    """Add the entries ``later`` (of results that came after) to ``stats``, in place.

    ``stats`` may hold final figures (tuples, of a finished trial); they are reopened.
    """
    for key, (high, low, total, count, window) in later.items():
        entry = stats.get(key)
        if type(entry) is tuple:
            entry = stats[key] = reopened_stats(entry)
        if entry is None:
            stats[key] = [high, low, total, count, list(window)]
            continue
        if high > entry[0]:
            entry[0] = high
        if low < entry[1]:
            entry[1] = low
        entry[2] += total
        entry[3] += count
        merged = entry[4] + list(window)
        entry[4] = merged[-STATS_WINDOW:]


def final_stats(entry: list[Any]) -> tuple[Any, ...]:
    """A running statistics entry as its final figures (then the sum and the count)."""
    high, low, total, count, window = entry
    last5 = window[-5:]
    return (
        high,
        low,
        total / count,
        window[-1],
        sum(last5) / len(last5),
        sum(window) / len(window),
        total,
        count,
    )


def reopened_stats(final: tuple[Any, ...]) -> list[Any]:
    """Running statistics again from final figures; the averages of the last 5 and 10
    restart from the last value."""
    high, low, _avg, last, _last5, _last10, total, count = final
    return [high, low, total, count, [last]]
