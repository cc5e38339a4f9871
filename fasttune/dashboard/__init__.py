"""The web dashboard: ``fasttune dashboard PATH`` (``pip install "fasttune[dashboard]"``).

A Starlette app served by uvicorn. It reads the experiments' files only (through
:class:`~fasttune.results.experiment_view.ExperimentView`), never changes them, and
serves nothing outside PATH. plotly.js comes from the plotly Python package, so the
pages work offline. It binds 127.0.0.1; any other host needs a token, which every
request must carry (``?token=``, a cookie set from it, or ``Authorization: Bearer``).
"""

from fasttune.dashboard._app import create_app, serve

__all__ = ["create_app", "serve"]
