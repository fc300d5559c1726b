"""Call sites named on binaries without debug info: function+0xOFFSET from .dynsym or
.symtab (C++ and Fortran module procedures demangled), file:line from DWARF, and
file:line after `mpiscope symbolize` once a separate debug file (build-id) is there.
Asserted on what the user sees: the call sites of `mpiscope analyze --json`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mpiscope_testing import mpijobs
from mpiscope_testing.scenarios import analyze_json

NOG = ["mpicc", "-O0", "-Wall", "-Wextra"]  # no -g: no DWARF


def sh(cmd: list[str], cwd: Path) -> str:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    assert proc.returncode == 0, f"{cmd}: {proc.stderr}"
    return proc.stdout


def build_variant(d: Path, debug: bool) -> Path:
    """libnames.so (nameslib.c) in d, with or without -g, and usenames linked to it."""
    d.mkdir()
    src = mpijobs.PROGRAMS
    sh([*NOG, *(["-g"] if debug else []), "-fPIC", "-shared", "-o", "libnames.so",
        str(src / "nameslib.c")], d)
    sh([*NOG, "-o", "usenames", str(src / "usenames.c"), "-L.", "-lnames",
        f"-Wl,-rpath,{d}"], d)
    return d


@pytest.fixture(scope="module")
def variants(tmp_path_factory, interposer) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("names")
    v = {"symtab": build_variant(root / "symtab", False),
         "dynsym": build_variant(root / "dynsym", False),
         "dwarf": build_variant(root / "dwarf", True),
         "split": build_variant(root / "split", True)}
    sh(["strip", "--strip-all", "libnames.so"], v["dynsym"])
    # the debug file where a -dbgsym package would put it, under a build-id path
    d = v["split"]
    note = sh(["readelf", "-n", "libnames.so"], d)
    build_id = re.search(r"Build ID: ([0-9a-f]+)", note).group(1)
    debug = d / "debug" / ".build-id" / build_id[:2] / f"{build_id[2:]}.debug"
    debug.parent.mkdir(parents=True)
    sh(["objcopy", "--only-keep-debug", "libnames.so", str(debug)], d)
    sh(["strip", "--strip-all", "libnames.so"], d)
    return v


def sites(trace: Path, tmp: Path) -> dict[str, set[str]]:
    """function -> the call sites `mpiscope analyze --json` names for it"""
    _, data = analyze_json(trace, tmp)
    out: dict[str, set[str]] = {}
    for row in data["callsites"]:
        out.setdefault(row["function"], set()).add(row["callsite"])
    return out


def traced(exe: Path, out: Path) -> Path:
    # call sites alone: symbolize's counts below would include call-path frames (those
    # are renamed too: test_callpath.py)
    job = mpijobs.run([str(exe)], np=2, out=out, env={"MPISCOPE_CALLPATH_DEPTH": "1"})
    assert job.returncode == 0, job.stderr
    return out


def symbol_address(lib: Path, name: str) -> int:
    for line in sh(["nm", str(lib)], lib.parent).splitlines():
        parts = line.split()
        if parts[-1] == name:
            return int(parts[0], 16)
    raise LookupError(name)


def addr2line(lib: Path, address: int) -> str:
    where = sh(["addr2line", "-e", str(lib), hex(address)], lib.parent).strip()
    return f"{Path(where.split(':')[0]).name}:{where.split(':')[1].split()[0]}"


def test_exported_functions_named_from_dynsym(variants, tmp_path) -> None:
    """No DWARF, no .symtab: the exported function by name, at the offset of the call
    (checked with addr2line on the -g twin, same code); the static one keeps
    object+offset, not the name of a neighbouring export."""
    s = sites(traced(variants["dynsym"] / "usenames", tmp_path / "t"), tmp_path)
    (allreduce,) = s["MPI_Allreduce"]
    m = re.fullmatch(r"names_allreduce\+0x([0-9a-f]+)", allreduce)
    assert m, allreduce
    twin = variants["dwarf"] / "libnames.so"
    at = symbol_address(twin, "names_allreduce") + int(m.group(1), 16)
    assert addr2line(twin, at) == mpijobs.callsite("nameslib.c", "names_allreduce")
    (barrier,) = s["MPI_Barrier"]
    assert re.fullmatch(r"libnames\.so\+0x[0-9a-f]+", barrier), barrier
    (init,) = s["MPI_Init"]
    assert re.fullmatch(r"main\+0x[0-9a-f]+", init), init  # the executable's .symtab


def test_symtab_names_static_functions(variants, tmp_path) -> None:
    s = sites(traced(variants["symtab"] / "usenames", tmp_path / "t"), tmp_path)
    (allreduce,) = s["MPI_Allreduce"]
    (barrier,) = s["MPI_Barrier"]
    assert re.fullmatch(r"names_allreduce\+0x[0-9a-f]+", allreduce), allreduce
    assert re.fullmatch(r"hidden_barrier\+0x[0-9a-f]+", barrier), barrier


def test_dwarf_gives_file_and_line(variants, tmp_path) -> None:
    s = sites(traced(variants["dwarf"] / "usenames", tmp_path / "t"), tmp_path)
    assert s["MPI_Allreduce"] == {mpijobs.callsite("nameslib.c", "names_allreduce")}
    assert s["MPI_Barrier"] == {mpijobs.callsite("nameslib.c", "hidden_barrier")}


def symbolize(trace: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mpiscope", "symbolize", str(trace)],
                          capture_output=True, text=True, env=dict(os.environ, **(env or {})))


def test_symbolize_with_build_id_debug_file(variants, tmp_path) -> None:
    """Traced before the debug file is found: .dynsym names; `mpiscope symbolize` with it
    installed gives file:line, in place, and the analysis (cached before) shows them."""
    d = variants["split"]
    trace = traced(d / "usenames", tmp_path / "t")
    before = sites(trace, tmp_path)
    assert re.fullmatch(r"names_allreduce\+0x[0-9a-f]+", *before["MPI_Allreduce"])
    nothing = symbolize(trace)
    assert nothing.returncode == 0, nothing.stderr
    assert "0 of 4 call sites named better" in nothing.stdout
    proc = symbolize(trace, {"MPISCOPE_DEBUGINFO_PATH": str(d / "debug")})
    assert proc.returncode == 0, proc.stderr
    assert "2 of 4 call sites named better" in proc.stdout
    after = sites(trace, tmp_path)
    assert after["MPI_Allreduce"] == {mpijobs.callsite("nameslib.c", "names_allreduce")}
    assert after["MPI_Barrier"] == {mpijobs.callsite("nameslib.c", "hidden_barrier")}
    assert after["MPI_Init"] == before["MPI_Init"]
    assert not (trace / ".symbolize").exists()
    again = symbolize(trace, {"MPISCOPE_DEBUGINFO_PATH": str(d / "debug")})
    assert "0 of 4 call sites named better" in again.stdout


def test_symbolize_refuses_a_directory_without_trace(tmp_path) -> None:
    proc = symbolize(tmp_path)
    assert proc.returncode != 0
    assert "no OTF2 trace" in proc.stderr


def test_cxx_method_demangled(tmp_path, interposer) -> None:
    exe = mpijobs.build("names.cpp", tmp_path, ["mpicxx", "-O0"])
    s = sites(traced(exe, tmp_path / "t"), tmp_path)
    (allreduce,) = s["MPI_Allreduce"]
    assert re.fullmatch(r"physics::Halo::exchange\(double\)\+0x[0-9a-f]+", allreduce), allreduce


def test_fortran_module_procedure_demangled(tmp_path, interposer) -> None:
    exe = mpijobs.build("f_names.f90", tmp_path, ["mpif90", "-O0"])
    s = sites(traced(exe, tmp_path / "t"), tmp_path)
    (allreduce,) = s["MPI_Allreduce"]
    assert re.fullmatch(r"comm_layer::global_sum\+0x[0-9a-f]+", allreduce), allreduce


def split_debug(exe: Path) -> Path:
    """Move exe's DWARF and symbols to a build-id debug file under exe's dir/debug; the
    directory to give MPISCOPE_DEBUGINFO_PATH."""
    build_id = re.search(r"Build ID: ([0-9a-f]+)", sh(["readelf", "-n", exe.name],
                                                      exe.parent)).group(1)
    debug = exe.parent / "debug" / ".build-id" / build_id[:2] / f"{build_id[2:]}.debug"
    debug.parent.mkdir(parents=True)
    sh(["objcopy", "--only-keep-debug", exe.name, str(debug)], exe.parent)
    sh(["strip", "--strip-all", exe.name], exe.parent)
    return exe.parent / "debug"


def test_symbolize_salvaged_per_rank_archives(tmp_path, interposer) -> None:
    """A job that exits without MPI_Finalize leaves DIR/rank<N>/ archives: each keeps its
    call sites' object+offset, and symbolize names them in every one (the executable
    itself: a PIE stripped of everything, main not exported)."""
    exe = mpijobs.build("nofinalize.c", tmp_path)
    debug = split_debug(exe)
    trace = tmp_path / "t"
    mpijobs.run([str(exe)], np=2, out=trace)  # mpirun fails the job: no MPI_Finalize
    assert not (trace / "traces.otf2").exists() and (trace / "rank1" / "traces.otf2").exists()
    before = sites(trace, tmp_path)
    assert re.fullmatch(r"nofinalize\+0x[0-9a-f]+", *before["MPI_Allreduce"])
    proc = symbolize(trace, {"MPISCOPE_DEBUGINFO_PATH": str(debug)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("call sites named better") == 2, proc.stdout
    lines = (mpijobs.PROGRAMS / "nofinalize.c").read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if "MPI_Allreduce(" in text)
    assert sites(trace, tmp_path)["MPI_Allreduce"] == {f"nofinalize.c:{line}"}


def test_symbolize_leaves_a_rebuilt_object_alone(tmp_path, interposer) -> None:
    """The offsets of an object rebuilt since the run would name other code: symbolize
    checks the build-id it recorded, keeps those call sites' names and says why."""
    d = build_variant(tmp_path / "lib", False)
    sh(["strip", "--strip-all", "libnames.so"], d)
    trace = traced(d / "usenames", tmp_path / "t")
    before = sites(trace, tmp_path)
    sh([*NOG, "-g", "-fPIC", "-shared", "-Wl,--build-id=0x0123456789abcdef", "-o",
        "libnames.so", str(mpijobs.PROGRAMS / "nameslib.c")], d)
    proc = symbolize(trace)
    assert proc.returncode == 0, proc.stderr
    assert "0 of 4 call sites named better" in proc.stdout
    assert proc.stderr.count("was rebuilt since the trace was taken") == 1, proc.stderr
    assert sites(trace, tmp_path) == before
