"""Where the built C artefacts live: the interposer (one per MPI flavour), its recovery tool
and the native reader.

Looked up, first found wins:
1. ``$MPISCOPE_BUILD_DIR`` when set (tests, benches, a build elsewhere);
2. the installed package's ``mpiscope/_lib/`` (``pip install .``, a wheel, Spack: the
   top-level CMakeLists.txt installs them there);
3. the source checkout's ``build/`` (``make build``; an editable install, ``pip install -e
   .`` and so ``make setup``, builds into it too).

All three hold the same layout, ``interposer/<mpi>/libmpiscope.so``,
``interposer/<mpi>/mpiscope-recover`` and ``native/libmpiscope_reader.so``, so a module
that needs one of them joins its relative path to ``BUILD_DIR`` (or calls ``built``).
"""

from __future__ import annotations

import os
from pathlib import Path

from mpiscope.errors import UserError

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE_LIB_DIR = Path(__file__).resolve().parent / "_lib"
CHECKOUT_BUILD_DIR = REPO_ROOT / "build"
MPI_FLAVOURS = ("openmpi", "mpich")


def build_dirs() -> list[Path]:
    """The directories searched for built artefacts, in order."""
    override = os.environ.get("MPISCOPE_BUILD_DIR")
    if override:
        return [Path(override)]
    return [d for d in (PACKAGE_LIB_DIR, CHECKOUT_BUILD_DIR) if d.is_dir()] or [CHECKOUT_BUILD_DIR]


BUILD_DIR = build_dirs()[0]


def built(relative: str | Path) -> Path | None:
    """The first ``DIR/relative`` that exists among ``build_dirs()``, or None."""
    for d in build_dirs():
        if (d / relative).is_file():
            return d / relative
    return None


def artefact(relative: str | Path, what: str) -> Path:
    """The built file ``relative`` (first found, as ``built``), or one line naming where it
    was expected and how to build it."""
    found = built(relative)
    if found is None:
        raise UserError(str(BUILD_DIR / relative), f"{what} not built (run `make build`)")
    return found


def interposer_tool(name: str) -> Path:
    """A program built beside the interposer (``mpiscope-recover``, ``mpiscope-symbolize``):
    either MPI flavour's, as the files they read do not depend on it."""
    for mpi in MPI_FLAVOURS:
        exe = built(Path("interposer") / mpi / name)
        if exe is not None:
            return exe
    raise UserError(str(BUILD_DIR / "interposer"), f"{name} not built (run `make build`)")


def installed() -> bool:
    """True when mpiscope runs from an installed package that carries its own C artefacts."""
    return PACKAGE_LIB_DIR.is_dir()


def available_flavours() -> list[str]:
    """The MPI flavours whose interposer is built, Open MPI first."""
    return [m for m in MPI_FLAVOURS if built(Path("interposer") / m / "libmpiscope.so")]


def interposer_library(mpi: str | None = "openmpi") -> Path:
    """Absolute path of the PMPI -> OTF2 interposer built for the given MPI library
    (None: Open MPI's if built, else the only flavour built)."""
    if mpi is not None and mpi not in MPI_FLAVOURS:
        choices = ", ".join(MPI_FLAVOURS)
        raise UserError(None, f"unknown MPI flavour {mpi!r} (choose from {choices})")
    override = os.environ.get("MPISCOPE_LIB")
    if override and mpi in (None, "openmpi"):
        return Path(override).resolve()
    if mpi is None:
        mpi = (available_flavours() or ["openmpi"])[0]
    rel = Path("interposer") / mpi / "libmpiscope.so"
    lib = built(rel)
    if lib is not None:
        return lib.absolute()
    where = build_dirs()[0] / rel
    if installed() and "MPISCOPE_BUILD_DIR" not in os.environ:
        raise UserError(str(where), f"this mpiscope was installed without the {mpi} interposer "
                        f"(no mpicc.{mpi} or {mpi} mpicc found when it was built): install "
                        f"{mpi} and reinstall mpiscope")
    hint = "make build" if mpi == "openmpi" else "make interposer MPI=mpich"
    raise UserError(str(where), f"interposer library not built (run `{hint}`)")
