"""`mpiscope` command line: one subcommand per module of this package (mpiscope.cli).

Each command module exposes `HELP: str`, `add_arguments(parser)` and
`run(args) -> int`; modules are imported lazily so `mpiscope lib` stays instant.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from mpiscope import __version__, output
from mpiscope.cli import stdio
from mpiscope.errors import UserError

# subcommand name -> module under mpiscope.cli
COMMANDS: dict[str, str] = {
    "lib": "lib",
    "run": "run",
    "analyze": "analyze",
    "recover": "recover",
    "symbolize": "symbolize",
    "scaling": "scaling",
    "compare": "compare",
    "serve": "serve",
    "study": "study",
    "cluster": "cluster",
    "whatif": "whatif",
}


def _load(name: str):
    return importlib.import_module(f"mpiscope.cli.{COMMANDS[name]}")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mpiscope", description="MPI tracing and performance analysis"
    )
    parser.add_argument("--version", action="version", version=f"mpiscope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        if only is not None and name != only:
            # cheap placeholder so `mpiscope --help` lists every command
            sub.add_parser(name, add_help=False)
            continue
        try:
            module = _load(name)
        except ModuleNotFoundError:
            continue  # command not built yet
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
    return parser


# options naming a file a command writes: checked before any work is done
OUTPUT_OPTIONS = ("json", "html", "md", "png")


def check_outputs(args: argparse.Namespace) -> None:
    """One clear line now, not a traceback after minutes of analysis."""
    for name in OUTPUT_OPTIONS:
        path = getattr(args, name, None)
        if isinstance(path, Path):
            output.check_writable(path)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    first = next((a for a in argv if not a.startswith("-")), None)
    only = first if first in COMMANDS else None
    try:
        with stdio.guarded_stdout():  # also around argparse: `--help > /dev/full`
            parser = build_parser(only)
            args = parser.parse_args(argv)
            if not args.command:
                parser.print_help()
                return 2
            check_outputs(args)
            return int(_load(args.command).run(args) or 0)
    except UserError as err:
        print(err.one_line(), file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # a pipe other than stdout (stdout's own are handled in stdio)
        return 0
