"""Each script of examples/ runs to its end, as a user runs it (issue 11).

One subprocess per example, in a fresh working directory, with the experiments under
the test's storage path; each must exit 0, print its summary line and leave its
experiment directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

# example -> (a library it needs, the experiment directory names, a line it prints)
CASES = {
    "xgboost_example.py": ("xgboost", ["xgboost_example"], "best eval-logloss: "),
    "lightgbm_example.py": ("lightgbm", ["lightgbm_example"], "best model: 20 rounds"),
    "lightning_example.py": ("lightning", ["lightning_example"], "best model: "),
    "mlflow_example.py": (
        "mlflow",
        ["mlflow_example", "mlflow_example_inside"],
        "MLflow experiment fasttune_example: 2 runs",
    ),
    "pbt_torch_example.py": ("torch", ["pbt_torch_example"], "best mean_accuracy: "),
}


def test_every_example_has_a_smoke_test() -> None:
    scripts = {p.name for p in EXAMPLES.glob("*_example.py")}
    assert scripts == set(CASES)


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("script", sorted(CASES))
def test_example_runs(script: str, tmp_path: Path) -> None:
    library, experiments, expected = CASES[script]
    pytest.importorskip(library)
    storage = tmp_path / "results"
    env = {**os.environ, "FASTTUNE_STORAGE_PATH": str(storage)}
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=570,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
    assert expected in out.stdout, out.stdout[-3000:]
    assert "best config: " in out.stdout or "MLflow experiment" in out.stdout
    for name in experiments:
        assert (storage / name).is_dir(), sorted(p.name for p in storage.iterdir())
