"""Tests for the progress reporters and the callback that drives them."""

from __future__ import annotations

import io
import re
import sys
import types
from collections.abc import Callable
from typing import Any

import pytest

from fasttune.callback import CallbackList
from fasttune.experiment.trial import Trial
from fasttune.progress import (
    CLIReporter,
    JupyterNotebookReporter,
    ProgressCallback,
    ProgressReporter,
    create_progress_callback,
    detect_reporter,
)

ANSI = re.compile(r"\x1b\[")


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


MakeTrial = Callable[..., Trial]


@pytest.fixture(autouse=True)
def _terminal_type(monkeypatch) -> None:
    """A terminal that moves its cursor, whatever TERM the test run has (CI: dumb)."""
    monkeypatch.setenv("TERM", "xterm-256color")


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make_trial(tmp_path) -> MakeTrial:
    """A trial with a status, optional last result and optional error file."""

    def make(
        index: int,
        status: str = "RUNNING",
        result: dict[str, Any] | None = None,
        lr: float | None = None,
        error: bool = False,
    ) -> Trial:
        lr = 0.01 * (index + 1) if lr is None else lr
        trial = Trial(
            "train",
            trial_id=f"abcde_{index:05d}",
            config={"lr": lr, "model": {"width": 8 * (index + 1)}},
            evaluated_params={"lr": lr, "model/width": 8 * (index + 1)},
            experiment_path=str(tmp_path),
        )
        trial.init_local_path()
        trial.set_status(Trial.RUNNING)
        if result is not None:
            trial.update_last_result(result)
        if error:
            trial.error_file = f"{trial.local_path}/error.txt"
            trial.num_failures = 2
        trial.set_status(status)  # type: ignore[arg-type]
        if trial.is_finished():
            trial.compact()  # as a run leaves a finished trial
        return trial

    return make


def _result(i: int, **extra: Any) -> dict[str, Any]:
    return {"training_iteration": i, "time_total_s": 1.5 * i, "loss": 1.0 / i, **extra}


def _report(reporter: CLIReporter, trials: list[Trial], done: bool = False, *info: str) -> str:
    out = io.StringIO()
    reporter._out = out
    reporter.report(trials, done, *info)
    return out.getvalue()


# ---------------------------------------------------------------------- the status text
def test_header_counts_time_and_sys_info(make_trial: MakeTrial, clock: Clock) -> None:
    trials = [make_trial(0), make_trial(1)] + [
        make_trial(i, "TERMINATED", _result(3)) for i in (2, 3, 4)
    ]
    reporter = CLIReporter(clock=clock)
    reporter.setup(start_time=clock.now, total_samples=10)
    clock.advance(65)
    text = _report(reporter, trials, False, "Logical resource usage: 2.0/8 CPUs")
    lines = text.splitlines()
    assert lines[0] == "== Status =="
    assert re.fullmatch(
        r"Current time: \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(running for 00:01:05.00\)", lines[1]
    )
    assert lines[2] == "Logical resource usage: 2.0/8 CPUs"
    assert "Number of trials: 5/10 (2 RUNNING, 3 TERMINATED)" in lines
    assert not ANSI.search(text)


def test_rows_have_params_and_default_metric_columns(make_trial: MakeTrial) -> None:
    trials = [
        make_trial(0, "RUNNING", _result(2, mean_accuracy=0.75)),
        make_trial(1, "PENDING"),
    ]
    text = _report(CLIReporter(), trials)
    header = next(line for line in text.splitlines() if line.startswith("| Trial name"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    assert cols == [
        "Trial name",
        "status",
        "lr",
        "model/width",
        "acc",
        "iter",
        "total time (s)",
        "loss",
    ]
    row = next(line for line in text.splitlines() if "train_abcde_00000" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells == ["train_abcde_00000", "RUNNING", "0.01", "8", "0.75", "2", "3", "0.5"]
    pending = next(line for line in text.splitlines() if "train_abcde_00001" in line)
    assert [c.strip() for c in pending.strip("|").split("|")][-4:] == ["", "", "", ""]


def test_inferred_metrics_are_limited(make_trial: MakeTrial) -> None:
    result = _result(1, a=1, b=2.0, c=3, d=4, name="text", flag=True)
    text = _report(CLIReporter(infer_limit=2), [make_trial(0, result=result)])
    header = next(line for line in text.splitlines() if line.startswith("| Trial name"))
    cols = [c.strip() for c in header.strip("|").split("|")]
    assert cols[-3:] == ["total time (s)", "loss", "a"]
    assert not {"b", "c", "d", "name", "flag"} & set(cols)


def test_metric_is_a_column_even_past_the_infer_limit(make_trial: MakeTrial) -> None:
    result = _result(1, a=1, score=0.3)
    text = _report(
        CLIReporter(infer_limit=1, metric="score", mode="max"), [make_trial(0, result=result)]
    )
    header = next(line for line in text.splitlines() if line.startswith("| Trial name"))
    assert "| score |" in header


def test_truncation_keeps_running_and_errored_trials(make_trial: MakeTrial) -> None:
    trials = [make_trial(i, "TERMINATED", _result(5)) for i in range(20)]
    trials += [
        make_trial(20, "RUNNING", _result(1)),
        make_trial(21, "ERROR", _result(1), error=True),
    ]
    text = _report(CLIReporter(max_progress_rows=4), trials)
    rows = [line for line in text.splitlines() if line.startswith("| train_")]
    names = [line.split("|")[1].strip() for line in rows]
    # progress table: running first, then terminated, then errored (as Ray orders them)
    progress = names[:4]
    assert progress[0] == "train_abcde_00020" and progress[-1] == "train_abcde_00021"
    assert sum(n.startswith("train_abcde_0001") or n < "train_abcde_00020" for n in progress) == 2
    assert "... 18 more trials not shown (18 TERMINATED)" in text

    final = _report(CLIReporter(max_progress_rows=4), trials, True)
    assert "more trials not shown" not in final
    assert all(f"train_abcde_{i:05d}" in final for i in range(22))


def test_few_rows_go_to_running_and_errored_first(make_trial: MakeTrial) -> None:
    trials = [make_trial(0, "TERMINATED", _result(1)), make_trial(1, "PENDING")]
    trials += [make_trial(2, "ERROR", _result(1), error=True), make_trial(3, "PAUSED")]
    trials.append(make_trial(4, "RUNNING", _result(1)))
    text = _report(CLIReporter(max_progress_rows=2), trials).split("Number of errored")[0]
    names = re.findall(r"\| train_abcde_(\d+)", text)
    assert names == ["00004", "00002"]
    assert "... 3 more trials not shown (1 PAUSED, 1 PENDING, 1 TERMINATED)" in text


def test_best_trial_line(make_trial: MakeTrial) -> None:
    trials = [make_trial(i, "TERMINATED", _result(i + 1)) for i in range(3)]
    best_min = _report(CLIReporter(metric="loss", mode="min"), trials)
    assert (
        "Current best trial: abcde_00002 with loss=0.3333333333333333 and parameters=" in best_min
    )
    assert "'lr': 0.03" in best_min
    best_max = _report(CLIReporter(metric="loss", mode="max"), trials)
    assert "Current best trial: abcde_00000 with loss=1.0" in best_max
    assert "Current best trial" not in _report(CLIReporter(), trials)


class CountingTrial(Trial):
    """A trial that counts the reads of its last result."""

    reads: dict[str, int] = {}

    @property
    def last_result(self) -> dict[str, Any]:
        CountingTrial.reads[self.trial_id] = CountingTrial.reads.get(self.trial_id, 0) + 1
        return Trial.last_result.fget(self)  # type: ignore[attr-defined]

    @last_result.setter
    def last_result(self, result: dict[str, Any]) -> None:
        Trial.last_result.fset(self, result)  # type: ignore[attr-defined]


def test_each_report_reads_a_finished_trial_once_and_finds_the_same_best(tmp_path) -> None:
    def trial(i: int, loss: float, status: str) -> CountingTrial:
        t = CountingTrial("train", trial_id=f"t{i}", config={"i": i}, evaluated_params={"i": i})
        t.set_status(Trial.RUNNING)
        t.update_last_result({"training_iteration": 1, "loss": loss, "acc": -loss})
        t.set_status(status)  # type: ignore[arg-type]
        if t.is_finished():
            t.compact()
        return t

    losses = [5.0, 3.0, 3.0, 4.0, 6.0]
    trials = [trial(i, loss, "TERMINATED") for i, loss in enumerate(losses)]
    trials += [trial(5, 2.5, "RUNNING"), trial(6, 1.0, "TERMINATED")]  # after a running one
    reporter = CLIReporter(metric="loss", mode="min")
    CountingTrial.reads.clear()
    for _ in range(3):
        text = _report(reporter, trials)
        assert "Current best trial: t6 with loss=1.0" in text
        assert "acc" in text  # inferred from the results
    # Once when it settles, then once per report for its row of the table.
    assert [CountingTrial.reads[f"t{i}"] for i in range(5)] == [4, 4, 4, 4, 4]
    # Not settled (after a running trial): its columns, its score and its row (and the
    # best trial's line).
    assert CountingTrial.reads["t5"] == 9 and CountingTrial.reads["t6"] == 12
    # The leading finished trials change: the best is found again among them all.
    trials[6].set_status(Trial.RUNNING)
    trials[6].update_last_result({"training_iteration": 2, "loss": 9.0})
    trials[5].update_last_result({"training_iteration": 2, "loss": 8.0})
    trials[5].set_status(Trial.TERMINATED)
    assert "Current best trial: t1 with loss=3.0" in _report(reporter, trials)  # ties: first
    trials[1].set_status(Trial.RUNNING)
    trials[1].update_last_result({"training_iteration": 2, "loss": 0.5})
    assert "Current best trial: t1 with loss=0.5" in _report(reporter, trials)
    trials[1].update_last_result({"training_iteration": 3, "loss": 7.0})
    assert "Current best trial: t2 with loss=3.0" in _report(reporter, trials)


def test_error_table(make_trial: MakeTrial) -> None:
    trials = [make_trial(i, "ERROR", _result(1), error=True) for i in range(3)]
    trials.append(make_trial(3, "TERMINATED", _result(1)))
    text = _report(CLIReporter(max_error_rows=2), trials)
    assert "Number of errored trials: 3" in text
    assert re.search(r"\| Trial name\s+\| # failures \| error file", text)
    assert re.search(r"\| train_abcde_00000 \|\s+2 \| .*abcde_00000.*/error.txt", text)
    assert "... 1 more errored trials not shown" in text
    assert "train_abcde_00002 |          2" not in text.split("Number of errored trials")[1]
    assert "Number of errored trials" not in _report(CLIReporter(), trials[3:])


def test_sort_by_metric_orders_terminated_best_first(make_trial: MakeTrial) -> None:
    losses = [0.5, 0.1, 0.9]
    trials = [
        make_trial(i, "TERMINATED", {"training_iteration": 1, "loss": v})
        for i, v in enumerate(losses)
    ]
    text = _report(CLIReporter(metric="loss", mode="min", sort_by_metric=True), trials)
    order = [m.group(1) for m in re.finditer(r"\| train_abcde_(\d+)", text)]
    assert order == ["00001", "00000", "00002"]


def test_long_columns_are_abbreviated(make_trial: MakeTrial) -> None:
    trial = make_trial(0, result=_result(1))
    trial.evaluated_params = {"optimizer/learning_rate_schedule": "cosine_with_restarts_and_warmup"}
    trial.config = {"optimizer": {"learning_rate_schedule": "cosine_with_restarts_and_warmup"}}
    text = _report(CLIReporter(max_column_length=12), [trial])
    assert "..._schedule" in text and "...nd_warmup" in text
    assert "learning_rate_schedule" not in text


def test_intermediate_tables_can_be_turned_off(make_trial: MakeTrial) -> None:
    trials = [make_trial(0, result=_result(1))]
    reporter = CLIReporter(print_intermediate_tables=False)
    assert "| Trial name" not in _report(reporter, trials)
    assert "Number of trials: 1 (1 RUNNING)" in _report(reporter, trials)
    assert "| Trial name" in _report(reporter, trials, True)


def test_custom_columns(make_trial: MakeTrial) -> None:
    trials = [make_trial(0, result=_result(1, score=0.5))]
    reporter = CLIReporter(metric_columns={"score": "S"}, parameter_columns=["lr"])
    reporter.add_metric_column("loss", "L")
    reporter.add_parameter_column("model/width")
    header = next(
        line for line in _report(reporter, trials).splitlines() if line.startswith("| Trial")
    )
    assert [c.strip() for c in header.strip("|").split("|")] == [
        "Trial name",
        "status",
        "lr",
        "model/width",
        "S",
        "L",
    ]
    with pytest.raises(ValueError, match="already exists"):
        reporter.add_metric_column("score")
    with pytest.raises(ValueError, match="cannot differ"):
        CLIReporter(metric_columns=["loss"]).add_metric_column("acc", "A")
    with pytest.raises(ValueError, match="already exists"):
        reporter.add_parameter_column("lr")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"mode": "avg"}, "mode='avg'"), ({"max_progress_rows": 0}, "max_progress_rows=0"),
     ({"max_report_frequency": -1}, "max_report_frequency=-1")],
)  # fmt: skip
def test_bad_arguments_are_rejected(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=re.escape(match)):
        CLIReporter(**kwargs)


def test_metric_conflict_with_run_is_an_error() -> None:
    reporter = CLIReporter(metric="loss", mode="min")
    reporter.set_search_properties("loss", "min")  # the same: fine
    with pytest.raises(ValueError, match="differ"):
        reporter.set_search_properties("acc", "max")


# ---------------------------------------------------------------------- timing and the terminal
def test_should_report_respects_frequency(clock: Clock) -> None:
    reporter = CLIReporter(clock=clock, out=io.StringIO())
    assert reporter.max_report_frequency == 5.0
    assert reporter.should_report([]) is True
    clock.advance(4.9)
    assert reporter.should_report([]) is False
    assert reporter.should_report([], done=True) is True
    clock.advance(5.0)
    assert reporter.should_report([]) is True
    assert reporter.should_report([]) is False

    fast = CLIReporter(clock=clock, max_report_frequency=0.5, out=io.StringIO())
    fast.should_report([])
    clock.advance(0.5)
    assert fast.should_report([]) is True


def screen(text: str, columns: int, lines: int) -> list[str]:
    """What a terminal of this size shows after ``text`` was written to it (pyte, a
    VT100 emulator), one string per row, right-stripped."""
    pyte = pytest.importorskip("pyte", reason='needs the test extra: pip install -e ".[test]"')
    display = pyte.Screen(columns, lines)
    pyte.Stream(display).feed(text.replace("\n", "\r\n"))  # a tty's onlcr
    return [row.rstrip() for row in display.display]


def test_terminal_redraws_in_place_below_other_output(
    make_trial: MakeTrial, clock: Clock, monkeypatch
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("LINES", "30")
    tty = FakeTTY()
    reporter = CLIReporter(clock=clock, out=tty, rich=False)
    assert reporter.redraws and reporter.max_report_frequency == 1.0
    trials = [make_trial(0, result=_result(1))]
    reporter.report(trials, False)
    reporter.print_line("Trial train_abcde_00000 completed.")
    tty.write("a trial's own print\n")  # a worker writes to the same terminal
    trials[0].update_last_result(_result(2))
    reporter.report(trials, False)
    rows = screen(tty.getvalue(), 100, 30)
    assert sum(row == "== Status ==" for row in rows) == 1  # redrawn, not printed again
    status = rows.index("== Status ==")
    assert rows[status - 3 : status - 1] == [
        "Trial train_abcde_00000 completed.",
        "a trial's own print",
    ]  # printed lines scroll above the report and stay
    latest = _report(CLIReporter(rich=False), trials)  # the same report, plain
    expected = [row for row in latest.splitlines() if row.startswith("| train_abcde_00000")]
    assert [row for row in rows[status:] if row.startswith("| train_")] == expected
    assert rows[-1].startswith("+--")  # the report fills the bottom rows
    reporter.report(trials, True)  # the final report is printed below the output
    final = screen(tty.getvalue(), 100, 30)
    assert sum(row == "== Status ==" for row in final) == 1
    assert "a trial's own print" in final


def test_a_report_taller_than_the_terminal_is_cut(make_trial: MakeTrial, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    monkeypatch.setenv("LINES", "16")
    tty = FakeTTY()
    reporter = CLIReporter(out=tty, rich=False, max_progress_rows=30)
    reporter.report([make_trial(i, result=_result(1)) for i in range(20)], False)
    rows = screen(tty.getvalue(), 40, 16)
    assert rows[4] == "== Status =="  # 12 rows of report below 4 left to the output
    assert rows[15].startswith("... ") and "more lines" in rows[15]
    assert all(len(row) <= 40 for row in rows)  # long lines cut, not wrapped


def test_terminal_report_has_a_progress_bar_best_trial_and_resources(
    make_trial: MakeTrial, clock: Clock, monkeypatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("LINES", "40")
    tty = FakeTTY()
    reporter = CLIReporter(clock=clock, out=tty, rich=False, metric="loss", mode="min")
    reporter.setup(start_time=clock(), total_samples=8)
    trials = [make_trial(i, "TERMINATED", {"loss": 1.0 / (i + 1)}) for i in range(2)]
    trials += [make_trial(2, "RUNNING", {"loss": 0.9})]
    clock.advance(20.0)
    reporter.report(trials, False, "Logical resource usage: 1.0/2 CPUs, 0/0 GPUs")
    rows = screen(tty.getvalue(), 200, 40)
    bar = "[" + "#" * 8 + "." * 22 + "] 2/8 trials done (25%), ETA 0:01:00"
    assert rows[rows.index("== Status ==") + 2] == bar  # 10 s a trial: 6 left take 60 s
    assert "Logical resource usage: 1.0/2 CPUs, 0/0 GPUs" in rows
    assert any(r.startswith("Current best trial: abcde_00001 with loss=0.5") for r in rows)
    out = io.StringIO()
    off = CLIReporter(clock=clock, out=out)
    off.setup(start_time=clock(), total_samples=8)
    off.report(trials, False)
    assert "trials done" not in out.getvalue()  # off a terminal: the table as before


def test_rich_report_fits_the_terminal(make_trial: MakeTrial, monkeypatch) -> None:
    pytest.importorskip("rich", reason='needs the rich extra: pip install "fasttune[rich]"')
    monkeypatch.setenv("COLUMNS", "40")
    monkeypatch.setenv("LINES", "30")
    tty = FakeTTY()
    reporter = CLIReporter(out=tty, metric="loss", mode="min", total_samples=4)
    trials = [make_trial(i, result=_result(i + 1)) for i in range(3)]
    reporter.report(trials, False)
    reporter.report(trials, False)
    assert "\x1b[1m== Status ==" in tty.getvalue()  # styled by rich
    rows = screen(tty.getvalue(), 40, 30)
    assert sum(row == "== Status ==" for row in rows) == 1
    train_rows = [row for row in rows if row.startswith("train_")]
    assert len(train_rows) == 3 and all("RUNNING" in row for row in train_rows)
    assert any(row.startswith("━") and "0/4 trials done" in row for row in rows)  # rich's bar


def test_rich_asked_for_but_missing_names_the_extra(make_trial: MakeTrial, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "rich", None)  # as if rich were not installed
    monkeypatch.delitem(sys.modules, "fasttune.progress._rich", raising=False)
    with pytest.raises(ImportError, match=r'needs rich: pip install "fasttune\[rich\]"'):
        CLIReporter(out=FakeTTY(), rich=True).report([make_trial(0)], False)
    tty = FakeTTY()
    CLIReporter(out=tty).report([make_trial(0)], False)  # by default: plain text
    assert "== Status ==" in tty.getvalue() and "\x1b[1m" not in tty.getvalue()


def test_a_dumb_terminal_gets_the_plain_reports(make_trial: MakeTrial, monkeypatch) -> None:
    monkeypatch.setenv("TERM", "dumb")  # a terminal without cursor movement (emacs M-x shell)
    tty = FakeTTY()
    reporter = CLIReporter(out=tty)
    assert not reporter.redraws and reporter.max_report_frequency == 5.0
    reporter.report([make_trial(0)], False)
    assert not ANSI.search(tty.getvalue())


def test_final_report_stays_on_terminal(make_trial: MakeTrial) -> None:
    tty = FakeTTY()
    reporter = CLIReporter(out=tty)
    trials = [make_trial(0, result=_result(1))]
    reporter.report(trials, True)
    done = tty.getvalue()
    reporter.print_line("after")
    assert tty.getvalue() == done + "after\n"


def test_plain_stream_prints_reports_one_after_another(make_trial: MakeTrial) -> None:
    out = io.StringIO()
    reporter = CLIReporter(out=out)
    trials = [make_trial(0, result=_result(1))]
    reporter.report(trials, False)
    reporter.print_line("a line")
    reporter.report(trials, True)
    text = out.getvalue()
    assert text.count("== Status ==") == 2 and "a line\n" in text
    assert not ANSI.search(text)


def test_default_stream_is_stdout_at_report_time(make_trial: MakeTrial, capsys) -> None:
    CLIReporter().report([make_trial(0)], True)
    assert "Number of trials: 1 (1 RUNNING)" in capsys.readouterr().out


# ---------------------------------------------------------------------- notebook
def test_jupyter_reporter_displays_html(make_trial: MakeTrial) -> None:
    shown: list[str] = []
    reporter = JupyterNotebookReporter(display=shown.append, metric="loss", mode="min")
    trials = [make_trial(0, result=_result(2)), make_trial(1, "ERROR", _result(1), error=True)]
    trials[0].custom_trial_name = "<trial & co>"
    reporter.report(trials, False, "Logical resource usage: 1.0/4 CPUs")
    html = shown[0]
    assert html.startswith("== Status ==<br>")
    assert "Number of trials: 2 (1 ERROR, 1 RUNNING)<br>" in html
    assert "<table>" in html and "<th>Trial name</th>" in html
    assert "&lt;trial &amp; co&gt;" in html and "<trial & co>" not in html
    assert "Number of errored trials: 1" in html and "Logical resource usage" in html
    assert "\n== Status" not in html


def test_jupyter_reporter_without_ipython_prints_text(make_trial, capsys, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "IPython", None)
    monkeypatch.setitem(sys.modules, "IPython.display", None)
    JupyterNotebookReporter().report([make_trial(0, result=_result(1))], True)
    out = capsys.readouterr().out
    assert "== Status ==" in out and "+----" in out and "<table>" not in out


# ---------------------------------------------------------------------- detection
def test_detect_reporter(monkeypatch) -> None:
    assert detect_reporter(0) is None
    default = detect_reporter(1, None, "loss", "min")
    assert isinstance(default, CLIReporter) and default._metric == "loss"
    mine = CLIReporter()
    assert detect_reporter(2, mine, "acc", "max") is mine and mine._mode == "max"
    with pytest.raises(ValueError, match="differ"):
        detect_reporter(1, CLIReporter(metric="loss", mode="min"), "acc", "max")
    with pytest.raises(TypeError, match="should_report"):
        detect_reporter(1, object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="verbose=4"):
        detect_reporter(4)


def test_detect_reporter_in_notebook(monkeypatch) -> None:
    class ZMQInteractiveShell:
        pass

    fake = types.ModuleType("IPython")
    fake.get_ipython = ZMQInteractiveShell  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython", fake)
    reporter = detect_reporter(1)
    assert isinstance(reporter, JupyterNotebookReporter) and reporter._overwrite is True
    assert detect_reporter(2)._overwrite is False  # type: ignore[union-attr]


# ---------------------------------------------------------------------- the callback
def _callback(verbose: int, clock: Clock, info_calls: list[int] | None = None):
    out = io.StringIO()

    def sys_info() -> list[str]:
        if info_calls is not None:
            info_calls.append(1)
        return ["Logical resource usage: 1.0/8 CPUs"]

    reporter = CLIReporter(clock=clock, out=out)
    cb = ProgressCallback(
        reporter, verbose, metric="loss", mode="min", sys_info=sys_info, clock=clock
    )
    return cb, out


def test_callback_reports_on_steps_and_at_end(make_trial: MakeTrial, clock: Clock) -> None:
    info_calls: list[int] = []
    cb, out = _callback(1, clock, info_calls)
    cbs = CallbackList([cb])
    cbs.setup(stop=None, num_samples=4, total_num_samples=8)
    trials = [make_trial(0, result=_result(1)), make_trial(1, "TERMINATED", _result(2))]
    cbs.on_step_end(iteration=1, trials=trials)
    clock.advance(1)
    cbs.on_step_end(iteration=2, trials=trials)  # too soon
    assert out.getvalue().count("== Status ==") == 1 and len(info_calls) == 1
    assert "Number of trials: 2/8 (1 RUNNING, 1 TERMINATED)" in out.getvalue()
    assert "Current best trial: abcde_00001 with loss=0.5" in out.getvalue()
    cbs.on_trial_complete(iteration=2, trials=trials, trial=trials[1])
    assert "completed" not in out.getvalue()
    cbs.on_experiment_end(trials=trials)
    assert out.getvalue().count("== Status ==") == 2 and len(info_calls) == 2


def test_callback_verbose_2_prints_trial_lines(make_trial: MakeTrial, clock: Clock) -> None:
    cb, out = _callback(2, clock)
    cbs = CallbackList([cb])
    # the folder's name and None values are left out, as Ray prints them
    last = _result(3, accuracy=0.9, checkpoint_dir_name=None, note=None)
    done = make_trial(0, "TERMINATED", last)
    failed = make_trial(1, "ERROR", _result(1), error=True)
    cbs.on_trial_result(iteration=1, trials=[done], trial=done, result=done.last_result)
    assert out.getvalue() == ""
    cbs.on_trial_complete(iteration=2, trials=[done], trial=done)
    cbs.on_trial_recover(iteration=2, trials=[failed], trial=failed)
    cbs.on_trial_error(iteration=3, trials=[failed], trial=failed)
    lines = out.getvalue().splitlines()
    assert lines[0] == "Trial train_abcde_00000 completed. Last result: loss=0.333333,accuracy=0.9"
    assert lines[1].startswith("Trial train_abcde_00001 failed (2 failures so far)")
    assert lines[2].startswith("Trial train_abcde_00001 errored after 1 iterations")
    assert lines[2].endswith(f"Error file: {failed.error_file}")


def test_callback_verbose_3_prints_results_throttled(make_trial: MakeTrial, clock: Clock) -> None:
    cb, out = _callback(3, clock)
    cbs = CallbackList([cb])
    assert cbs.listeners("on_trial_result") == [cb]
    assert CallbackList([_callback(2, clock)[0]]).listeners("on_trial_result") == []
    trial = make_trial(0)
    for i in (1, 2, 3):
        cbs.on_trial_result(iteration=i, trials=[trial], trial=trial, result=_result(i))
        clock.advance(1)
    clock.advance(5)
    cbs.on_trial_result(iteration=4, trials=[trial], trial=trial, result=_result(4))
    cbs.on_trial_result(iteration=5, trials=[trial], trial=trial, result=_result(5, done=True))
    text = out.getvalue()
    assert text.count("Result for train_abcde_00000:") == 3
    assert "  training_iteration: 1\n" in text and "  training_iteration: 4\n" in text
    assert "  training_iteration: 2\n" not in text and "  training_iteration: 5\n" in text


def test_verbose_0_reports_nothing(make_trial: MakeTrial, clock: Clock) -> None:
    assert create_progress_callback(0) is None
    cb, out = _callback(0, clock)
    trials = [make_trial(0, "TERMINATED", _result(1))]
    cbs = CallbackList([cb])
    cbs.setup(total_num_samples=1)
    cbs.on_step_end(iteration=1, trials=trials)
    cbs.on_trial_complete(iteration=1, trials=trials, trial=trials[0])
    cbs.on_experiment_end(trials=trials)
    assert out.getvalue() == ""


def test_callback_drives_a_user_reporter(make_trial: MakeTrial) -> None:
    class Collect(ProgressReporter):
        def __init__(self) -> None:
            self.reports: list[tuple[int, bool, tuple[str, ...]]] = []
            self.setup_args: dict[str, Any] = {}

        def setup(self, start_time=None, total_samples=None, metric=None, mode=None, **kw):
            self.setup_args = {"total_samples": total_samples, "metric": metric, "mode": mode}

        def should_report(self, trials, done=False):
            return True

        def report(self, trials, done, *sys_info):
            self.reports.append((len(trials), done, sys_info))

    mine = Collect()
    cb = create_progress_callback(1, mine, "loss", "min", sys_info=lambda: ["cpus"])
    assert cb is not None and cb.reporter is mine
    cbs = CallbackList([cb])
    cbs.setup(total_num_samples=3)
    trials = [make_trial(0)]
    cbs.on_step_end(iteration=1, trials=trials)
    cbs.on_experiment_end(trials=trials)
    assert mine.setup_args == {"total_samples": 3, "metric": "loss", "mode": "min"}
    assert mine.reports == [(1, False, ("cpus",)), (1, True, ("cpus",))]
