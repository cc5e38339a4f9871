"""Saving a figure: self-contained HTML, or an image drawn by kaleido in a Chromium."""

from __future__ import annotations

import os
from typing import Any

IMAGE_EXTENSIONS = (".png", ".svg", ".pdf", ".jpg", ".jpeg", ".webp")


def write_figure(
    figure: Any,
    path: str | os.PathLike[str],
    *,
    width: int | None = None,
    height: int | None = None,
) -> None:
    """Save ``figure`` to ``path``, the format chosen by its extension.

    ``.html`` embeds plotly.js (opens offline, needs nothing more). Images (``.png``,
    ``.svg``, ``.pdf``, ``.jpg``, ``.webp``) are drawn by kaleido (in
    ``fasttune[plot]``), which drives a Chrome or Chromium it finds on the machine (or
    the one ``BROWSER_PATH`` names).

    Args:
        figure: A ``plotly.graph_objects.Figure``.
        path: The file to write.
        width: An image's width in pixels (default 700; HTML fills the window).
        height: An image's height in pixels (default 500).

    Raises:
        ValueError: Another extension; a size that is not a positive whole number;
            kaleido missing; no Chrome/Chromium found (each says what to install).
    """
    path = os.fspath(path)
    for name, value in (("width", width), ("height", height)):
        if value is not None and (isinstance(value, bool) or not 0 < value <= 10_000):
            raise ValueError(f"{name} must be a number of pixels, 1 to 10000, got {value!r}.")
    extension = os.path.splitext(path)[1].lower()
    if extension in (".html", ".htm"):
        figure.write_html(path, include_plotlyjs=True, full_html=True)
        return
    if extension not in IMAGE_EXTENSIONS:
        raise ValueError(
            f"output {path!r}: the file name must end in .html or one of "
            f"{', '.join(IMAGE_EXTENSIONS)}."
        )
    try:
        import kaleido  # noqa: F401
    except ImportError:
        raise ValueError(
            f'output {path!r}: image export needs kaleido: pip install "fasttune[plot]" '
            "(and a Chrome or Chromium); or write .html, which opens offline."
        ) from None
    try:
        figure.write_image(path, width=width, height=height)
    except RuntimeError as e:
        if "chrome" not in str(e).lower():
            raise
        raise ValueError(
            f"output {path!r}: image export drives a Chrome or Chromium (through kaleido) "
            "and found none. Install one (Debian/Ubuntu: sudo apt-get install chromium; "
            "with network access: plotly_get_chrome) or set BROWSER_PATH to its "
            "executable; or write .html, which needs no browser."
        ) from None
