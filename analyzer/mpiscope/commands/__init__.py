"""Subcommands of the `mpiscope` CLI (see mpiscope.cli)."""
