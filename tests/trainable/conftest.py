from __future__ import annotations

from typing import Any

import pytest

from fasttune.logger import NoopLogger


@pytest.fixture
def make_trainable(tmp_path):
    """Build a trainable of class ``cls`` logging into its own directory; stops it at the end."""
    made: list[Any] = []

    def make(cls: type, config: dict[str, Any] | None = None, *, loggers: bool = False, **kw):
        logdir = tmp_path / f"trial_{len(made)}"
        logdir.mkdir()
        if loggers:
            from fasttune.logger import UnifiedLogger

            def creator(c):
                return UnifiedLogger(c, str(logdir))
        else:

            def creator(c):
                return NoopLogger(c, str(logdir))

        trainable = cls(config=config, logger_creator=creator, **kw)
        made.append(trainable)
        return trainable

    yield make
    for trainable in made:
        try:
            trainable.stop()
        except Exception:
            pass
