"""Helpers that several layers share, below all of them (see docs/ARCHITECTURE.md).

Nothing here imports from another fasttune layer except ``fasttune.utils``,
``fasttune.result`` and ``fasttune.error``: result flattening and JSON line encoding
(the loggers, the trial, the experiment state), number checks, optional imports with
their install hint, metric/mode checks, no-op hook marks, machine resource detection, host and
process facts, and whether this platform can run local workers.
"""
