"""A module the tests preload into the fork server."""

import os

IMPORTED_IN = os.getpid()
