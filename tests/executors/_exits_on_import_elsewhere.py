"""Imports in the driver (whose pid is in ``DRIVER_PID``), exits anywhere else, as a
module that parses the command line on import can."""

import os

if os.getpid() != int(os.environ.get("DRIVER_PID", "0")):
    raise SystemExit(2)
