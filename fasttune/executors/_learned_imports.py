"""What a worker imported while it hosted a trial, for the fork server to import ahead.

A library's first use often imports more of it: torch imports ``torch._dynamo`` when
the first optimizer is built (1.4-4 s here, more than the rest of a short trial). With
``reuse_actors=False`` every new worker paid that again, although the fork server had
torch preloaded. A worker that retires now names the modules it imported under the
packages it was forked with, and the local executor asks the fork server to import
them too (when it preloads at all), so the workers forked after start with them.

Only submodules of packages the worker was forked with: those packages were imported
by the fork server already, as fasttune's own or after the checks that preloading
makes (Linux, no GPU, not turned off: ``executor_choice.trainable_imports``). A new
top-level package, the standard library and Ray are left to each worker.
"""

from __future__ import annotations

import sys

_LEFT_OUT = frozenset({"ray"})


def imported_since(count: int) -> tuple[str, ...]:
    """The submodules of packages loaded before the first ``count`` modules of
    ``sys.modules`` that were imported after them, in import order.

    ``sys.modules`` keeps insertion order; a module removed and imported again may be
    missed or named twice, which costs a worker nothing but a head start.
    """
    modules = sys.modules
    if len(modules) <= count:
        return ()
    new = list(modules)[count:]
    fresh = set(new)
    stdlib: frozenset[str] = getattr(sys, "stdlib_module_names", frozenset())
    return tuple(
        name
        for name in new
        if "." in name
        and (top := name.partition(".")[0]) in modules
        and top not in fresh
        and top not in stdlib
        and top not in _LEFT_OUT
    )
