"""mpi4py's own unit tests (from the sdist of the installed mpi4py) as a conformance suite
for the interposer: run under mpiexec untraced and traced, each rank writing every test
id's outcome to a file of its own, so the two runs can be compared test by test.

`python -m mpiscope_testing.mpi4py_suite TESTDIR OUTPREFIX MODULE...` is what each rank
runs; `sdist_tests()` finds (or fetches) the sdist's `test/` directory.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tarfile
import unittest
from pathlib import Path

from mpiscope_testing import REPO

CACHE = REPO / "build" / "mpi4py-sdist"
SIMPLE = "https://pypi.org/simple/mpi4py/"


def installed_version() -> str:
    from importlib.metadata import version

    return version("mpi4py")


def sdist_tests(version: str | None = None) -> Path:
    """`test/` of mpi4py's sdist for `version` (the installed one by default), unpacked
    under build/; fetched from PyPI (checked against the index's sha256) when missing."""
    version = version or installed_version()
    root = CACHE / f"mpi4py-{version}"
    if (root / "test" / "main.py").is_file():
        return root / "test"
    CACHE.mkdir(parents=True, exist_ok=True)
    archive = CACHE / f"mpi4py-{version}.tar.gz"
    if not archive.is_file():
        index = subprocess.run(["curl", "-sSfL", "-m", "120", SIMPLE], capture_output=True,
                               text=True, check=True).stdout
        m = re.search(rf'href="([^"#]*mpi4py-{re.escape(version)}\.tar\.gz)#sha256=(\w+)"',
                      index)
        if not m:
            raise RuntimeError(f"mpi4py {version}: no sdist on {SIMPLE}")
        part = archive.with_suffix(".part")
        subprocess.run(["curl", "-sSfL", "-m", "300", "-o", str(part), m[1]], check=True)
        if hashlib.sha256(part.read_bytes()).hexdigest() != m[2]:
            part.unlink()
            raise RuntimeError(f"mpi4py {version}: sdist checksum mismatch")
        part.rename(archive)
    with tarfile.open(archive) as tar:
        members = [t for t in tar.getmembers()
                   if t.name.startswith(f"mpi4py-{version}/test/") and t.isfile()]
        tar.extractall(CACHE, members=members, filter="data")
    return root / "test"


class _Outcomes(unittest.TestResult):
    """Each test id's outcome: ok, fail, error, skip (expected failures: xfail)."""

    def __init__(self) -> None:
        super().__init__()
        self.outcome: dict[str, str] = {}

    def addSuccess(self, test) -> None:  # noqa: N802 - unittest's API
        self.outcome[test.id()] = "ok"

    def addFailure(self, test, err) -> None:  # noqa: N802
        self.outcome[test.id()] = "fail"

    def addError(self, test, err) -> None:  # noqa: N802
        self.outcome[test.id()] = "error"

    def addSkip(self, test, reason) -> None:  # noqa: N802
        self.outcome[test.id()] = "skip"

    def addExpectedFailure(self, test, err) -> None:  # noqa: N802
        self.outcome[test.id()] = "xfail"

    def addUnexpectedSuccess(self, test) -> None:  # noqa: N802
        self.outcome[test.id()] = "xpass"


def run(testdir: Path, out_prefix: str, modules: list[str]) -> None:
    sys.path.insert(0, str(testdir))
    from mpi4py import MPI

    rank = MPI.COMM_WORLD.Get_rank()
    out = Path(f"{out_prefix}.{rank}")
    suite = unittest.defaultTestLoader.loadTestsFromNames(modules)
    result = _Outcomes()
    with out.open("w") as f:
        # written as each test ends: a crash leaves the outcomes up to it, and the last
        # line names the test it died in
        def started(test, _f=f) -> None:
            _f.write(f"start {test.id()}\n")
            _f.flush()

        result.startTest = lambda test: (started(test), unittest.TestResult.startTest(result, test))
        stop = result.stopTest

        def stopped(test) -> None:
            f.write(f"{result.outcome.get(test.id(), 'error')} {test.id()}\n")
            f.flush()
            stop(test)

        result.stopTest = stopped
        suite.run(result)


def outcomes(path: Path) -> tuple[dict[str, str], str | None]:
    """A rank's outcomes, and the test it was in when it died (None: it finished)."""
    done: dict[str, str] = {}
    current = None
    for line in path.read_text().splitlines():
        kind, test = line.split(" ", 1)
        if kind == "start":
            current = test
        else:
            done[test] = kind
            current = None
    return done, current


if __name__ == "__main__":
    run(Path(sys.argv[1]), sys.argv[2], sys.argv[3:])
