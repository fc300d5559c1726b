"""Where the built artefacts live, relative to the source checkout (editable install)."""

from __future__ import annotations

import os
from pathlib import Path

from mpiscope.errors import UserError

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_DIR = Path(os.environ.get("MPISCOPE_BUILD_DIR", REPO_ROOT / "build"))
MPI_FLAVOURS = ("openmpi", "mpich")


def interposer_library(mpi: str = "openmpi") -> Path:
    """Absolute path of the PMPI -> OTF2 interposer built for the given MPI library."""
    if mpi not in MPI_FLAVOURS:
        choices = ", ".join(MPI_FLAVOURS)
        raise UserError(None, f"unknown MPI flavour {mpi!r} (choose from {choices})")
    override = os.environ.get("MPISCOPE_LIB")
    if override and mpi == "openmpi":
        return Path(override).resolve()
    lib = BUILD_DIR / "interposer" / mpi / "libmpiscope.so"
    if not lib.is_file():
        hint = "make build" if mpi == "openmpi" else "make interposer MPI=mpich"
        raise UserError(str(lib), f"interposer library not built (run `{hint}`)")
    return lib
