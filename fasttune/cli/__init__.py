"""The ``fasttune`` command: look at experiments from the shell.

``fasttune ls EXPERIMENT``, ``fasttune lsx PROJECT``, ``fasttune show EXPERIMENT``,
``fasttune plot EXPERIMENT --metric M -o out.html`` and ``fasttune dashboard PATH``
read only the experiments' files, so they work on running and finished experiments.
Also ``python -m fasttune``. Nothing else in fasttune imports this package.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="fasttune", description="Look at fasttune (and Ray Tune) experiments."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def table_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--sort",
            action="append",
            default=[],
            metavar="COLUMN",
            help="sort by this column (repeat for several)",
        )
        sub.add_argument("--desc", action="store_true", help="sort in descending order")
        sub.add_argument(
            "--filter",
            action="append",
            default=[],
            metavar="EXPR",
            help="keep rows where EXPR holds, e.g. 'loss < 0.5' (repeatable)",
        )
        sub.add_argument("--columns", metavar="A,B,...", help="comma-separated columns to show")
        sub.add_argument("--limit", type=int, metavar="N", help="show at most N rows")
        sub.add_argument(
            "--output",
            metavar="FILE.csv|FILE.json",
            help="also save the rows to a .csv or .json file",
        )

    ls = commands.add_parser("ls", help="the trials of one experiment")
    ls.add_argument("path", metavar="EXPERIMENT_PATH")
    ls.add_argument("--metric", help="metric column to show (default: the experiment's)")
    table_options(ls)

    lsx = commands.add_parser("lsx", help="the experiments under a folder")
    lsx.add_argument("path", metavar="PROJECT_PATH")
    table_options(lsx)

    show = commands.add_parser("show", help="status, best trial and errors of an experiment")
    show.add_argument("path", metavar="EXPERIMENT_PATH")
    show.add_argument("--metric", help="metric ranking the trials (default: the experiment's)")
    show.add_argument("--mode", choices=["min", "max"], help="default: the experiment's")

    plot = commands.add_parser("plot", help="write a plotly chart of an experiment")
    plot.add_argument("path", metavar="EXPERIMENT_PATH")
    plot.add_argument("--metric", help="metric to plot (default: the experiment's)")
    plot.add_argument("--mode", choices=["min", "max"], help="default: the experiment's")
    plot.add_argument(
        "--kind",
        default="curves",
        choices=["curves", "parallel", "importance", "history", "scatter", "stops", "pbt"],
        help="scatter: the metric against each varying config parameter (or --param), "
        "each trial's best value by mode; stops: where trials ended (ASHA/HyperBand "
        "rungs); pbt: PBT's exploits",
    )
    plot.add_argument(
        "--param",
        action="append",
        metavar="P",
        help="with --kind scatter or parallel: the config parameter(s) to draw (repeatable)",
    )
    plot.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="OUT.html|OUT.png",
        help="the file to write: .html (opens offline), or an image (.png, .svg, .pdf, "
        ".jpg, .webp; drawn by kaleido in a Chrome or Chromium)",
    )
    plot.add_argument("--width", type=int, metavar="PX", help="image width (default 700)")
    plot.add_argument("--height", type=int, metavar="PX", help="image height (default 500)")

    dashboard = commands.add_parser("dashboard", help="serve the web dashboard")
    dashboard.add_argument("path", metavar="PATH")
    dashboard.add_argument("--host", default="127.0.0.1")
    dashboard.add_argument("--port", type=int, default=8265)
    dashboard.add_argument(
        "--token",
        help="access token (required off 127.0.0.1; generated and printed when not given)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns the exit status (2 for bad input, with a message)."""
    args = build_parser().parse_args(argv)
    from fasttune.cli import _commands

    try:
        return _commands.run(args)
    except _commands.EXPECTED_ERRORS as e:
        print(f"fasttune {args.command}: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:
        if not _from_storage_client(e):
            raise
        print(
            f"fasttune {args.command}: error: cannot read {args.path!r}: "
            f"{type(e).__name__}: {e} (check the credentials and endpoint of that storage)",
            file=sys.stderr,
        )
        return 2


_STORAGE_CLIENTS = ("botocore", "aiobotocore", "s3fs", "gcsfs", "google", "adlfs", "azure")


def _from_storage_client(error: BaseException) -> bool:
    """Whether ``error`` was raised by a cloud storage client (no credentials, ...)."""
    return type(error).__module__.split(".")[0] in _STORAGE_CLIENTS
