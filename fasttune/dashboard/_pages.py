"""The HTML shells of the pages; ``static/dashboard.js`` fills them from the JSON API.

plotly.js (4.6 MB) is loaded by the script once the table is drawn, so the table
never waits for it.
"""

from __future__ import annotations

_STYLE = """
body{font-family:system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#1f3b57;color:#fff;padding:10px 18px}header a{color:#fff}
main{padding:12px 18px}table{border-collapse:collapse;background:#fff;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 7px;text-align:left;white-space:nowrap}
th{background:#eef2f6;cursor:pointer}tr.sel{background:#fff6d6}
.RUNNING{color:#0a7d32;font-weight:600}.ERROR{color:#b00020;font-weight:600}
.PENDING,.PAUSED{color:#8a6d00}.bar{margin:8px 0}.bar>*{margin-right:8px}
.charts{display:flex;flex-wrap:wrap;gap:12px}.chart{width:620px;height:420px;background:#fff}
pre{background:#fff;border:1px solid #ddd;padding:8px;max-height:360px;overflow:auto}
.muted{color:#777}
"""

_TITLES = {"experiments": "Experiments", "experiment": "Experiment", "trial": "Trial"}


def page(kind: str) -> str:
    """The HTML of page ``kind`` (experiments, experiment, trial)."""
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>fasttune · {_TITLES[kind]}</title>
<style>{_STYLE}</style><script src="/static/dashboard.js" defer></script></head>
<body data-page="{kind}"><header><a href="/">fasttune</a> · <span id="title">{_TITLES[kind]}</span>
<span id="live" class="muted"></span></header><main id="main">Loading…</main></body></html>
"""
