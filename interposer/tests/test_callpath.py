"""Call paths (MPISCOPE_CALLPATH_DEPTH): each MPI call's chain of callers, written as OTF2
CallingContext definitions and an `mpiscope:callpath` attribute on its Enter event, read
back with `otf2-print`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from mpiscope_testing import mpijobs
from mpiscope_testing import tracechecks as tc
from mpiscope_testing.traceread import otf2_print

_CTX = re.compile(r'^CALLING_CONTEXT\s+(\d+)\s+Region: "([^"]*)" <\d+>, Source code location: '
                  r'"([^"]*)" <\d+>, Parent: (?:UNDEFINED|"[^"]*" <(\d+)>)')
_ENTER = re.compile(r"^ENTER\s+(\d+)\s+\d+\s+Region: \"([^\"]+)\"")
_PATH_ATTR = re.compile(r'"mpiscope:callpath" <\d+>; CALLING_CONTEXT; "[^"]*" <(\d+)>')


@dataclass(frozen=True)
class Frame:
    function: str  # the Region's name
    where: str     # the SourceCodeLocation: file:line (file's base name) or function+0xOFF

    def __str__(self) -> str:
        return f"{self.function}@{self.where}"


def frame_where(scl: str) -> str:
    """"/abs/dir/callpath.c:12" → "callpath.c:12"; a symbol name is kept whole."""
    path, _, line = scl.rpartition(":")
    if line == "0":  # no line: a symbol or object name
        return path
    return f"{Path(path).name}:{line}" if path.startswith("/") and line.isdigit() else scl


def contexts(trace: Path) -> dict[int, list[Frame]]:
    """Every calling context's frames, innermost first, from the global definitions."""
    defs: dict[int, tuple[Frame, int | None]] = {}
    for line in otf2_print(trace, "-G").splitlines():
        if m := _CTX.match(line):
            ref, region, scl, parent = m.groups()
            defs[int(ref)] = (Frame(region, frame_where(scl)),
                              int(parent) if parent is not None else None)
    chains = {}
    for ref in defs:
        chain, at = [], ref
        while at is not None:
            frame, at = defs[at]
            chain.append(frame)
        chains[ref] = chain
    return chains


def paths_of(trace: Path, region: str) -> dict[int, set[tuple[str, ...]]]:
    """Per location, the distinct call paths (frames as `function@where`) of `region`'s
    Enter events; a call without the attribute counts as the empty path."""
    chains = contexts(trace)
    found: dict[int, set[tuple[str, ...]]] = {}
    pending: tuple[int, str] | None = None
    for line in otf2_print(trace).splitlines():
        if m := _ENTER.match(line):
            if pending and pending[1] == region:
                found.setdefault(pending[0], set()).add(())
            pending = (int(m.group(1)), m.group(2))
            continue
        if pending and "ADDITIONAL ATTRIBUTES:" in line:
            loc, name = pending
            pending = None
            if name != region:
                continue
            m = _PATH_ATTR.search(line)
            found.setdefault(loc, set()).add(
                tuple(str(f) for f in chains[int(m.group(1))]) if m else ())
        elif pending and not line.startswith(" "):
            if pending[1] == region:
                found.setdefault(pending[0], set()).add(())
            pending = None
    return found


def marked(source: str, marker: str) -> str:
    """`file:line` of the line carrying `<marker>` (CALLSITE:x or FRAME:x) in programs/."""
    lines = (mpijobs.PROGRAMS / source).read_text().splitlines()
    hits = [i + 1 for i, line in enumerate(lines) if re.search(rf"{marker}\b", line)]
    assert len(hits) == 1, f"{marker} found {len(hits)} times in {source}"
    return f"{source}:{hits[0]}"


def run_traced(exe: Path, out: Path, depth: int | None, np: int = 2) -> mpijobs.Job:
    env = {"MPISCOPE_CALLPATH_DEPTH": str(depth)} if depth is not None else {}
    job = mpijobs.run([str(exe)], np=np, out=out, env=env)
    return job


@pytest.fixture(scope="module")
def callpath_exe(programs) -> Path:
    return programs["callpath.c"]


@pytest.fixture(scope="module")
def depth4(callpath_exe, tmp_path_factory) -> tuple[mpijobs.Job, Path]:
    out = tmp_path_factory.mktemp("cp4") / "trace"
    return run_traced(callpath_exe, out, 4), out


def cp(marker: str, function: str) -> str:
    return f"{function}@{marked('callpath.c', marker)}"


def test_program_output_and_exit_code_unchanged(callpath_exe, depth4, tmp_path) -> None:
    job, _ = depth4
    bare = mpijobs.run([str(callpath_exe)], np=2, traced=False)
    assert job.returncode == bare.returncode == 3
    assert job.stdout == bare.stdout == "callpath: 9 3 1\n"


def test_depth4_chains_name_each_caller_line(depth4) -> None:
    """main → solver → comm_layer → MPI_Allreduce: the context chain names comm_layer's
    MPI line, then solver's and main's calls, each in its function's Region; the same
    call site reached from other_caller is a second path."""
    job, out = depth4
    assert job.returncode == 3, job.stderr
    t = tc.read_both(out)
    tc.check_well_formed(t, 2)
    allreduce = cp("CALLSITE:allreduce", "comm_layer")
    for rank in range(2):
        paths = paths_of(out, "MPI_Allreduce")[rank]
        assert (allreduce, cp("FRAME:solver", "solver"), cp("FRAME:main_solver", "main")) in paths
        assert (allreduce, cp("FRAME:other", "other_caller"),
                cp("FRAME:main_other", "main")) in paths
        # recursion 11 deep: cut at 4 frames, the innermost ones
        assert (allreduce, cp("FRAME:recurse_base", "recurse"),
                cp("FRAME:recurse_step", "recurse"), cp("FRAME:recurse_step", "recurse")) in paths
        assert len(paths) == 3, paths
        # called from main itself: the path ends there (no C library start-up frames)
        assert paths_of(out, "MPI_Barrier")[rank] == {(cp("CALLSITE:barrier", "main"),)}
        # the call site attribute is still the first frame's
        assert set(tc.callsites(t, rank, "MPI_Allreduce")) == {marked("callpath.c",
                                                                      "CALLSITE:allreduce")}


def test_contexts_unified_across_ranks(depth4) -> None:
    """Equal paths on both ranks are one global context: as many contexts as distinct
    (frame, parent) pairs, not twice that."""
    _, out = depth4
    chains = contexts(out)
    keys = [tuple(str(f) for f in c) for c in chains.values()]
    assert len(keys) == len(set(keys))
    # 3 Allreduce paths share their outer frames' contexts only where equal: solver path 3,
    # other path 3, recursion 4, Barrier and Finalize from main 1 each
    assert len(keys) == 3 + 3 + 4 + 1 + 1, sorted(keys)


def test_depth1_writes_no_contexts(callpath_exe, tmp_path) -> None:
    """Depth 1 is the call site alone, the trace as it was before call paths."""
    out = tmp_path / "trace"
    job = run_traced(callpath_exe, out, 1)
    assert job.returncode == 3, job.stderr
    defs = otf2_print(out, "-G")
    assert "CALLING_CONTEXT" not in defs and "mpiscope:callpath" not in defs
    assert "mpiscope:callpath" not in otf2_print(out)
    t = tc.read_both(out)
    assert set(tc.callsites(t, 0, "MPI_Allreduce")) == {marked("callpath.c",
                                                               "CALLSITE:allreduce")}


def test_depth2_cuts_every_path_at_two_frames(callpath_exe, tmp_path) -> None:
    out = tmp_path / "trace"
    job = run_traced(callpath_exe, out, 2)
    assert job.returncode == 3, job.stderr
    allreduce = cp("CALLSITE:allreduce", "comm_layer")
    assert paths_of(out, "MPI_Allreduce")[0] == {
        (allreduce, cp("FRAME:solver", "solver")),
        (allreduce, cp("FRAME:other", "other_caller")),
        (allreduce, cp("FRAME:recurse_base", "recurse")),
    }


def test_threads_get_their_own_paths(programs, tmp_path) -> None:
    """Two threads (MPI_THREAD_MULTIPLE) reach the same MPI_Sendrecv line through
    different workers: each thread's location has exactly its worker's path."""
    exe = programs["cp_threads.c"]
    out = tmp_path / "trace"
    job = run_traced(exe, out, 4)
    assert job.returncode == 0, job.stderr
    site = f"exchange@{marked('cp_threads.c', 'CALLSITE:sendrecv')}"
    a = (site, f"worker_a@{marked('cp_threads.c', 'FRAME:worker_a')}")
    b = (site, f"worker_b@{marked('cp_threads.c', 'FRAME:worker_b')}")
    per_loc = paths_of(out, "MPI_Sendrecv")
    threads = {loc: paths for loc, paths in per_loc.items()}
    assert sorted(map(sorted, threads.values())) == sorted([[a], [b]] * 2), threads


def test_cxx_frames_are_demangled(tmp_path) -> None:
    exe = mpijobs.build("cp_layers.cpp", tmp_path, ["mpicxx", "-O0"])
    out = tmp_path / "trace"
    job = run_traced(exe, out, 4)
    assert job.returncode == 0, job.stderr
    (path,) = paths_of(out, "MPI_Allreduce")[0]
    functions = [f.split("@")[0] for f in path]
    assert functions == ["physics::Halo::exchange(double)", "physics::Solver::step(double)",
                         "main"], path
    # no DWARF: each frame is function+0xOFFSET
    assert re.fullmatch(r"physics::Halo::exchange\(double\)\+0x[0-9a-f]+", path[0].split("@")[1])


def test_fortran_module_procedures_are_named(tmp_path) -> None:
    exe = mpijobs.build("f_cp_layers.f90", tmp_path,
                        ["mpif90", "-O0", "-ffree-line-length-none"])
    out = tmp_path / "trace"
    job = run_traced(exe, out, 4)
    bare = mpijobs.run([str(exe)], np=2, traced=False)
    assert job.returncode == bare.returncode == 0, job.stderr
    assert job.stdout == bare.stdout
    (path,) = paths_of(out, "MPI_Allreduce")[0]
    functions = [f.split("@")[0] for f in path]
    # the Fortran program's main is MAIN__, called by C main: both are the program's frames
    assert functions[:3] == ["comm_mod::global_sum", "solver_mod::step", "MAIN__"], path
    assert not any("libmpi" in f or "mps_" in f for f in path), path


def test_salvaged_archive_keeps_paths(programs, tmp_path) -> None:
    """A rank that exits without MPI_Finalize writes its own archive: with its paths."""
    exe = programs["nofinalize.c"]
    out = tmp_path / "trace"
    run_traced(exe, out, 4)  # mpirun fails the job: no MPI_Finalize
    for rank in range(2):
        archive = out / f"rank{rank}"
        site = f"main@{marked('nofinalize.c', 'MPI_Allreduce')}"
        assert paths_of(archive, "MPI_Allreduce") == {rank: {(site,)}}


def test_symbolize_renames_frames(tmp_path) -> None:
    """Traced stripped (frames are `callpath+0xOFF`), named `callpath.c:LINE` by
    `mpiscope symbolize` once the build-id debug file is found."""
    exe = mpijobs.build("callpath.c", tmp_path)
    build_id = re.search(r"Build ID: ([0-9a-f]+)", subprocess.run(
        ["readelf", "-n", str(exe)], capture_output=True, text=True, check=True).stdout).group(1)
    debug = tmp_path / "debug" / ".build-id" / build_id[:2] / f"{build_id[2:]}.debug"
    debug.parent.mkdir(parents=True)
    subprocess.run(["objcopy", "--only-keep-debug", str(exe), str(debug)], check=True)
    subprocess.run(["strip", "--strip-all", str(exe)], check=True)
    out = tmp_path / "trace"
    assert run_traced(exe, out, 4).returncode == 3
    solver_path = {p for p in paths_of(out, "MPI_Allreduce")[0] if len(p) == 3}
    assert all(re.fullmatch(r"callpath\+0x[0-9a-f]+@callpath\+0x[0-9a-f]+", f)
               for p in solver_path for f in p), solver_path
    proc = subprocess.run([sys.executable, "-m", "mpiscope", "symbolize", str(out)],
                          capture_output=True, text=True,
                          env={**os.environ, "MPISCOPE_DEBUGINFO_PATH": str(tmp_path / "debug")})
    assert proc.returncode == 0, proc.stderr
    wheres = {tuple(f.split("@")[1] for f in p) for p in paths_of(out, "MPI_Allreduce")[0]}
    assert (marked("callpath.c", "CALLSITE:allreduce"), marked("callpath.c", "FRAME:solver"),
            marked("callpath.c", "FRAME:main_solver")) in wheres, wheres


def test_bad_depth_warns_once_and_uses_default(callpath_exe, tmp_path) -> None:
    out = tmp_path / "trace"
    job = mpijobs.run([str(callpath_exe)], np=2, out=out,
                      env={"MPISCOPE_CALLPATH_DEPTH": "deep"})
    assert job.returncode == 3
    assert job.stderr.count("mpiscope: warning: MPISCOPE_CALLPATH_DEPTH=deep is not a number "
                            "of frames (1..64); using 4") == 1, job.stderr
    # the default depth, 4: the recursion's path is cut there
    assert max(len(p) for p in paths_of(out, "MPI_Allreduce")[0]) == 4
