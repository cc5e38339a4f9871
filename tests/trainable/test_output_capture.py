"""Redirecting a trainable's stdout and stderr to log files."""

from __future__ import annotations

import sys

from fasttune.trainable._output_capture import OutputCapture


def test_shared_file_relative_to_logdir(tmp_path):
    capture = OutputCapture()
    capture.open(str(tmp_path), "both.log", "both.log")
    print("out")
    print("err", file=sys.stderr)
    capture.flush()
    assert (tmp_path / "both.log").read_text() == "out\nerr\n"
    capture.close()
    capture.close()  # closing twice is harmless
    print("not captured")
    assert (tmp_path / "both.log").read_text() == "out\nerr\n"


def test_absolute_path_and_stderr_alone(tmp_path):
    target = tmp_path / "elsewhere.log"
    capture = OutputCapture()
    capture.open(str(tmp_path / "logdir"), None, str(target))
    print("to stdout")
    print("to stderr", file=sys.stderr)
    capture.close()
    assert target.read_text() == "to stderr\n"


def test_nothing_to_capture(tmp_path):
    stdout = sys.stdout
    capture = OutputCapture()
    capture.open(str(tmp_path), None, None)
    assert sys.stdout is stdout
    capture.close()
    assert list(tmp_path.iterdir()) == []
