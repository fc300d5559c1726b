"""The `mpiscope` command line: thin commands that parse arguments and call the library."""

from mpiscope.cli.dispatch import main

__all__ = ["main"]
