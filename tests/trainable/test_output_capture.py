"""Copying a trainable's stdout and stderr to log files."""

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


def test_output_goes_to_the_file_and_still_to_the_console(tmp_path, capsys):
    capture = OutputCapture()
    capture.open(str(tmp_path), "out.log", "err.log")
    print("shown and kept")
    print("warned and kept", file=sys.stderr)
    sys.stdout.buffer.write(b"bytes to the file\n")  # the binary side: the file's
    assert not sys.stdout.isatty()
    capture.close()
    seen = capsys.readouterr()
    assert seen.out == "shown and kept\n" and seen.err == "warned and kept\n"
    assert (tmp_path / "out.log").read_text() == "shown and kept\nbytes to the file\n"
    assert (tmp_path / "err.log").read_text() == "warned and kept\n"
