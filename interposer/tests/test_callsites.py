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


def test_thousands_of_call_sites(tmp_path: Path, interposer) -> None:
    """4000 distinct MPI call sites: the trace is written (the call sites' objects once
    overflowed the anchor file, and MPI_Finalize lost the whole trace), every site named
    by its line."""
    n = 4000
    src = tmp_path / "many.c"
    src.write_text("\n".join(["#include <mpi.h>", "int main(int c, char **v) {",
                              "MPI_Init(&c, &v);", *["MPI_Barrier(MPI_COMM_SELF);"] * n,
                              "MPI_Finalize();", "return 0; }"]) + "\n")
    sh([*MPICC, "-o", "many", str(src)], tmp_path)
    job = mpijobs.run([str(tmp_path / "many")], np=2, out=tmp_path / "out")
    assert job.returncode == 0 and "mpiscope:" not in job.stderr, job.stderr
    defs = sh(["otf2-print", "-G", str(tmp_path / "out" / "traces.otf2")], tmp_path)
    lines = {int(m.group(1)) for m in re.finditer(
        r'^SOURCE_CODE_LOCATION\s+\d+\s+File: "[^"]*many\.c" <\d+>, Line Number: (\d+)$',
        defs, re.M)}
    assert set(range(4, 4 + n)) <= lines
