"""A module a trainable imports only when it runs (for the learned-imports test)."""

import os

IMPORTED_IN = os.getpid()
