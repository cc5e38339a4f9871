"""Experiment trackers (``ray.air.integrations``): import the one you use explicitly.

Example::

    from fasttune.air.integrations.mlflow import MLflowLoggerCallback, setup_mlflow
    from fasttune.air.integrations.wandb import WandbLoggerCallback, setup_wandb
    from fasttune.air.integrations.comet import CometLoggerCallback
    from fasttune.air.integrations.keras import ReportCheckpointCallback
"""
