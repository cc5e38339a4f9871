"""A config value whose unpickling is recorded: proves a reader never unpickles."""

from __future__ import annotations

import os

ENV = "FASTTUNE_TEST_TRIPWIRE"


def _rebuilt(label: str) -> Tripwire:
    log = os.environ.get(ENV)
    if log:
        with open(log, "a") as f:
            f.write(label + "\n")
    return Tripwire(label)


class Tripwire:
    def __init__(self, label: str):
        self.label = label

    def __reduce__(self):
        return (_rebuilt, (self.label,))

    def __repr__(self) -> str:
        return f"Tripwire({self.label!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tripwire) and other.label == self.label

    def __hash__(self) -> int:
        return hash(self.label)
