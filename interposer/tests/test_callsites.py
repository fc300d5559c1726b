"""Call sites in a PIE executable and in a shared library, with and without debug info."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from mpiscope_testing import mpijobs
from mpiscope_testing import tracechecks as tc
from mpiscope_testing.traceread import Trace

MPICC = ["mpicc", "-g", "-O0"]


def sh(cmd: list[str], cwd: Path) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    assert proc.returncode == 0, f"{cmd}: {proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory, interposer) -> Path:
    d = tmp_path_factory.mktemp("callsites")
    src = mpijobs.PROGRAMS
    sh([*MPICC, "-fPIC", "-shared", "-o", "libcall.so", str(src / "libcall.c")], d)
    sh([*MPICC, "-o", "uselib", str(src / "uselib.c"), "-L.", "-lcall",
        f"-Wl,-rpath,{d}"], d)
    sh(["objcopy", "--strip-all", "uselib", "uselib-stripped"], d)
    return d


def trace_of(exe: Path, out: Path) -> Trace:
    job = mpijobs.run([str(exe)], np=2, out=out)
    assert job.returncode == 0, job.stderr
    t = tc.read_both(out)
    tc.check_structure(t)
    return t


def test_executable_is_pie(built: Path) -> None:
    header = (built / "uselib").read_bytes()[:18]
    assert header[:4] == b"\x7fELF" and int.from_bytes(header[16:18], "little") == 3  # ET_DYN


def test_debug_info_gives_file_and_line_in_exe_and_library(built: Path, tmp_path) -> None:
    t = trace_of(built / "uselib", tmp_path / "trace")
    for r in range(2):
        assert tc.callsites(t, r, "MPI_Allreduce") == [mpijobs.callsite("libcall.c",
                                                                        "lib_allreduce")]
        assert tc.callsites(t, r, "MPI_Barrier") == [mpijobs.callsite("uselib.c",
                                                                      "main_barrier")]


def test_without_debug_info_object_plus_offset(built: Path, tmp_path) -> None:
    """The stripped executable (no DWARF, no .symtab, main not exported) yields
    `uselib-stripped+0xOFFSET`; that offset, given to addr2line with the unstripped twin
    (same code), is the line of the call."""
    t = trace_of(built / "uselib-stripped", tmp_path / "trace")
    for r in range(2):
        (site,) = tc.callsites(t, r, "MPI_Barrier")
        m = re.fullmatch(r"uselib-stripped\+0x([0-9a-f]+):0", site)
        assert m, site
        where = sh(["addr2line", "-e", "uselib", f"0x{m.group(1)}"], built).strip()
        assert Path(where).name == mpijobs.callsite("uselib.c", "main_barrier"), (
            f"{site} resolves to {where}")
        # the library still has debug info: its call site keeps file:line
        assert tc.callsites(t, r, "MPI_Allreduce") == [mpijobs.callsite("libcall.c",
                                                                        "lib_allreduce")]
