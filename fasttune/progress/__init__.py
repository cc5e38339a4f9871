"""Progress reporting on the console or in a notebook, as Ray Tune's reporters.

:class:`CLIReporter` prints the status table (redrawn in place on a terminal);
:class:`JupyterNotebookReporter` shows it as HTML in a notebook. The run drives
the reporter through the callback :func:`create_progress_callback` returns.
"""

from fasttune.progress.callback import (
    ProgressCallback,
    create_progress_callback,
    detect_reporter,
)
from fasttune.progress.cli import CLIReporter
from fasttune.progress.jupyter import JupyterNotebookReporter
from fasttune.progress.reporter import ProgressReporter, TuneReporterBase

__all__ = [
    "CLIReporter",
    "JupyterNotebookReporter",
    "ProgressCallback",
    "ProgressReporter",
    "TuneReporterBase",
    "create_progress_callback",
    "detect_reporter",
]
