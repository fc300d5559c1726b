"""Real MPI applications we did not write, from Debian's archive, traced as a user would:
`mpiscope run -- mpirun -np 2 APP`, then `mpiscope analyze --json`.

- LAMMPS (`lammps`): C++ molecular dynamics; its work is in liblammps.so.0, which has no
  DWARF but exports its symbols. Input: a small Lennard-Jones melt (apps/in.melt).
- hpcc (`hpcc`): the HPC Challenge benchmarks (HPL, PTRANS, FFT, RandomAccess, PingPong
  latency and bandwidth), a stripped C executable; input: Debian's example hpccinf.txt made
  tiny, written by the test. At 4 ranks too, for the oversubscription warning.
- MUMPS (`mumps-test`): the Fortran direct solver's example driver dsimpletest; the solver
  is libdmumps (Fortran, exported symbols, module procedures `__mod_MOD_proc`). Input: a
  2-D Laplacian on a 14x14 grid whose solution is 1..196 (apps/laplace14.mumps).
  (CP2K was the first choice for the Fortran code, but Debian's cp2k.psmp is a stripped
  executable without a dynamic symbol table for its own code: its call sites can only be
  named with cp2k-dbgsym, from Debian's debug archive, which this suite cannot reach.)

`make test` installs them with scripts/setup-apps.sh; a plain `pytest` skips them when
they are missing (and fails under CI, where the set-up step must have run).

Each application must print the same scientific output and exit the same way traced and
untraced, and its trace must name the application's call sites by function (no
`object+0xOFF` where the object's symbol table covers the address), with call paths that
reach past the application's own MPI layer (LAMMPS's Comm classes, MUMPS's reduction
helpers) into its code, and findings named there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from mpiscope.jobs.mpirun import launcher

APPS = Path(__file__).parent / "apps"
RANKS = 2
TIMEOUT = 600  # a run or analysis of a real app on a busy 2-core machine; a hang fails
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


def run_app(tmp: Path, cmd: list[str], stdin: Path | None, *analyze_args: str,
            ranks: int = RANKS, files: dict[str, str] | None = None,
            plain_too: bool = True) -> AppRun:
    """The application untraced (unless not `plain_too`), then traced with `mpiscope
    run`, in fresh directories (both write files into their working directory; `files`
    are written there first: an input the application reads from it), and the traced
    run's analysis."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("LD_PRELOAD", None)
    env.pop("MPISCOPE_OUT", None)
    job = [*launcher(ranks), *cmd]

    def go(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
        cwd.mkdir()
        for name, text in (files or {}).items():
            (cwd / name).write_text(text)
        with open(stdin or os.devnull, "rb") as inp:
            return subprocess.run(args, stdin=inp, cwd=cwd, env=env, capture_output=True,
                                  text=True, timeout=TIMEOUT)

    plain = go(job, tmp / "plain") if plain_too else subprocess.CompletedProcess(job, 0)
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
    """The call paths of the findings and call-site rows (MPISCOPE_CALLPATH_DEPTH's
    default, OTF2 calling contexts read back by the analyzer)."""
    # (a finding of the whole run, descheduled, has no path)
    paths = [f["callpath"] for f in run.analysis["findings"] if f["callpath"]]
    paths += [c["callpath"] for c in run.analysis["callsites"]]
    assert any(len(p) >= 2 for p in paths), "no call path deeper than the call site"
    return paths


def barriers_after_collectives(trace: Path) -> dict[str, int]:
    """The contract's redundant barriers, found from the trace's calls: call sites (as the
    analysis names them) of MPI_Barrier every call of which, on every rank, directly
    follows a synchronizing collective on the same communicator with no MPI call in
    between; each with its calls per rank. Which calls a program makes in what order is
    the program's, not the run's timing."""
    import mpiscope
    from mpiscope.analysis.findings import SYNCHRONIZING

    t = mpiscope.analyze(mpiscope.load(trace)).trace
    if t.meta.filtered:  # calls left out: nothing is known to be back to back
        return {}
    calls = t.calls[t.calls["depth"] == 0].sort_values(["rank", "start"])
    prev = calls.groupby("rank")[["function", "comm"]].shift(1)
    after = (prev["function"].astype(str).isin(SYNCHRONIZING).to_numpy()
             & (prev["comm"].to_numpy() == calls["comm"].to_numpy()))
    bar = (calls["function"] == "MPI_Barrier").to_numpy()
    df = pd.DataFrame({"site": calls["callsite"].astype(str).to_numpy()[bar],
                       "rank": calls["rank"].to_numpy()[bar], "after": after[bar]})
    every = df.groupby("site")["after"].all()
    per_rank = df.groupby(["site", "rank"]).size().groupby("site").max()
    return {str(s): int(per_rank[s]) for s in every[every].index}


def assert_findings_above_the_noise_floor(run: AppRun) -> None:
    """What the JSON lists as findings is at or above the noise floor it states, each
    saving also given as a share of the run (the floor's run); what is below it is only
    under `minor`, saying why. Whatever findings this run's timing gave, the rules always
    have something to judge here: the barriers that directly follow a synchronizing
    collective (the program's order of calls, found again from the trace) are each
    reported, under `findings` only where they repeat (MIN_REDUNDANT_INSTANCES), those of
    one instance (set-up, tear-down) under `minor` saying so."""
    a = run.analysis
    floor = a["noise_floor"]
    run_s, floor_s = floor["run_s"], floor["floor_s"]
    assert run_s > 0 and floor_s >= floor["run_share"] * run_s > 0, floor
    assert floor_s == pytest.approx(max(floor["run_share"] * run_s,
                                        floor["iteration_spread_s"])), floor
    ranks = len(a["ranks"])
    truth = barriers_after_collectives(run.trace)
    assert truth, "no barrier directly after a synchronizing collective found in the trace"
    barriers = {f["callsite"]: (k, f) for k in ("findings", "minor") for f in a[k]
                if f["kind"] == "redundant_collective"
                and f["evidence"]["proof"] == "barrier_after"}
    assert set(barriers) == set(truth), (sorted(barriers), truth)
    for site, per_rank in truth.items():
        _listed, f = barriers[site]
        assert f["evidence"]["calls_per_rank"] == per_rank, (f, per_rank)
    for where in ("findings", "minor"):
        for f in a[where]:
            if f["kind"] != "redundant_collective":
                continue
            ev = f["evidence"]
            if ev["instances"] < 2:  # never claimed for one instance
                assert where == "minor", f
                assert ev["minor_reason"] == (f"only {ev['instances']} instance in this run "
                                              "(redundancy is claimed from 2 on)"), f
                assert not ev["saving_replayed"] and f["estimated_savings_s"] == 0, f
                assert "Not claimed as redundant" in f["message"], f
    for f in a["findings"]:
        ev = f["evidence"]
        assert "minor_reason" not in ev, f
        if ev.get("saving_replayed", True):
            assert f["estimated_savings_s"] >= floor_s, (f, floor)
            assert ev["share_of_run"] == pytest.approx(f["estimated_savings_s"] / run_s), f
            assert f"{ev['share_of_run']:.1%} of the run" in f["message"], f
        else:  # no saving could be replayed: the time in its calls stands in for it
            assert f["estimated_savings_s"] == 0 and f["time_s"] / ranks >= floor_s, (f, floor)
            assert "no saving is stated" in f["message"], f
    for f in a["minor"]:
        ev = f["evidence"]
        assert ev.get("minor_reason") and f["minor_reason"] == ev["minor_reason"], f
        if "below the noise floor" in ev["minor_reason"]:
            worth = (f["estimated_savings_s"] if ev.get("saving_replayed", True)
                     else f["time_s"] / ranks)
            assert worth < floor_s or worth == 0, (f, floor)
        if ev.get("saving_replayed", True) and ev.get("share_of_run") is not None:
            assert ev["share_of_run"] == pytest.approx(f["estimated_savings_s"] / run_s), f


def assert_critical_path_inside_the_run(run: AppRun) -> None:
    """The critical path starts and ends within the traced run and is no longer than
    the interval it states."""
    cp, run_s = run.analysis["critical_path"], run.analysis["meta"]["duration_s"]
    assert 0 <= cp["begin_s"] <= cp["end_s"] <= run_s, (cp["begin_s"], cp["end_s"], run_s)
    assert 0 < cp["length_s"] <= cp["end_s"] - cp["begin_s"] + 1e-9, cp


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
    # call sites (and findings, named alike) name the frame outside a wrapper mpiscope
    # detects (a function that only calls MPI, from many call sites: Group::count's
    # Allreduce is named by its caller)
    rows = [r for k in ("callsites", "findings", "minor") for r in lammps.analysis[k]]
    assert any(r["callpath"] and r["callpath"][0].startswith("LAMMPS_NS::Group::count(")
               and len(r["callpath"]) >= 2 and r["callsite"] == r["callpath"][1]
               for r in rows), rows
    # and with LAMMPS's communication layer named as one (`--skip-frames`, as a user
    # would), no call site or finding is left in it where the path reaches further
    out = lammps.trace.parent / "skip.json"
    subprocess.run(["mpiscope", "analyze", str(lammps.trace), "--json", str(out),
                    "--skip-frames", "LAMMPS_NS::Comm*"], check=True, capture_output=True,
                   timeout=TIMEOUT)
    skipped = json.loads(out.read_text())
    rows = skipped["callsites"] + skipped["findings"] + skipped["minor"]
    # (a finding of the whole run, descheduled, has no path)
    through_comm = [r for r in rows if r["callpath"]
                    and r["callpath"][0].startswith("LAMMPS_NS::Comm")
                    and not all(f.startswith("LAMMPS_NS::Comm") for f in r["callpath"])]
    assert through_comm
    assert not [r for r in through_comm if r["callsite"].startswith("LAMMPS_NS::Comm")]
    assert any(r["callsite"].startswith("LAMMPS_NS::Verlet::run(") for r in through_comm)


def test_lammps_main_loop_is_its_time_step(lammps: AppRun) -> None:
    """in.melt runs 100 steps and rebuilds its neighbour lists every 20th (other calls in
    that step), so only 19 steps in a row repeat exactly: the loop is still the step, one
    per force computation (the set-up's and the 100 steps'), opened by the reverse
    communication of the forces."""
    loop = lammps.analysis["main_loop"]
    assert loop["iterations"] == 101, loop
    assert loop["callsite"].startswith("LAMMPS_NS::CommBrick::reverse_comm"), loop
    assert len(lammps.analysis["iterations"]) == 100


def test_lammps_findings_are_above_the_noise_floor(lammps: AppRun) -> None:
    assert_findings_above_the_noise_floor(lammps)


def test_lammps_critical_path_is_inside_the_run(lammps: AppRun) -> None:
    assert_critical_path_inside_the_run(lammps)


# -------------------------------------------------------------------------- hpcc

def hpccinf() -> str:
    """Debian's example hpccinf.txt made tiny: HPL on N=200 (NB=40) on a 1x2 grid; the
    other tests size themselves from it, so the whole run takes about a second."""
    lines = Path("/usr/share/doc/hpcc/examples/_hpccinf.txt").read_text().splitlines()
    for i, value in ((5, "200"), (7, "40"), (10, "1"), (11, "2")):
        lines[i] = f"{value:<13}{lines[i].split(None, 1)[1]}"
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def hpcc(tmp_path_factory: pytest.TempPathFactory) -> AppRun:
    exe = need("hpcc")
    return run_app(tmp_path_factory.mktemp("hpcc"), [exe], None,
                   files={"hpccinf.txt": hpccinf()})


def hpcc_results(cwd: Path) -> list[str]:
    """hpcc's exact verdicts (hpccoutf.txt): the sections run, the error counts of the
    RandomAccess checks, HPL's residual checks and the summary's success/failure."""
    out = (cwd / "hpccoutf.txt").read_text()
    return re.findall(r"^(?:Begin of \w+ section\.|Found \d+ errors in \d+ locations.*"
                      r"|\s*\d+ tests completed and (?:passed|failed).*|Success=\d+"
                      r"|Failure=\d+|End of Tests\.)$", out, re.M)


def test_hpcc_gives_the_same_verdicts_traced(hpcc: AppRun) -> None:
    assert hpcc.plain.returncode == 0, hpcc.plain.stderr[-2000:]
    assert hpcc.traced.returncode == 0, hpcc.traced.stderr[-2000:]
    plain = hpcc_results(hpcc.trace.parent / "plain")
    assert "Begin of LatencyBandwidth section." in plain and "Success=1" in plain, plain
    assert hpcc_results(hpcc.trace.parent / "traced") == plain


def ping_pong_sites(trace: Path) -> set[str]:
    """Call sites (as the analysis names them) most of whose small messages are answered
    at once: the sending rank's next MPI call receives from the same partner (hpcc's
    PingPong latency and bandwidth tests, and its helpers' control messages)."""
    import mpiscope

    t = mpiscope.analyze(mpiscope.load(trace)).trace
    calls, m = t.calls, t.messages
    outer = calls[calls["depth"] == 0].sort_values(["rank", "start"])
    nxt = outer.groupby("rank").shift(-1)
    answered = pd.Series(
        nxt["function"].astype(str).str.startswith("MPI_Recv").to_numpy()
        & (nxt["peer"].to_numpy() == outer["peer"].to_numpy()), index=outer.index)
    small = m[m["bytes"] <= 4096]
    sent = pd.DataFrame({"site": calls["callsite"].astype(str).to_numpy()[small["send_call"]],
                         "answered": answered.reindex(small["send_call"].to_numpy(),
                                                      fill_value=False).to_numpy()})
    share = sent.groupby("site")["answered"].mean()
    return set(share[share > 0.5].index)


def test_hpcc_ping_pong_is_no_aggregation_finding(hpcc: AppRun) -> None:
    """hpcc's PingPong sends one message and waits for the answer: nothing to aggregate,
    listed or below the noise floor."""
    sites = ping_pong_sites(hpcc.trace)
    assert sites, "no ping-pong found in hpcc's trace"
    agg = [f for k in ("findings", "minor") for f in hpcc.analysis[k]
           if f["kind"] == "message_aggregation"]
    assert not [f for f in agg if f["callsite"] in sites], (sites, agg)


def test_hpcc_findings_are_above_the_noise_floor(hpcc: AppRun) -> None:
    assert_findings_above_the_noise_floor(hpcc)


def test_hpcc_critical_path_is_inside_the_run(hpcc: AppRun) -> None:
    assert_critical_path_inside_the_run(hpcc)


@pytest.fixture(scope="module")
def hpcc4(tmp_path_factory: pytest.TempPathFactory) -> AppRun:
    """hpcc at 4 ranks (2x2 grid), traced only: more ranks than this host has cores."""
    exe = need("hpcc")
    inf = hpccinf().splitlines()
    inf[10], inf[11] = (f"2            {x.split(None, 1)[1]}" for x in inf[10:12])
    return run_app(tmp_path_factory.mktemp("hpcc4"), [exe], None, ranks=4,
                   files={"hpccinf.txt": "\n".join(inf) + "\n"}, plain_too=False)


def test_four_ranks_on_fewer_cores_warn_of_oversubscription(hpcc4: AppRun) -> None:
    """The warning follows from the ranks per host and the CPUs the tracer recorded for
    it (the CPUs this job could use: no more than the machine's), not from timing."""
    import mpiscope

    assert hpcc4.traced.returncode == 0, hpcc4.traced.stderr[-2000:]
    meta = mpiscope.load(hpcc4.trace).meta
    hosts = [r["host"] for r in hpcc4.analysis["ranks"]]
    assert len(hosts) == 4 and len(set(hosts)) == 1 == len(meta.host_cpus), meta.host_cpus
    cpus = meta.host_cpus[0]
    assert 1 <= cpus <= (os.cpu_count() or cpus)
    over = [w for w in hpcc4.analysis["warnings"] if w.startswith("oversubscribed:")]
    if cpus < 4:
        assert over == [w for w in over if f"4 ranks on {hosts[0]} with {cpus} CPU" in w], over
        assert len(over) == 1, hpcc4.analysis["warnings"]
        timed = [f for f in hpcc4.analysis["findings"] + hpcc4.analysis["minor"]
                 if f["kind"] != "redundant_collective"]
        assert all(f["oversubscribed"] for f in timed), timed
    else:
        assert not over, over
    assert_findings_above_the_noise_floor(hpcc4)
    assert_critical_path_inside_the_run(hpcc4)


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
    # the exact solution is 1..196; the last bits depend on the order in which the
    # factorization's messages arrive (MPI_ANY_SOURCE), traced or not, so both runs are
    # compared with the exact answer, to well within the solver's error
    x = solution(mumps.plain.stdout)
    assert len(x) == 196 and all(abs(v - (i + 1)) < 1e-10 * (i + 1) for i, v in enumerate(x)), x
    y = solution(mumps.traced.stdout)
    assert len(y) == 196 and all(abs(v - (i + 1)) < 1e-10 * (i + 1) for i, v in enumerate(y)), y
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
    bad = [p for p in helpers if len(p) < 2 or not re.match(r"d?mumps_[\w:]*\+0x", p[1])]
    assert not bad, bad
    # call sites (and findings, named alike) of those helpers' calls name the MUMPS
    # routine that called the helper (mpiscope detects them as wrappers: they only call
    # MPI, from many call sites); which findings a run has is up to its timing
    found = [r for k in ("callsites", "findings", "minor") for r in mumps.analysis[k]]
    on_helpers = [f for f in found
                  if f["callpath"]  # not a finding of the whole run (descheduled)
                  and re.match(r"mumps_\w*reduce\w*_\+0x|mumps_propinfo_\+0x", f["callpath"][0])]
    assert on_helpers, found
    assert all(f["callsite"] != f["callpath"][0] for f in on_helpers), on_helpers
