"""fasttune without Ray: a representative part of the suite in a process where ``ray``
cannot be imported (as on a machine without it), with the Ray tests skipped there, and
the whole suite collected there. ``make test-without-ray`` runs all of it that way."""

from __future__ import annotations

import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The public API, the Tuner on local workers, the executor conformance suite inline,
# resources and fasttune.init (addresses included), with_parameters; the Ray modules
# must skip themselves, not fail.
SUBSET = [
    "tests/test_public_api.py",
    "tests/runner/test_tuner_basics.py",
    "tests/executors/test_inline.py",
    "tests/executors/test_ray.py",
    "tests/_internal/test_resources.py",
    "tests/_support/test_cluster_address.py",
    "tests/trainable/test_util.py",
]

RUN_WITHOUT_RAY = """
import sys
sys.modules["ray"] = None  # `import ray` raises ImportError from here on
import pytest
code = pytest.main(["-q", "-p", "no:cacheprovider", "-o", "addopts=", *sys.argv[1:]])
assert "ray" not in sys.modules or sys.modules["ray"] is None
sys.exit(code)
"""


def _pytest_without_ray(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", RUN_WITHOUT_RAY, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return proc.stdout.strip().splitlines()[-1]


def test_a_representative_part_of_the_suite_passes_without_ray():
    summary = _pytest_without_ray(*SUBSET)
    assert "passed" in summary and "failed" not in summary and "error" not in summary


def test_the_whole_suite_and_its_doctests_are_collected_without_ray():
    """Every module imports without Ray: none of them can fail there before a test runs."""
    summary = _pytest_without_ray("--collect-only", "--doctest-modules", "tests", "fasttune")
    assert "collected" in summary and "error" not in summary
