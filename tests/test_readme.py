"""The README's quickstart runs as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_quickstart_runs(tmp_path):
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    code = re.search(r"## Quickstart\s+```python\n(.*?)```", readme, re.S).group(1)
    env = dict(os.environ, FASTTUNE_STORAGE_PATH=str(tmp_path), FASTTUNE_NUM_CPUS="2")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "'lr':" in out.stdout.strip().splitlines()[-1]


def test_images_exist():
    """Every image the README shows is in the repository and is a PNG (the dashboard's
    screenshot is the browser test's ``test-artifacts/dashboard/experiment.png``)."""
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", readme)
    assert "docs/images/dashboard.png" in images
    for image in images:
        with open(os.path.join(ROOT, image), "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n", image
