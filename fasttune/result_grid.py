"""``ResultGrid`` at Ray's import path, ``ray.tune.result_grid``."""

from fasttune.results.result_grid import ResultGrid

__all__ = ["ResultGrid"]
