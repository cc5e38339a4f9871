"""``python -m fasttune``: the ``fasttune`` command line."""

from fasttune.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
