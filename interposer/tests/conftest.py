"""Fixtures for the interposer tests: the built library and the compiled test programs.

Test programs live in programs/; they are compiled with debug info into one session-wide
temporary directory, each at most once.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mpiscope_testing import REPO, mpijobs


@pytest.fixture(scope="session")
def interposer() -> str:
    """Path of libmpiscope.so (Open MPI flavour), built if `make build` has not run."""
    lib = REPO / "build" / "interposer" / "openmpi" / "libmpiscope.so"
    if not lib.exists():
        subprocess.run(["make", "-C", str(REPO), "interposer-openmpi"], check=True,
                       capture_output=True)
    return mpijobs.interposer_lib()


class Programs:
    """Compiles programs/<name> on first use; `programs["p2p.c"]` is the executable."""

    def __init__(self, into: Path) -> None:
        self.into = into
        self.built: dict[str, Path] = {}

    def __getitem__(self, source: str) -> Path:
        if source not in self.built:
            self.built[source] = mpijobs.build(source, self.into)
        return self.built[source]


@pytest.fixture(scope="session")
def programs(tmp_path_factory: pytest.TempPathFactory, interposer: str) -> Programs:
    return Programs(tmp_path_factory.mktemp("programs"))
