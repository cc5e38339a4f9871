"""The integrations import their library only when their own module is imported.

``import fasttune`` and the packages that hold the integrations import none of the
heavy libraries, and a missing library names the extra to install.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

HEAVY = (
    "xgboost", "lightgbm", "lightning", "pytorch_lightning", "torch", "mlflow", "wandb", "keras",
    "aim", "comet_ml",
)  # fmt: skip


def _run(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_packages_import_no_heavy_library() -> None:
    imported = _run(
        f"""
        import sys
        import fasttune, fasttune.integration, fasttune.air, fasttune.air.integrations
        import fasttune.train, fasttune.logger, fasttune.logger.aim
        import fasttune.air.integrations.comet
        from fasttune.train import Checkpoint, RunConfig, report
        from fasttune import RunConfig, TuneConfig, Tuner
        print([m for m in {HEAVY!r} if m in sys.modules])
        """
    )
    assert imported == "[]"


@pytest.mark.parametrize(
    ("module", "library", "extra"),
    [
        ("fasttune.integration.xgboost", "xgboost", "xgboost"),
        ("fasttune.integration.lightgbm", "lightgbm", "lightgbm"),
        ("fasttune.integration.pytorch_lightning", "pytorch_lightning", "lightning"),
        ("fasttune.integration.keras", "keras", "keras"),
        ("fasttune.air.integrations.keras", "keras", "keras"),
    ],
)
def test_missing_library_names_the_extra(module: str, library: str, extra: str) -> None:
    message = _run(
        f"""
        import sys
        for name in ({library!r}, "lightning", "lightning.pytorch"):
            sys.modules[name] = None  # as if not installed
        try:
            import {module}
        except ImportError as e:
            print(e)
        """
    )
    assert f'pip install "fasttune[{extra}]"' in message, message


@pytest.mark.parametrize(
    ("statement", "library", "extra"),
    [
        (
            "from fasttune.air.integrations.mlflow import MLflowLoggerCallback as C; C().setup()",
            "mlflow",
            "mlflow",
        ),
        (
            "from fasttune.air.integrations.wandb import setup_wandb; setup_wandb()",
            "wandb",
            "wandb",
        ),
    ],
)
def test_missing_tracker_names_the_extra(statement: str, library: str, extra: str) -> None:
    message = _run(
        f"""
        import sys
        sys.modules[{library!r}] = None  # as if not installed
        try:
            {statement}
        except ImportError as e:
            print(e)
        """
    )
    assert f'pip install "fasttune[{extra}]"' in message, message
