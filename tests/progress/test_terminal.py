"""The console while a real run goes: on a pseudo-terminal (the pty module) the live
report is redrawn in place with a progress bar, the best trial and the resources in
use (with rich, and plain when rich is missing), while the trials' own prints scroll
above it; through a pipe it is the plain periodic table with no escape codes;
``verbose=0..3`` keep Ray's meanings.

Each test runs a real experiment in its own Python process; what the terminal shows
is rebuilt from the bytes written to it by pyte, a VT100 emulator."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from dataclasses import dataclass, field

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLUMNS, LINES = 150, 60

SCRIPT = """
import sys, time
{block_rich}
import fasttune as tune

def train(config):
    for i in range(1, 6):
        time.sleep(0.15)
        print(f"PRINTED x={{config['x']}} i={{i}}", flush=True)  # to the same terminal
        tune.report({{"loss": config["x"] / i}})

tune.init(num_cpus=2, num_gpus=0)
tune.Tuner(
    train,
    param_space={{"x": tune.grid_search([0.2, 0.4, 0.6, 0.8, 1.0, 1.2])}},
    tune_config=tune.TuneConfig(metric="loss", mode="min", max_concurrent_trials=2),
    run_config=tune.RunConfig(storage_path=sys.argv[1], name="tty", verbose={verbose}),
).fit()
print("RICH IMPORTED" if "rich" in sys.modules and sys.modules["rich"] else "NO RICH")
"""


def _script(tmp_path, verbose: int = 1, block_rich: bool = False) -> str:
    path = tmp_path / "run.py"
    block = "sys.modules['rich'] = None  # as if rich were not installed" if block_rich else ""
    path.write_text(SCRIPT.format(verbose=verbose, block_rich=block))
    return str(path)


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=ROOT, TERM="xterm-256color")
    env.pop("COLUMNS", None)  # the width comes from the terminal itself
    env.pop("NO_COLOR", None)
    return env


@dataclass
class Terminal:
    """What a run wrote to its terminal: the raw text, the screen after each read
    (rows, right-stripped) and at the end."""

    raw: str = ""
    screens: list[list[str]] = field(default_factory=list)
    scrolled_off: list[str] = field(default_factory=list)  # above the screen at the end

    @property
    def final(self) -> list[str]:
        """Every row at the end: those scrolled off the top, then the screen's."""
        return self.scrolled_off + self.screens[-1]


def run_on_a_terminal(tmp_path, **kwargs) -> Terminal:
    """Run the script with its stdout and stderr on a new pseudo-terminal of
    ``COLUMNS`` x ``LINES``, and watch the screen through pyte."""
    pyte = pytest.importorskip("pyte", reason='needs the test extra: pip install -e ".[test]"')
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", LINES, COLUMNS, 0, 0))
    process = subprocess.Popen(
        [sys.executable, _script(tmp_path, **kwargs), str(tmp_path / "results")],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=_env(),
        close_fds=True,
    )
    os.close(slave)
    screen = pyte.HistoryScreen(COLUMNS, LINES, history=10_000)
    stream = pyte.ByteStream(screen)
    seen = Terminal()
    chunks = []
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the terminal's other end is closed
                    break
                if not data:
                    break
                chunks.append(data)
                stream.feed(data)
                seen.screens.append([row.rstrip() for row in screen.display])
            elif process.poll() is not None:
                break
    finally:
        os.close(master)
        process.wait(timeout=30)
    seen.raw = b"".join(chunks).decode("utf-8", errors="replace")
    seen.scrolled_off = [
        "".join(line[x].data for x in range(COLUMNS)).rstrip() for line in screen.history.top
    ]
    assert process.returncode == 0, seen.raw[-3000:]
    return seen


def check_live_report(seen: Terminal) -> list[list[str]]:
    """The report is redrawn in place (never two on screen) and every line the trials
    printed is on the final screen once, above the final report; the screens that
    showed a live report."""
    live = [rows for rows in seen.screens if "== Status ==" in rows]
    assert len(live) >= 3, seen.raw[-2000:]
    for rows in seen.screens:
        assert sum(row == "== Status ==" for row in rows) <= 1, "\n".join(rows)
    # (two workers printing at once may share a row: their prints are not lines)
    printed = [p for row in seen.final for p in re.findall(r"PRINTED x=[\d.]+ i=\d", row)]
    assert sorted(printed) == sorted(
        f"PRINTED x={x} i={i}" for x in (0.2, 0.4, 0.6, 0.8, 1.0, 1.2) for i in range(1, 6)
    )
    last_print = max(i for i, row in enumerate(seen.final) if row.startswith("PRINTED "))
    assert seen.final.index("== Status ==") > last_print
    return live


@pytest.mark.timeout(300)
def test_live_report_on_a_terminal_with_rich(tmp_path):
    pytest.importorskip("rich", reason='needs the rich extra: pip install "fasttune[rich]"')
    seen = run_on_a_terminal(tmp_path)
    live = check_live_report(seen)
    assert "\x1b[1m== Status ==" in seen.raw  # drawn by rich: styled
    assert "\x1b[1;32mRUNNING" in seen.raw  # statuses in colour
    bars = [row for rows in live for row in rows if "trials done" in row]
    assert all(row.startswith("━") for row in bars)  # rich's bar
    assert any(re.search(r"[1-5]/6 trials done \(\d+%\), ETA \d:\d\d:\d\d", r) for r in bars)
    assert any("Logical resource usage: 2.0/2 CPUs" in row for rows in live for row in rows)
    assert any(row.startswith("Current best trial:") for rows in live for row in rows)
    final = seen.final[seen.final.index("== Status ==") :]
    assert any("6/6 trials done (100%)" in row for row in final)
    assert not any("ETA" in row for row in final)
    assert sum(" TERMINATED " in row for row in final) == 6  # table rows
    assert any("Current best trial" in row and "with loss=0.04" in row for row in final)
    assert [row for row in seen.final if row][-1] == "RICH IMPORTED"


@pytest.mark.timeout(300)
def test_live_report_on_a_terminal_without_rich(tmp_path):
    seen = run_on_a_terminal(tmp_path, block_rich=True)
    live = check_live_report(seen)
    assert "\x1b[1m" not in seen.raw  # no styling: only the cursor moves
    bars = [row for rows in live for row in rows if "trials done" in row]
    assert any(re.fullmatch(r"\[#*\.+\] [0-5]/6 trials done.*", row) for row in bars)
    assert any("ETA" in row for row in bars)
    final = seen.final[seen.final.index("== Status ==") :]
    assert "[" + "#" * 30 + "] 6/6 trials done (100%)" in final
    assert sum(row.startswith("| train_") for row in final) == 6
    assert [row for row in seen.final if row][-1] == "NO RICH"


def run_through_a_pipe(tmp_path, verbose: int) -> str:
    tmp_path.mkdir()
    done = subprocess.run(
        [sys.executable, _script(tmp_path, verbose=verbose), str(tmp_path / "results")],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.timeout(300)
def test_off_a_terminal_the_plain_table_and_verbose_levels(tmp_path):
    quiet = run_through_a_pipe(tmp_path / "v0", 0)
    lines = [line for line in quiet.splitlines() if line and not line.startswith("PRINTED ")]
    assert lines == ["NO RICH"]  # verbose=0: nothing but the trials' own prints

    status = run_through_a_pipe(tmp_path / "v1", 1)
    assert "\x1b[" not in status  # no escape codes in a log
    assert status.count("== Status ==") >= 2  # printed one after another
    assert "trials done" not in status  # the bar is for terminals
    assert "Number of trials: 6/6 (6 TERMINATED)" in status
    assert "Logical resource usage" in status and "Current best trial" in status
    assert "Trial train_" not in status and "Result for" not in status
    assert status.rstrip().endswith("NO RICH")  # rich is not even imported

    brief = run_through_a_pipe(tmp_path / "v2", 2)
    assert brief.count(" completed. Last result: loss=") == 6
    assert "Result for" not in brief

    detailed = run_through_a_pipe(tmp_path / "v3", 3)
    assert detailed.count(" completed. Last result: loss=") == 6
    assert detailed.count("Result for train_") >= 6  # each trial's results, every 5 s at most
