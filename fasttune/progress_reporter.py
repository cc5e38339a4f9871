"""Progress reporters at Ray's import path (``ray.tune.progress_reporter``)."""

from fasttune.progress import CLIReporter, JupyterNotebookReporter, ProgressReporter

__all__ = ["CLIReporter", "JupyterNotebookReporter", "ProgressReporter"]
