"""Callbacks that report a framework's training to Tune (as ``ray.tune.integration``).

Each submodule wraps one library and imports it, so import the one you use
explicitly, as with Ray Tune::

    from fasttune.integration.xgboost import TuneReportCheckpointCallback
    from fasttune.integration.lightgbm import TuneReportCheckpointCallback
    from fasttune.integration.pytorch_lightning import TuneReportCheckpointCallback
    from fasttune.integration.keras import TuneReportCheckpointCallback  # Keras 3

A library that is not installed gives the ``pip install "fasttune[<extra>]"`` to run.
"""
