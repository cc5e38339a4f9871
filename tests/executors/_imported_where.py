"""A module that records the process it was imported in (for the preload tests)."""

import os

IMPORTED_IN = os.getpid()
