"""fasttune needs Linux or macOS for its worker processes; Windows gets a clear error."""

from __future__ import annotations

import socket
import sys

import pytest

import fasttune
from fasttune import RunConfig, TuneConfig
from fasttune._support.supported_platform import local_workers_unsupported


def _train(config):
    fasttune.report({"score": 1})


def test_this_platform_runs_local_workers():
    assert local_workers_unsupported() is None


def test_fit_on_windows_fails_at_once_naming_the_platform_and_wsl(monkeypatch):
    monkeypatch.delenv("FASTTUNE_EXECUTOR", raising=False)
    monkeypatch.setattr(sys, "platform", "win32")
    tuner = fasttune.Tuner(
        _train, tune_config=TuneConfig(num_samples=1), run_config=RunConfig(verbose=0)
    )
    with pytest.raises(fasttune.TuneError, match=r"Linux or macOS.*'win32'.*WSL"):
        tuner.fit()


def test_missing_fd_passing_is_named(monkeypatch):
    monkeypatch.delattr(socket, "send_fds")
    assert "no socket.send_fds" in local_workers_unsupported()
