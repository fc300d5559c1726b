"""mpi4py programs: each MPI call's call site is the Python line that called mpi4py
(python.c), not the C call inside mpi4py's extension module that all of them share.
Asserted on what the user sees: `mpiscope analyze --json`'s call sites."""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from mpiscope_testing import mpijobs
from mpiscope_testing.scenarios import analyze_json

PROG = "mpi4py_callsites.py"
PYTHON_311 = sys.version_info[:2] == (3, 11)  # the CPython whose frames python.c reads


@pytest.fixture(scope="module", params=["4", "1"], ids=["depth4", "depth1"])
def job(request, tmp_path_factory, interposer) -> tuple[mpijobs.Job, mpijobs.Job, dict]:
    """The program untraced and traced, with call paths of 4 frames (the default) and
    without (MPISCOPE_CALLPATH_DEPTH=1)."""
    pytest.importorskip("mpi4py")
    tmp = tmp_path_factory.mktemp("mpi4py")
    cmd = [sys.executable, str(mpijobs.PROGRAMS / PROG)]
    plain = mpijobs.run(cmd, np=2, traced=False)
    traced = mpijobs.run(cmd, np=2, out=tmp / "trace",
                         env={"MPISCOPE_CALLPATH_DEPTH": request.param})
    assert traced.returncode == 0, traced.stderr
    _, analysis = analyze_json(tmp / "trace", tmp)
    analysis["depth"] = int(request.param)
    return plain, traced, analysis


def sites(analysis: dict, function: str) -> set[str]:
    return {c["callsite"] for c in analysis["callsites"] if c["function"] == function}


def test_the_program_prints_the_same_traced(job) -> None:
    plain, traced, _ = job
    assert plain.returncode == traced.returncode == 0
    # the ranks' lines, in rank order (two ranks' prints may share a line of mpirun's output)
    ranks = sorted(re.findall(r"rank \d+: total \d+ sum \d+", plain.stdout))
    assert len(ranks) == 2
    assert sorted(re.findall(r"rank \d+: total \d+ sum \d+", traced.stdout)) == ranks
    assert "total 210 sum 400" in plain.stdout


@pytest.mark.skipif(not PYTHON_311, reason="python.c reads CPython 3.11's frames only")
def test_each_python_line_is_its_own_call_site(job) -> None:
    _, _, analysis = job
    at = {m: mpijobs.callsite(PROG, m) for m in
          ("import", "send", "recv0", "recv1", "send1", "barrier-loop", "barrier-end",
           "allreduce")}
    # the same mpi4py method (comm.send) from two lines: two call sites, by line
    assert sites(analysis, "MPI_Send") >= {at["send"], at["send1"]}
    # comm.recv probes and receives a matched message: both at the recv's line
    assert sites(analysis, "MPI_Mprobe") == {at["recv0"], at["recv1"]}
    assert sites(analysis, "MPI_Mrecv") == {at["recv0"], at["recv1"]}
    assert sites(analysis, "MPI_Barrier") == {at["barrier-loop"], at["barrier-end"]}
    loop = next(c for c in analysis["callsites"]
                if c["function"] == "MPI_Barrier" and c["callsite"] == at["barrier-loop"])
    assert loop["calls"] == 2 * 20  # every call of the loop at the loop's line
    # MPI_Init_thread runs in `from mpi4py import MPI`: the import line, not importlib's
    assert sites(analysis, "MPI_Init_thread") == {at["import"]}
    # comm.allreduce (lowercase, pickled objects) is built from several MPI calls
    assert at["allreduce"] in sites(analysis, "MPI_Comm_dup") | sites(analysis, "MPI_Bcast")
    # no call of the program is left at mpi4py's C code, but for those Python
    # did not make: MPI_Finalize at interpreter exit, communicator clean-up
    at_c = {c["callsite"] for c in analysis["callsites"]
            if c["function"] not in ("MPI_Finalize", "MPI_Comm_free")}
    assert all(s.startswith(PROG + ":") for s in at_c), at_c


@pytest.mark.skipif(not PYTHON_311, reason="python.c reads CPython 3.11's frames only")
def test_call_paths_are_the_python_lines_outwards(job) -> None:
    """At depth > 1 the call path's frames are the Python lines, innermost first: comm.send
    in exchange() is reached from the loop's call of exchange()."""
    _, _, analysis = job
    send, loop = mpijobs.callsite(PROG, "send"), mpijobs.callsite(PROG, "exchange")
    row = next(c for c in analysis["callsites"]
               if c["function"] == "MPI_Send" and c["callsite"] == send)
    if analysis["depth"] == 1:
        assert row["callpath"] == [send]
    else:
        assert row["callpath"] == [send, loop]  # the module level is the outermost frame
    barrier = mpijobs.callsite(PROG, "barrier-loop")
    assert next(c["callpath"] for c in analysis["callsites"]
                if c["callsite"] == barrier) == [barrier]


@pytest.mark.skipif(not PYTHON_311, reason="python.c reads CPython 3.11's frames only")
def test_python_c_knows_this_cpython_s_frame_layout(tmp_path: Path) -> None:
    """python.c's offsets are CPython 3.11's: compare them with CPython's own headers."""
    inc = Path(sysconfig.get_paths()["include"])
    if not (inc / "internal" / "pycore_frame.h").exists():
        pytest.skip("CPython's internal headers are not installed")
    src = tmp_path / "offsets.c"
    src.write_text("""
#define Py_BUILD_CORE 1
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include "internal/pycore_frame.h"
int main(void) {
    printf("PY311_TSTATE_CFRAME %zu\\n", offsetof(PyThreadState, cframe));
    printf("PY311_CFRAME_CURRENT %zu\\n", offsetof(_PyCFrame, current_frame));
    printf("PY311_FRAME_CODE %zu\\n", offsetof(_PyInterpreterFrame, f_code));
    printf("PY311_FRAME_PREVIOUS %zu\\n", offsetof(_PyInterpreterFrame, previous));
    printf("PY311_FRAME_PREV_INSTR %zu\\n", offsetof(_PyInterpreterFrame, prev_instr));
    printf("PY311_CODE_FILENAME %zu\\n", offsetof(PyCodeObject, co_filename));
    printf("PY311_CODE_QUALNAME %zu\\n", offsetof(PyCodeObject, co_qualname));
    printf("PY311_CODE_BYTECODE %zu\\n", offsetof(PyCodeObject, co_code_adaptive));
    printf("PY311_STR_STATE %zu\\n", offsetof(PyASCIIObject, state));
    printf("PY311_STR_ASCII_DATA %zu\\n", sizeof(PyASCIIObject));
    return 0;
}
""")
    exe = tmp_path / "offsets"
    subprocess.run(["cc", f"-I{inc}", f"-I{inc / 'internal'}", "-o", str(exe), str(src)],
                   check=True, capture_output=True)
    want = dict(line.split() for line in subprocess.run(
        [str(exe)], check=True, capture_output=True, text=True).stdout.splitlines())
    code = (mpijobs.PROGRAMS.parent.parent / "src" / "python.c").read_text()
    have = {}
    for line in code.splitlines():
        f = line.split()
        if len(f) >= 3 and f[0] == "#define" and f[1].startswith("PY311_"):
            have[f[1]] = f[2]
    assert have == want
