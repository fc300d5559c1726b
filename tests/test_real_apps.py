"""Real MPI applications we did not write, from Debian's archive, traced as a user would:
`mpiscope run -- mpirun -np 2 APP`, then `mpiscope analyze --json`.

- LAMMPS (`lammps`): C++ molecular dynamics; its work is in liblammps.so.0, which has no
  DWARF but exports its symbols. Input: a small Lennard-Jones melt (apps/in.melt).
- MUMPS (`mumps-test`): the Fortran direct solver's example driver dsimpletest; the solver
  is libdmumps (Fortran, exported symbols, module procedures `__mod_MOD_proc`). Input: a
  2-D Laplacian on a 14x14 grid whose solution is 1..196 (apps/laplace14.mumps).
  (CP2K was the first choice for the Fortran code, but Debian's cp2k.psmp is a stripped
  executable without a dynamic symbol table for its own code: its call sites can only be
  named with cp2k-dbgsym, from Debian's debug archive, which this suite cannot reach.)

`make test` installs both with scripts/setup-apps.sh; a plain `pytest` skips them when
they are missing (and fails under CI, where the set-up step must have run).

Each application must print the same scientific output and exit the same way traced and
untraced, and its trace must name the application's call sites by function (no
`object+0xOFF` where the object's symbol table covers the address).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from mpiscope.jobs.mpirun import launcher

APPS = Path(__file__).parent / "apps"
RANKS = 2
TIMEOUT = 120
SETUP = "scripts/setup-apps.sh"


@dataclass
class AppRun:
    plain: subprocess.CompletedProcess
    traced: subprocess.CompletedProcess
    analysis: dict
    trace: Path


def need(program: str) -> str:
    path = shutil.which(program) or (program if os.access(program, os.X_OK) else None)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"{program} is missing: `make test` runs {SETUP} before pytest")
        pytest.skip(f"{program} is not installed (bash {SETUP} installs it)")
    return path


def run_app(tmp: Path, cmd: list[str], stdin: Path | None, *analyze_args: str) -> AppRun:
    """The application untraced, then traced with `mpiscope run`, in fresh directories
    (both write files into their working directory), and the traced run's analysis."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("LD_PRELOAD", None)
    env.pop("MPISCOPE_OUT", None)
    job = [*launcher(RANKS), *cmd]

    def go(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
        cwd.mkdir()
        with open(stdin or os.devnull, "rb") as inp:
            return subprocess.run(args, stdin=inp, cwd=cwd, env=env, capture_output=True,
                                  text=True, timeout=TIMEOUT)

    plain = go(job, tmp / "plain")
    trace = tmp / "trace"
    traced = go(["mpiscope", "run", "--out", str(trace), "--", *job], tmp / "traced")
    out = tmp / "analysis.json"
    ana = subprocess.run(["mpiscope", "analyze", str(trace), "--json", str(out), *analyze_args],
                         capture_output=True, text=True, timeout=TIMEOUT)
    assert ana.returncode == 0, ana.stderr
    return AppRun(plain, traced, json.loads(out.read_text()), trace)


def library(package: str, soname: str) -> Path:
    """Where `package` installed the shared object `soname`."""
    files = subprocess.run(["dpkg", "-L", package], capture_output=True, text=True,
                           check=True).stdout.split()
    return next(Path(f) for f in files if Path(f).name == soname)


def covered(lib: Path, offset: int) -> str | None:
    """The exported function of `lib` whose bytes contain `offset`, if any (nm -D -S)."""
    nm = subprocess.run(["nm", "-D", "-S", "--defined-only", str(lib)], capture_output=True,
                        text=True, check=True).stdout
    for line in nm.splitlines():
        f = line.split()
        if len(f) == 4 and f[2] in "TtWi":
            start, size = int(f[0], 16), int(f[1], 16)
            if start <= offset < start + size:
                return f[3]
    return None


def assert_named(run: AppRun, libs: list[Path]) -> list[str]:
    """Every call site in `libs` is `function+0xOFF` (or file:line), except where no
    exported symbol covers the address; returns the app's named call sites."""
    sites = {c["callsite"] for c in run.analysis["callsites"]}
    named = []
    for lib in libs:
        prefix = f"{lib.name}+0x"
        for s in sorted(sites):
            if s.startswith(prefix):
                off = int(s[len(prefix):], 16)
                assert covered(lib, off) is None, \
                    f"{s} is in exported function {covered(lib, off)} but was not named"
    for s in sites:
        if not any(s.startswith(f"{lib.name}+0x") for lib in libs):
            named.append(s)
    return named


def callpaths(run: AppRun) -> list[list[str]]:
    """The findings' call paths; skips when the trace has none deeper than one frame
    (a build of mpiscope without call paths: MPISCOPE_CALLPATH_DEPTH, OTF2 calling
    contexts written by the interposer and read by the analyzer)."""
    paths = [f.get("callpath") for f in run.analysis["findings"]]
    paths += [c.get("callpath") for c in run.analysis["callsites"]]
    if not any(p and len(p) >= 2 for p in paths):
        pytest.skip("no call paths in the trace: needs the interposer's OTF2 calling contexts "
                    "(MPISCOPE_CALLPATH_DEPTH) and the analyzer's `callpath` (branches "
                    "wt-cpint and wt-cpana)")
    return [p for p in paths if p]


# ------------------------------------------------------------------------ LAMMPS

@pytest.fixture(scope="module")
def lammps(tmp_path_factory: pytest.TempPathFactory) -> AppRun:
    lmp = need("lmp")
    return run_app(tmp_path_factory.mktemp("lammps"),
                   [lmp, "-in", str(APPS / "in.melt"), "-log", "none"], None)


def thermo(stdout: str) -> list[str]:
    """LAMMPS's thermodynamic output: the table from `Step` to `Loop time` (exclusive),
    and the atom and neighbour counts; not the timings."""
    table = re.search(r"^\s*Step .*?(?=^Loop time)", stdout, re.S | re.M)
    assert table, f"no thermo table in:\n{stdout[-2000:]}"
    counts = re.findall(r"^(?:Total # of neighbors|Ave neighs/atom|Neighbor list builds)"
                        r" = .*$", stdout, re.M)
    return table[0].splitlines() + counts


def test_lammps_prints_the_same_thermo_output_traced(lammps: AppRun) -> None:
    assert lammps.plain.returncode == 0, lammps.plain.stderr[-2000:]
    assert lammps.traced.returncode == lammps.plain.returncode, lammps.traced.stderr[-2000:]
    assert len(thermo(lammps.plain.stdout)) >= 7  # header + steps 0, 20, .., 100 + counts
    assert thermo(lammps.traced.stdout) == thermo(lammps.plain.stdout)


def test_lammps_call_sites_name_its_functions(lammps: AppRun) -> None:
    lib = library("liblammps0", "liblammps.so.0")
    named = assert_named(lammps, [lib])
    # the halo exchanges and the thermo reductions, by their C++ names
    assert any(s.startswith("LAMMPS_NS::CommBrick::forward_comm(") for s in named), named
    assert any(s.startswith("LAMMPS_NS::CommBrick::reverse_comm()") for s in named), named
    assert any(s.startswith("LAMMPS_NS::Thermo::") or s.startswith("LAMMPS_NS::Compute")
               for s in named), named
    sends = [c for c in lammps.analysis["callsites"] if c["function"] == "MPI_Send"]
    assert sends and all(c["callsite"].startswith("LAMMPS_NS::") for c in sends), sends


def test_lammps_call_paths_reach_past_its_comm_layer(lammps: AppRun) -> None:
    paths = callpaths(lammps)
    comm = [p for p in paths if p[0].startswith("LAMMPS_NS::Comm")]
    assert comm, paths
    # the halo exchange is reached from the integrator/neighbour code, not only from Comm
    assert any(len(p) >= 2 and any(f.startswith("LAMMPS_NS::") and
                                   not f.startswith("LAMMPS_NS::Comm") for f in p[1:])
               for p in comm), comm
    findings = lammps.analysis["findings"]
    assert findings
    assert any(not f["callsite"].startswith("LAMMPS_NS::Comm") for f in findings), findings


# ------------------------------------------------------------------------- MUMPS

DSIMPLETEST = "/usr/lib/mumps/dsimpletest"


@pytest.fixture(scope="module")
def mumps(tmp_path_factory: pytest.TempPathFactory) -> AppRun:
    exe = need(DSIMPLETEST)
    return run_app(tmp_path_factory.mktemp("mumps"), [exe], APPS / "laplace14.mumps")


def solution(stdout: str) -> list[float]:
    """dsimpletest's solution vector (printed by the host after the solve)."""
    m = re.search(r"Solution is\s+(.*?)(?:\n\s*\n|\Z)", stdout, re.S)
    assert m, f"no solution in:\n{stdout[-2000:]}"
    return [float(x.replace("D", "E")) for x in m[1].split()]


def statistics(stdout: str) -> list[str]:
    """MUMPS's INFOG/RINFOG lines (sizes, operation counts, pivots): exact, not timings."""
    return re.findall(r"^\s*(?:INFOG|RINFOG|-+\s*\(\d+\)).*$", stdout, re.M)


def test_mumps_solves_the_same_system_traced(mumps: AppRun) -> None:
    assert mumps.plain.returncode == 0, mumps.plain.stderr[-2000:]
    assert mumps.traced.returncode == mumps.plain.returncode, mumps.traced.stderr[-2000:]
    x = solution(mumps.plain.stdout)
    assert len(x) == 196 and all(abs(v - (i + 1)) < 1e-9 for i, v in enumerate(x)), x
    assert solution(mumps.traced.stdout) == x  # bit for bit: same ranks, same order
    assert statistics(mumps.traced.stdout) == statistics(mumps.plain.stdout)
    assert len(statistics(mumps.plain.stdout)) > 10


def test_mumps_call_sites_name_its_fortran_procedures(mumps: AppRun) -> None:
    libs = [library("libmumps-5.5", "libdmumps-5.5.so"),
            library("libmumps-5.5", "libmumps_common-5.5.so")]
    named = assert_named(mumps, libs)
    # Fortran external procedures as exported, module procedures as mod::proc
    assert any(s.startswith("dmumps_fac_driver_+0x") for s in named), named
    assert any(s.startswith("dmumps_buf::dmumps_buf_send_") for s in named), named
    assert not any("_MOD_" in s for s in named), named


def test_mumps_call_paths_reach_its_drivers(mumps: AppRun) -> None:
    paths = callpaths(mumps)
    # MUMPS's own reduction helpers call MPI for the drivers: the path shows the driver
    helpers = [p for p in paths if re.match(r"mumps_\w*reduce\w*_\+0x|mumps_propinfo_\+0x", p[0])]
    assert helpers, paths
    assert all(len(p) >= 2 and re.match(r"d?mumps_[\w:]+\+0x", p[1]) for p in helpers), helpers
    assert any(not re.match(r"mumps_\w*reduce\w*_\+0x|mumps_propinfo_\+0x", f["callsite"])
               for f in mumps.analysis["findings"]), mumps.analysis["findings"]
