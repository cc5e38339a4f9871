"""A real experiment with the default loggers never imports torch, tensorboardX or protobuf.

``import tensorboardX`` imports torch when torch is installed (seconds and hundreds
of MB), so the TensorBoard logger encodes its events itself. The test environment
has torch installed (see the Makefile) so that this check means something.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

pytest.importorskip("tensorboardX")  # else there is no TensorBoard logger to check
from tensorboardX.proto.event_pb2 import Event

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import fasttune as tune

    def trainable(config):
        for i in range(3):
            tune.report({"loss": config["lr"] / (i + 1), "nested": {"acc": 0.5 * i},
                         "weights": [0.1 * i, 0.2, 0.3]})

    tuner = tune.Tuner(
        trainable,
        param_space={"lr": tune.grid_search([0.1, 0.2]), "opt": "sgd"},
        run_config=tune.RunConfig(storage_path=sys.argv[1], name="exp", verbose=0),
    )
    results = tuner.fit()
    print(json.dumps({
        "errors": len(results.errors),
        "imported": [m for m in ("torch", "tensorboardX", "google.protobuf") if m in sys.modules],
    }))
    """
)


def _events(path: str) -> list[Any]:
    with open(path, "rb") as f:
        data = f.read()
    events, pos = [], 0
    while pos < len(data):
        length = int.from_bytes(data[pos : pos + 8], "little")
        events.append(Event.FromString(data[pos + 12 : pos + 12 + length]))
        pos += 16 + length
    return events


def test_default_loggers_do_not_import_torch(tmp_path: Any) -> None:
    script = tmp_path / "experiment.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"}
    out = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "results")],
        capture_output=True,
        text=True,
        env=env,
        timeout=100,
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"errors": 0, "imported": []}

    # The TensorBoard files were written, hparams included, so the check covered them.
    files = glob.glob(str(tmp_path / "results" / "exp" / "*" / "events.out.tfevents.*"))
    assert len(files) == 2
    for path in files:
        tags = [v.tag for e in _events(path) for v in e.summary.value]
        assert tags.count("ray/tune/loss") == 3 and tags.count("ray/tune/weights") == 3
        assert "_hparams_/session_start_info" in tags
