"""HyperBandForBOHB decisions and its contract with the searcher.

Bracket numbers from Ray Tune's formulas (see test_hyperband.py), for max_t=9, eta=3:
    s_max_1 = round(log 9 / log 3) + 1 = 3
    s=2: n0 = ceil(3/3 * 9) = 9, r0 = int(9 / 9) = 1
    s=1: n0 = ceil(3/2 * 3) = ceil(4.5) = 5, r0 = int(9 / 3) = 3
    s=0: n0 = ceil(3/1 * 1) = 3, r0 = 9
HyperBandForBOHB opens the brackets of a band from the largest (s = 2) down.
"""

from __future__ import annotations

from fasttune.experiment.trial import TrialStatus
from fasttune.schedulers.hb_bohb import HyperBandForBOHB
from fasttune.search.search_generator import SearchGenerator
from fasttune.search.searcher import Searcher
from tests.schedulers._hb_harness import Driver
from tests.schedulers.test_hyperband import brackets

PAUSE, STOP, CONTINUE = "PAUSE", "STOP", "CONTINUE"


class PauseAwareSearcher(Searcher):
    """A searcher that keeps TuneBOHB's running/paused bookkeeping."""

    def __init__(self):
        super().__init__(metric="score", mode="max")
        self.events: list[tuple[str, str]] = []
        self.budgets: list[tuple[str, int]] = []

    def suggest(self, trial_id):
        return {}

    def on_trial_result(self, trial_id, result):
        budget = result["hyperband_info"].get("budget")
        if budget is not None:
            self.budgets.append((trial_id, budget))

    def on_pause(self, trial_id):
        self.events.append(("pause", trial_id))

    def on_unpause(self, trial_id):
        self.events.append(("unpause", trial_id))


def make_driver(searcher: Searcher | None = None, **kwargs) -> Driver:
    kwargs.setdefault("time_attr", "t")
    kwargs.setdefault("max_t", 9)
    kwargs.setdefault("reduction_factor", 3)
    driver = Driver(HyperBandForBOHB(metric="score", mode="max", **kwargs))
    if searcher is not None:
        driver.view.search_alg = SearchGenerator(searcher)  # as the controller's
    return driver


def feed(driver: Driver, trial, t: int, score: float) -> tuple[str, dict]:
    """Report like the controller: the searcher sees the result after the scheduler."""
    result = {"t": t, "score": score}
    decision = driver.scheduler.on_trial_result(driver.view, trial, result)
    search_alg = getattr(driver.view, "search_alg", None)
    if search_alg is not None and decision != STOP:
        search_alg.on_trial_result(trial.trial_id, result)
    if decision == PAUSE:
        trial.set_status(TrialStatus.PAUSED)
        trial.restore_path = f"{trial.trial_id}/checkpoint_{t}"
    elif decision == STOP:
        trial.set_status(TrialStatus.TERMINATED)
        driver.scheduler.on_trial_complete(driver.view, trial, result)
    driver.settle()
    return decision, result


def test_largest_bracket_opens_first():
    driver = make_driver()
    driver.add(9 + 5 + 3 + 1)
    assert brackets(driver.scheduler) == [
        [(9, 1, "PENDING: 9"), (5, 3, "PENDING: 5"), (3, 9, "PENDING: 3")],
        [(9, 1, "PENDING: 1")],
    ]


def test_results_carry_the_budget_they_reached():
    searcher = PauseAwareSearcher()
    driver = make_driver(searcher, max_t=81)
    # max_t=81: s_max_1 = 5; the first bracket is s=4: n0 = 81, r0 = int(81 / 81) = 1.
    (trial,) = driver.add(1)
    driver.start_next()
    decision, result = feed(driver, trial, 1, 0.5)
    assert decision == PAUSE  # the bracket is far from full
    assert result["hyperband_info"] == {"budget": 1}
    assert searcher.budgets == [("t0", 1)]
    assert searcher.events == [("pause", "t0")]


def test_results_below_the_milestone_get_an_empty_info():
    driver = make_driver()
    driver.add(10)  # fills bracket s=2 (9), the 10th opens s=1 (milestone 3)
    trial = driver.view.trials[9]
    decision, result = feed(driver, trial, 1, 0.5)
    assert decision == CONTINUE and result["hyperband_info"] == {}


def test_unfilled_bracket_is_halved_when_nothing_runs():
    searcher = PauseAwareSearcher()
    driver = make_driver(searcher)
    t0, t1, t2, t3 = driver.add(4)  # bracket s=2 takes 9: it never fills
    for _ in range(4):
        driver.start_next()
    for trial, score in ((t0, 4), (t1, 1), (t2, 3)):
        assert feed(driver, trial, 1, score)[0] == PAUSE
    assert driver.scheduler.choose_trial_to_run(driver.view) is None  # t3 still runs
    assert feed(driver, t3, 1, 2)[0] == PAUSE  # not full: pause, no halving yet
    # Nothing runs now: halve with the four it has. Keep ceil(9/3) = 3 (t0, t2, t3),
    # stop t1, and the next milestone is min(1 * 3, 9) = 3.
    assert driver.start_next() is t0
    assert driver.stopped_by_request == ["t1"]
    assert brackets(driver.scheduler)[0][0][:2] == (3, 3)
    assert searcher.events == [
        ("pause", "t0"), ("pause", "t1"), ("pause", "t2"), ("pause", "t3"),
        ("unpause", "t3"), ("unpause", "t2"), ("unpause", "t0"),  # worst kept first, as Ray
    ]  # fmt: skip
    assert driver.start_next() is t2
    assert driver.start_next() is t3


def test_full_bracket_halves_when_its_last_trial_arrives():
    searcher = PauseAwareSearcher()
    driver = make_driver(searcher)
    trials = driver.add(9)  # exactly fills bracket s=2
    for _ in trials:
        driver.start_next()
    for i, trial in enumerate(trials[:-1]):
        assert feed(driver, trial, 1, i)[0] == PAUSE
    # The 9th (score 100) completes the rung: keep the best ceil(9/3) = 3.
    assert feed(driver, trials[-1], 1, 100)[0] == CONTINUE
    kept = [t.trial_id for t in trials if t.status is not TrialStatus.TERMINATED]
    assert kept == ["t6", "t7", "t8"]
    assert ("unpause", "t6") in searcher.events and ("unpause", "t7") in searcher.events
    assert ("pause", "t8") not in searcher.events


def test_last_arrival_pauses_while_another_is_still_being_paused():
    driver = make_driver()
    trials = driver.add(9)
    for _ in trials:
        driver.start_next()
    for i, trial in enumerate(trials[:-1]):
        feed(driver, trial, 1, i)
    trials[0].set_status(TrialStatus.RUNNING)  # its pause is not done yet
    assert feed(driver, trials[-1], 1, 100)[0] == PAUSE  # as Ray: wait for it
    assert driver.scheduler.choose_trial_to_run(driver.view) is None  # t0 "runs"
    trials[0].set_status(TrialStatus.PAUSED)
    assert driver.start_next() is trials[6]  # nothing runs: the bracket halves


def test_final_stop_does_not_report_a_pause():
    searcher = PauseAwareSearcher()
    driver = make_driver(searcher, max_t=1)
    # max_t=1: s_max_1 = round(0) + 1 = 1; one bracket s=0 with n0 = 1, r0 = 1.
    (trial,) = driver.add(1)
    driver.start_next()
    assert feed(driver, trial, 1, 1)[0] == STOP
    assert searcher.events == [] and searcher.budgets == []  # STOP: searcher not told


def test_works_without_a_search_alg_on_the_view():
    driver = make_driver()
    t0, t1 = driver.add(2)
    driver.start_next()
    driver.start_next()
    assert feed(driver, t0, 1, 1)[0] == PAUSE
    assert feed(driver, t1, 1, 2)[0] == PAUSE
    assert driver.start_next() in (t0, t1)
