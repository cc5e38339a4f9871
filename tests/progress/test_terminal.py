"""The console while a real run goes: on a pseudo-terminal (the pty module) the live
report is redrawn in place with a progress bar, the best trial and the resources in
use (with rich, and plain when rich is missing); through a pipe it is the plain
periodic table with no escape codes; ``verbose=0..3`` keep Ray's meanings.

Each test runs a real experiment in its own Python process."""

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

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ERASE = re.compile(r"\x1b\[(\d+)A\r\x1b\[J")
CSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
COLUMNS = 150

SCRIPT = """
import sys, time
{block_rich}
import fasttune as tune

def train(config):
    for i in range(1, 6):
        time.sleep(0.15)
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


def run_on_a_terminal(tmp_path, **kwargs) -> str:
    """Run the script with its stdout and stderr on a new pseudo-terminal of
    ``COLUMNS`` columns; everything written to it, as bytes decoded."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, COLUMNS, 0, 0))
    process = subprocess.Popen(
        [sys.executable, _script(tmp_path, **kwargs), str(tmp_path / "results")],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=_env(),
        close_fds=True,
    )
    os.close(slave)
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
            elif process.poll() is not None:
                break
    finally:
        os.close(master)
        process.wait(timeout=30)
    assert process.returncode == 0, b"".join(chunks).decode(errors="replace")[-3000:]
    return b"".join(chunks).decode("utf-8").replace("\r\n", "\n")


def check_redrawn_in_place(output: str) -> list[str]:
    """Each erase moves up exactly the rows the previous report drew; the reports."""
    parts = ERASE.split(output)
    blocks, ups = parts[0::2], [int(n) for n in parts[1::2]]
    assert len(ups) >= 3, output  # the table was redrawn, not printed again below
    for block, up in zip(blocks[1:], ups[1:]):
        visible = CSI.sub("", block)
        assert visible.count("\n") == up, (up, visible)
        assert max(len(line) for line in visible.split("\n")) <= COLUMNS
    return [CSI.sub("", b) for b in blocks[1:]]


@pytest.mark.timeout(300)
def test_live_report_on_a_terminal_with_rich(tmp_path):
    pytest.importorskip("rich", reason='needs the rich extra: pip install "fasttune[rich]"')
    output = run_on_a_terminal(tmp_path)
    reports = check_redrawn_in_place(output)
    assert "\x1b[1m== Status ==" in output  # drawn by rich: styled
    assert "\x1b[1;32mRUNNING" in output  # statuses in colour
    assert "━" in output  # rich's bar
    assert any(re.search(r"\b[1-5]/6 trials done \(\d+%\), ETA \d:\d\d:\d\d", r) for r in reports)
    assert "Logical resource usage: 2.0/2 CPUs" in output
    assert "Current best trial:" in output
    final = CSI.sub("", ERASE.split(output)[-1])
    assert "6/6 trials done (100%)" in final and "ETA" not in final
    assert sum(" TERMINATED " in line for line in final.split("\n")) == 6  # table rows
    assert "Current best trial" in final and "with loss=0.04" in final
    assert output.rstrip().endswith("RICH IMPORTED")


@pytest.mark.timeout(300)
def test_live_report_on_a_terminal_without_rich(tmp_path):
    output = run_on_a_terminal(tmp_path, block_rich=True)
    reports = check_redrawn_in_place(output)
    assert "\x1b[1m" not in output  # no styling: only the cursor moves
    assert any(re.search(r"\[#*\.+\] [0-5]/6 trials done", r) for r in reports)
    assert any("ETA" in r for r in reports)
    final = ERASE.split(output)[-1]
    assert "[" + "#" * 30 + "] 6/6 trials done (100%)" in final
    assert sum(line.startswith("| train_") for line in final.split("\n")) == 6
    assert output.rstrip().endswith("NO RICH")


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
    assert quiet.strip() == "NO RICH"  # verbose=0: nothing at all

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
