"""``JupyterNotebookReporter``: the status as an HTML table, updated in place in a notebook."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

from fasttune.progress.reporter import TuneReporterBase, extends_init

logger = logging.getLogger(__name__)

DisplayFn = Callable[[str], None]


def in_notebook() -> bool:
    """True inside a Jupyter kernel (IPython is never imported to find out)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:
        return False
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


class _IPythonDisplay:
    """Shows HTML in the notebook; with ``overwrite``, updates one display in place."""

    def __init__(self, overwrite: bool):
        from IPython.display import HTML, display

        self._html = HTML
        self._display = display
        self._overwrite = overwrite
        self._handle: Any = None

    def __call__(self, html: str) -> None:
        if self._overwrite and self._handle is not None:
            self._handle.update(self._html(html))
        else:
            self._handle = self._display(self._html(html), display_id=True)


class JupyterNotebookReporter(TuneReporterBase):
    """Shows the experiment's status in a Jupyter notebook, as HTML.

    Args:
        overwrite: Replace the previous report instead of adding one below it.
        metric_columns, parameter_columns, total_samples, max_progress_rows,
        max_error_rows, max_column_length, max_report_frequency, infer_limit,
        print_intermediate_tables, metric, mode, sort_by_metric, clock: See
            :class:`TuneReporterBase`.
        display: Called with the HTML of each report; by default IPython's
            ``display`` (plain text is printed when IPython is not installed).

    Example:
        >>> from fasttune.experiment.trial import Trial
        >>> shown = []
        >>> JupyterNotebookReporter(display=shown.append).report([Trial("f")], True)
        >>> shown[0].startswith("== Status ==<br>")
        True
    """

    @extends_init(TuneReporterBase.__init__)
    def __init__(
        self,
        overwrite: bool = True,
        *args: Any,
        display: DisplayFn | None = None,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        self._overwrite = overwrite
        self._display = display

    def _displayer(self) -> DisplayFn | None:
        if self._display is None:
            try:
                self._display = _IPythonDisplay(self._overwrite)
            except ImportError:
                logger.warning(
                    "JupyterNotebookReporter needs IPython to show HTML; printing plain "
                    "text instead. Use CLIReporter outside notebooks."
                )
                self._display = _print_text
        return self._display

    def report(self, trials: list[Any], done: bool, *sys_info: str) -> None:
        """Display the status as HTML."""
        display = self._displayer()
        if display is _print_text:
            print(self._progress_str(trials, done, *sys_info), end="")
        else:
            display(self._progress_str(trials, done, *sys_info, fmt="html"))  # type: ignore[misc]


def _print_text(text: str) -> None:
    print(text)
