"""Imports in the driver (whose pid is in ``DRIVER_PID``), exits in any other process
that has it, as a module that parses the command line on import can."""

import os

_DRIVER = os.environ.get("DRIVER_PID")
if _DRIVER and os.getpid() != int(_DRIVER):
    raise SystemExit(2)
