"""Pausing Python's cyclic garbage collector while bulk-building long-lived objects.

Rebuilding 100,000 trials (a restore, a result grid, a data frame) allocates millions
of containers that all stay alive. Each allocation counts towards the collector's
thresholds, and its full collections traverse everything built so far, for nothing:
half of a 100,000-trial restore was garbage collection (17.9 s, against 8.9-9.5 s
with the pause, on bench/bench_scale.py's experiment).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Run the block (or the decorated function) with the cyclic collector off.

    The collector is turned back on afterwards only if it was on before; reference
    counting still frees what the block drops, and a cycle it made is collected by a
    later full collection.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            # What the block built is still in the youngest generation: the next young
            # collections would each traverse all of it (0.5 s per collection at 100,000
            # trials). Freezing then unfreezing moves every tracked object to the oldest
            # generation without traversing any. Skipped when something else froze
            # objects (a fork server's workers): unfreezing would undo that.
            gc.freeze()
            gc.unfreeze()
        if was_enabled:
            gc.enable()
