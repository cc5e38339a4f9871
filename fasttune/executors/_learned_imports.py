"""What a worker imported while it hosted a trial, for the fork server to import ahead.

A library's first use often imports more of it: torch imports ``torch._dynamo`` when
the first optimizer is built (1.4-4 s here, more than the rest of a short trial). With
``reuse_actors=False`` every new worker paid that again, although the fork server had
torch preloaded. A worker that retires now names what it imported, and the local
executor has the fork server import it too, so the workers forked after start with it.

What may be learned is narrow, as importing in the server changes what every later
worker starts with:

- only modules of installed distributions (a file under ``site-packages`` or
  ``dist-packages``): never the user's own project, whose module-level state (a random
  generator, a log file, a connection) each worker must make for itself, and never a
  module made at run time (torch.compile's kernels);
- only submodules of packages the worker was forked with; the executor keeps those of
  the packages the automatic preloading chose (``LocalExecutor.preload_modules(...,
  learn=True)``), which passed its checks (Linux, no GPU, not turned off);
- nothing the fork server's trial import in a throwaway child shows to start a thread
  or a process (``_forkserver``): later workers would be forked from a threaded server;
- nothing from a trial whose changes to ``os.environ`` that import does not make
  itself (torch sets ``TORCHINDUCTOR_CACHE_DIR``): the trial may have set a variable a
  module reads on import, which the server would not see.
"""

from __future__ import annotations

import os
import sys

_LEFT_OUT = frozenset({"ray"})
_INSTALLED = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")


def imported_since(count: int) -> tuple[str, ...]:
    """The submodules of packages loaded before the first ``count`` modules of
    ``sys.modules`` that were imported after them from installed distributions, in
    import order.

    ``sys.modules`` keeps insertion order; a module removed and imported again may be
    missed or named twice, which costs a worker nothing but a head start.
    """
    modules = sys.modules
    if len(modules) <= count:
        return ()
    new = list(modules.items())[count:]
    fresh = {name for name, _ in new}
    stdlib: frozenset[str] = getattr(sys, "stdlib_module_names", frozenset())
    return tuple(
        name
        for name, module in new
        if "." in name
        and (top := name.partition(".")[0]) in modules
        and top not in fresh
        and top not in stdlib
        and top not in _LEFT_OUT
        and _installed(module)
    )


def _installed(module: object) -> bool:
    """Whether ``module`` was loaded from a file of an installed distribution."""
    spec = getattr(module, "__spec__", None)
    origin = getattr(spec, "origin", None)
    return (
        bool(getattr(spec, "has_location", False))
        and isinstance(origin, str)
        and any(part in origin for part in _INSTALLED)
    )


def environ_changes(before: dict[str, str]) -> tuple[tuple[str, str | None], ...]:
    """The variables of ``os.environ`` that differ from ``before``: (name, new value),
    None for one removed."""
    now = os.environ
    changed: list[tuple[str, str | None]] = [
        (name, value) for name, value in now.items() if before.get(name) != value
    ]
    changed += [(name, None) for name in before if name not in now]
    return tuple(sorted(changed, key=lambda change: change[0]))
