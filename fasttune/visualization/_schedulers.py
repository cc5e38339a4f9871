"""What the scheduler did: where trials stopped (ASHA, HyperBand), PBT's exploits."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from typing import Any

from fasttune.results.experiment_view import ExperimentView
from fasttune.visualization._source import as_view, plotly_go

PBT_GLOBAL_FILE = "pbt_global.txt"  # written by PopulationBasedTraining (Ray's name)
_INDEX = re.compile(r"^(\d+)_")
HOVER_IDS = 20  # a stopping bar names at most this many of its trials


def plot_stopping_points(source: Any) -> Any:
    """How many trials ended at each iteration, by status; hovering a bar lists them.

    Under ASHA or HyperBand the bars stand at the rungs: how many trials each rung
    stopped, and how many ran to the end (each trial's last ``training_iteration``,
    from its result file). HyperBand's brackets are not told apart: which bracket a
    trial is in is kept only in the scheduler's pickle, which display reads never open.
    """
    view = as_view(source)
    groups: dict[tuple[int, str], list[str]] = defaultdict(list)
    for trial in view.trials:
        groups[(trial.iterations, trial.status)].append(trial.trial_id)
    go = plotly_go()
    figure = go.Figure()
    for status in sorted({s for _, s in groups}):
        steps = sorted(i for i, s in groups if s == status)
        ids = [groups[(i, status)] for i in steps]
        named = [
            ", ".join(t[:HOVER_IDS])
            + (f" and {len(t) - HOVER_IDS} more" if len(t) > HOVER_IDS else "")
            for t in ids
        ]
        figure.add_trace(
            go.Bar(
                x=steps,
                y=[len(t) for t in ids],
                name=status,
                customdata=named,
                hovertemplate="%{y} trials " + status + " at %{x}: %{customdata}<extra></extra>",
            )
        )
    figure.update_layout(
        barmode="stack",
        title="Where trials stopped",
        xaxis_title="last training_iteration",
        yaxis_title="trials",
    )
    return figure


def pbt_exploits(view: ExperimentView) -> list[dict[str, Any]]:
    """PBT's exploits from ``pbt_global.txt``: target, donor, iterations, new config.

    Trials are named by id where the log's tags (``"<index>_<params>"``) map to one.

    Raises:
        ValueError: The experiment has no PBT log.
    """
    path = view.fs.join(view.fs_path, PBT_GLOBAL_FILE)
    if not view.fs.exists(path):
        raise ValueError(
            f"{view.path!r} has no {PBT_GLOBAL_FILE}: it did not run PopulationBasedTraining "
            "(or no exploit happened yet)."
        )

    def trial_of(tag: str) -> str:
        match = _INDEX.match(str(tag))
        if match and int(match.group(1)) < len(view.trials):
            return view.trials[int(match.group(1))].trial_id
        return str(tag)

    events = []
    for line in view.fs.read_text(path).splitlines():
        if not line.strip():
            continue
        try:
            target, donor, target_step, donor_step, _, new_config = json.loads(line)
        except ValueError:
            continue  # a line cut short by a crash
        events.append(
            {
                "target": trial_of(target),
                "donor": trial_of(donor),
                "target_iteration": target_step,
                "donor_iteration": donor_step,
                "new_config": new_config,
            }
        )
    return events


def plot_pbt_exploits(source: Any) -> Any:
    """PBT's lineage: each exploit as an arrow from the donor (at its checkpoint's
    iteration) to the trial that took its weights (at the iteration it happened)."""
    view = as_view(source)
    events = pbt_exploits(view)
    go = plotly_go()
    figure = go.Figure()
    ids = [t.trial_id for t in view.trials]
    for trial in view.trials:
        figure.add_trace(
            go.Scatter(
                x=[0, trial.iterations],
                y=[trial.trial_id] * 2,
                mode="lines",
                line={"color": "#ccc"},
                showlegend=False,
                hoverinfo="skip",
            )
        )
    for event in events:
        figure.add_annotation(
            x=event["target_iteration"],
            y=event["target"],
            ax=event["donor_iteration"],
            ay=event["donor"],
            xref="x",
            yref="y",
            axref="x",
            ayref="y",
            showarrow=True,
            arrowhead=2,
            arrowcolor="#1f77b4",
        )
    figure.add_trace(
        go.Scatter(
            x=[e["target_iteration"] for e in events],
            y=[e["target"] for e in events],
            mode="markers",
            name="exploit",
            text=[f"from {e['donor']}: {e['new_config']}" for e in events],
        )
    )
    figure.update_layout(
        title=f"PBT exploits ({len(events)})",
        xaxis_title="training_iteration",
        yaxis={"title": "trial", "categoryorder": "array", "categoryarray": ids},
    )
    return figure
