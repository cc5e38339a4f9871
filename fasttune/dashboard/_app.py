"""The Starlette app: HTML pages, JSON endpoints, and plotly.js from the plotly package."""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from fasttune._support.imports import import_optional
from fasttune.dashboard import _data as data
from fasttune.dashboard._pages import page
from fasttune.dashboard._security import OutsideRootError, TokenMiddleware, resolve_token
from fasttune.results.experiment_view import NotAnExperimentError
from fasttune.results.rows import UsageError
from fasttune.storage.filesystem import get_fs_and_path, is_url

STATIC = os.path.join(os.path.dirname(__file__), "static")
MAX_PAGE = 500


def _int(request: Any, name: str, default: int, low: int, high: int) -> int:
    text = request.query_params.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise UsageError(f"{name} must be a whole number, got {text!r}.") from None
    if not low <= value <= high:
        raise UsageError(f"{name} must be between {low} and {high}, got {value}.")
    return value


def create_app(root: str, token: str | None = None) -> Any:
    """The dashboard app serving the experiments under ``root`` (read-only).

    Args:
        root: A folder of experiments (or one experiment folder): a local path or a
            storage URL (``s3://bucket/prefix``, ``memory://...``; needs fsspec).
        token: If given, every request must carry it (401 otherwise).

    Raises:
        NotAnExperimentError: ``root`` is not a folder.
        MissingDependencyError: starlette is not installed (names the extra).
    """
    import_optional("starlette", extra="dashboard", feature="fasttune dashboard")
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
    from starlette.routing import Route

    root = os.path.expanduser(os.fspath(root))
    fs, fs_root = get_fs_and_path(root)
    if not fs.isdir(fs_root):
        raise NotAnExperimentError(
            f"{root!r} does not exist or is not a folder: pass the folder holding your "
            "experiments (a storage_path, local or a URL such as s3://bucket/prefix) or "
            "one experiment folder."
        )
    experiments = data.Experiments(root)
    threading.Thread(target=experiments.warm, name="fasttune-dashboard-warm", daemon=True).start()

    def answer(fn: Any) -> Any:
        async def endpoint(request: Any) -> Response:
            try:
                result = await run_in_threadpool(fn, request)
            except (OutsideRootError, LookupError, NotAnExperimentError) as e:
                message = e.args[0] if e.args else str(e)
                return JSONResponse({"error": str(message)}, status_code=404)
            except (UsageError, ValueError) as e:
                return JSONResponse({"error": str(e)}, status_code=400)
            if isinstance(result, Response):
                return result
            return Response(json.dumps(result, allow_nan=False), media_type="application/json")

        return endpoint

    def exp_of(request: Any) -> tuple[str, Any]:
        exp = request.query_params.get("exp")
        if not exp:
            raise UsageError("exp: pass the experiment id, e.g. ?exp=my_experiment.")
        return exp, experiments.view(exp)

    def api_experiments(request: Any) -> Any:
        out = []
        for exp in experiments.ids():
            try:
                out.append(data.experiment_summary(exp, experiments.view(exp)))
            except (NotAnExperimentError, LookupError):
                continue
        return {"root": experiments.root, "experiments": out}

    def api_experiment(request: Any) -> Any:
        exp, view = exp_of(request)
        return data.clean(data.experiment_detail(exp, view))

    def api_trials(request: Any) -> Any:
        _, view = exp_of(request)
        q = request.query_params
        return data.trials_page(
            view,
            offset=_int(request, "offset", 0, 0, 10**9),
            limit=_int(request, "limit", 50, 1, MAX_PAGE),
            sort=q.get("sort") or None,
            desc=q.get("desc") in ("1", "true"),
            query=q.get("q", ""),
            status=q.get("status", ""),
            metric=q.get("metric") or None,
        )

    def api_curves(request: Any) -> Any:
        _, view = exp_of(request)
        q = request.query_params
        ids = [i for i in q.get("ids", "").split(",") if i][:50]
        metric = q.get("metric") or view.metric
        if not metric:
            raise UsageError("metric: pass ?metric=... (the experiment names none).")
        return data.curves(view, ids, metric, q.get("x") or "training_iteration")

    def api_figure(request: Any) -> Any:
        from fasttune import visualization as vis

        _, view = exp_of(request)
        q = request.query_params
        makers: dict[str, Any] = {
            "parallel": vis.plot_parallel_coordinate,
            "importance": vis.plot_param_importances,
            "history": vis.plot_optimization_history,
            "scatter": vis.plot_slice,
        }
        scheduler = {"stops": vis.plot_stopping_points, "pbt": vis.plot_pbt_exploits}
        kind = q.get("kind", "")
        if kind in scheduler:
            figure = scheduler[kind](view)
        elif kind in makers:
            figure = makers[kind](view, metric=q.get("metric") or None)
        else:
            kinds = sorted([*makers, *scheduler])
            raise UsageError(f"kind must be one of {kinds}, got {kind!r}.")
        return Response(figure.to_json(), media_type="application/json")

    def api_compare(request: Any) -> Any:
        from fasttune import visualization as vis

        ids = [e for e in request.query_params.get("exps", "").split(",") if e][:10]
        views = [experiments.view(exp) for exp in ids]
        metric = request.query_params.get("metric") or None
        figure = vis.plot_experiments_comparison(views, metric=metric)
        return Response(figure.to_json(), media_type="application/json")

    def api_trial(request: Any) -> Any:
        _, view = exp_of(request)
        return data.trial_detail(view, request.query_params.get("id", ""))

    def html(kind: str) -> Any:
        async def endpoint(request: Any) -> Response:
            return HTMLResponse(page(kind))

        return endpoint

    async def plotly_js(request: Any) -> Response:
        plotly = import_optional("plotly", extra="dashboard", feature="the dashboard's charts")
        path = os.path.join(os.path.dirname(str(plotly.__file__)), "package_data", "plotly.min.js")
        cache = {"Cache-Control": "public, max-age=86400"}  # fixed for an installed plotly
        return FileResponse(path, media_type="text/javascript", headers=cache)

    async def app_js(request: Any) -> Response:
        return FileResponse(os.path.join(STATIC, "dashboard.js"), media_type="text/javascript")

    routes = [
        Route("/", html("experiments")),
        Route("/experiment", html("experiment")),
        Route("/trial", html("trial")),
        Route("/api/experiments", answer(api_experiments)),
        Route("/api/experiment", answer(api_experiment)),
        Route("/api/trials", answer(api_trials)),
        Route("/api/curves", answer(api_curves)),
        Route("/api/figure", answer(api_figure)),
        Route("/api/trial", answer(api_trial)),
        Route("/api/compare", answer(api_compare)),
        Route("/static/plotly.min.js", plotly_js),
        Route("/static/dashboard.js", app_js),
    ]
    app = Starlette(routes=routes)
    return TokenMiddleware(app, token) if token else app


def serve(
    root: str, *, host: str = "127.0.0.1", port: int = 8265, token: str | None = None
) -> None:
    """Serve the dashboard until Ctrl-C (prints the URL, with the token if one is needed).

    Raises:
        ValueError: ``port`` is out of range or ``token`` is too short.
    """
    if not 0 < port < 65536:
        raise ValueError(f"--port must be between 1 and 65535, got {port}.")
    token = resolve_token(host, token)
    app = create_app(root, token)
    uvicorn = import_optional("uvicorn", extra="dashboard", feature="fasttune dashboard")
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
    shown_root = root if is_url(root) else os.path.abspath(os.path.expanduser(root))
    print(f"fasttune dashboard of {shown_root} at {url}", flush=True)
    if token:
        print("Every request needs this token (it is set as a cookie from the URL).", flush=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")
