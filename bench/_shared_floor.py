"""The shared floor (``../shared/bench/floor.py``, or ``$FASTTUNE_SHARED_BENCH/floor.py``)
loaded as a module, for the bench's variants of it."""

import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED_BENCH = os.environ.get(
    "FASTTUNE_SHARED_BENCH", os.path.join(os.path.dirname(os.path.dirname(HERE)), "shared", "bench")
)


def load_floor():
    """The floor module: its ``worker``, ``write_results`` and ``main``."""
    spec = importlib.util.spec_from_file_location("floor", os.path.join(SHARED_BENCH, "floor.py"))
    floor = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(floor)
    return floor
