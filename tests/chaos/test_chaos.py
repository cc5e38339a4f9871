"""The chaos suite in CI: a few kills of the driver (and, every other round, of one of
its workers or its fork server first), every invariant checked.

The longer campaign (>= 100 kills) is run by hand: ``python -m tests.chaos.campaign``.
Seeded random search, ASHA and PBT run here (ASHA one trial at a time, so that its
decisions depend on the results only and must equal the uninterrupted run's); Optuna's
TPE (``--kind optuna``) takes longer and is left to the hand-run campaign.

PBT (docs/RELIABILITY.md, "Measured"): its decisions are not journaled, so a restore
replays the results to it, and an exploit decided but not carried out at a kill is
decided again, maybe otherwise: its trials must end whole (every iteration once, at the
last), but not necessarily with the uninterrupted run's configs and scores.
"""

from __future__ import annotations

import pytest

from tests.chaos.campaign import reference, run_campaign


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("kind", ["random", "asha", "pbt"])
def test_killed_drivers_end_as_the_uninterrupted_run(kind, tmp_path):
    expected = reference(kind, str(tmp_path / "reference"))
    assert expected.problems == []
    outcome = run_campaign(
        kind, kills=4, seed=3, workdir=str(tmp_path / "killed"), child_kills=True
    )
    assert outcome.problems == []
    assert outcome.finals == expected.finals  # ASHA stopped the same trials at the same rung
    if kind != "pbt":
        assert outcome.scores == expected.scores
