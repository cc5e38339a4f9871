"""``TuneContext`` and ``get_context`` (as ``ray.tune.context``)."""

from fasttune.trainable.context import TuneContext, get_context

__all__ = ["TuneContext", "get_context"]
