"""bench/whatif: `mpiscope whatif`'s predictions against real changes on the emulated cluster.

For each link rate (10 and 100 Mbit by default) the cluster comes up (4 nodes), the
inter-node path is characterised once by a ping-pong size sweep traced on it (its fitted
latency and bandwidth, printed beside the nominal rate: 100 Mbit must come out near
12.5 MB/s), then for each application and each local rank count R (`--local-ranks`,
4 and 2 by default), `--pairs` alternating pairs of runs:

1. the application traced locally (R ranks on this machine, shared memory);
2. the prediction from that trace: whatif `--nodes R --inter-node BANDWIDTH,LATENCY`
   with the characterised path (one rank per node, as the cluster places them);
3. the application traced on the cluster (R ranks, one per node): measured.

whatif replays the traced program with its own rank count (it places ranks on nodes,
`--nodes` at most the ranks; it cannot make a 4-rank run of a 2-rank trace), so a 2-rank
row is 2 ranks locally -> 2 ranks on 2 of the cluster's 4 nodes (`--map-by node` puts
rank k on node k), labelled "2 nodes of 4xRATE"; the 4-rank rows use all 4 nodes.

Error = (predicted - measured) / measured, per pair; the table gives the median and the
range over the pairs, with each call's noise left out (the default on other nodes)
and kept (`--noise keep`). The Himeno fix (`--variant patched --allreduce-every 10`) is run
on the cluster after each unpatched cluster run: the runtime whatif predicts for
`--collective-every MPI_Allreduce@…=10` from the unpatched cluster trace, and from the
local trace on the cluster's model, against the patched run's measured runtime.

The applications: Himeno (workloads/himeno, size S), LAMMPS (Debian's `lmp`, LJ melt) and
MUMPS (Debian's `mumps-test`: its driver dsimpletest, the parallel multifrontal LU solver
on a 3-D 7-point Laplacian of `--mumps-grid`^3 unknowns written by this script, whose
solution is 1..N; the host reads it and distributes the matrix, the factorization sends
contribution blocks between ranks: at grid 20, 6 MB point-to-point between 2 ranks, 9 MB
among 4, in 2-4 s locally on a busy 2-core machine).
Not hpcc: Debian's hpcc 1.5.0 always runs its whole suite (no switch runs HPL or PTRANS
alone; the input file only sizes the tests), and its LatencyBandwidth section's rings
alone send 2,000,000-byte messages, 3 measurements x 11 rings x 2 variants x 3 loops x 2
directions: ~0.8 GB per rank whatever the input, ~10 minutes per run at 10 Mbit.

Runtimes are the traces' own (the last rank's last event), so measured and predicted
mean the same thing. Needs root (network namespaces, tc). Target: |error| <= 25% in every
row; the bench reports what it measured, met or not (exit 1 if a row misses it).
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the analyzer is imported where used: --help works without it
    from mpiscope.analysis.simulate.model import PathModel

REPO = Path(__file__).resolve().parents[2]
TARGET = 0.25
ROOT_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
LOCAL = ["mpirun", "--oversubscribe", "--bind-to", "none"]
NODES = 4  # the cluster's nodes; a run of fewer ranks uses the first ones (--map-by node)
APPS = ("himeno", "lammps", "mumps")
DSIMPLETEST = "/usr/lib/mumps/dsimpletest"
NOT_APPS = {"hpcc": "Debian's hpcc runs its whole suite, whose LatencyBandwidth rings send "
                    "~0.8 GB per rank (~10 min per run at 10 Mbit): see this module's "
                    "docstring; the third application is mumps"}


def sh(*cmd: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=cwd,
                          env={**os.environ, **ROOT_ENV})
    if proc.returncode:
        sys.exit(f"bench/whatif: {' '.join(cmd)} failed ({proc.returncode}):\n"
                 f"{proc.stderr[-2000:]}")
    return proc


def traced(out: Path, cmd: list[str], cluster: bool, cwd: Path, ranks: int = 4) -> Path:
    opts = ["--cluster"] if cluster else []
    mpirun = ["mpirun"] if cluster else LOCAL
    sh(sys.executable, "-m", "mpiscope", "run", *opts, "--out", str(out), "--",
       *mpirun, "-np", str(ranks), *cmd, cwd=cwd)
    return out


def runtime_s(trace) -> float:
    return float(trace.ranks["last_ns"].max()) / 1e9


def app_names(text: str) -> list[str]:
    """`--apps`: names from APPS, comma-separated."""
    names = [a.strip() for a in text.split(",") if a.strip()]
    for a in names:
        if a in NOT_APPS:
            raise argparse.ArgumentTypeError(f"{a}: {NOT_APPS[a]}")
        if a not in APPS:
            raise argparse.ArgumentTypeError(f"{a}: not one of {', '.join(APPS)}")
    if not names:
        raise argparse.ArgumentTypeError("no application named")
    return names


def rank_counts(text: str) -> list[int]:
    """`--local-ranks`: rank counts from 2 (one rank has no messages whose path could
    change) to the cluster's nodes (one rank per node, as whatif --nodes places them)."""
    counts = []
    for part in text.split(","):
        try:
            r = int(part)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{part!r} is not a whole number") from None
        if not 2 <= r <= NODES:
            raise argparse.ArgumentTypeError(f"{r} ranks: from 2 to {NODES} (the cluster's "
                                             "nodes, one rank each)")
        counts.append(r)
    return counts


def on_nodes(ranks: int, rate: str) -> str:
    """Where a run of `ranks` ranks goes on the cluster, as the table's labels say it."""
    return f"{NODES}x{rate}" if ranks == NODES else f"{ranks} nodes of {NODES}x{rate}"


def laplace3d(k: int) -> str:
    """dsimpletest's input (N, NNZ, the entries `i j a`, the right-hand side): the 7-point
    Laplacian on a k x k x k grid, right-hand side A (1..N), so the solution is 1..N. A 3-D
    grid, not a 2-D one, for fronts large enough that the factorization communicates."""
    def at(x: int, y: int, z: int) -> int:
        return (x * k + y) * k + z + 1

    entries: list[str] = []
    rhs: list[float] = []
    steps = ((1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1))
    for x in range(k):
        for y in range(k):
            for z in range(k):
                i = at(x, y, z)
                row = [(i, 6.0)] + [(at(x + dx, y + dy, z + dz), -1.0)
                                    for dx, dy, dz in steps
                                    if 0 <= x + dx < k and 0 <= y + dy < k and 0 <= z + dz < k]
                entries += [f"{i} {j} {a}" for j, a in row]
                rhs.append(sum(a * j for j, a in row))
    return "\n".join([str(k ** 3), str(len(entries)), *entries, *map(str, rhs)]) + "\n"


@dataclass
class GainRow:
    """The fix's gain, predicted from each unpatched cluster trace and measured against
    the patched run after it: per pair the two differ by the run-to-run noise of two
    runs (printed: the unpatched runs' spread), so the medians over the pairs are
    compared."""

    case: str
    predicted: list[float] = field(default_factory=list)
    measured: list[float] = field(default_factory=list)
    unpatched: list[float] = field(default_factory=list)

    @property
    def errors(self) -> list[float]:
        m = statistics.median(self.measured)
        return [(statistics.median(self.predicted) - m) / m if m else float("inf")]

    def line(self, width: int = 58) -> str:
        ok = "ok" if abs(self.errors[0]) <= TARGET else "MISSED"
        pairs = " ".join(f"{p:+.2f}/{m:+.2f}" for p, m in zip(self.predicted, self.measured,
                                                                 strict=True))
        pred, meas = statistics.median(self.predicted), statistics.median(self.measured)
        return (f"{self.case:<{width}} {self.errors[0]:+7.1%}  medians {pred:+.3f}/{meas:+.3f} s  "
                f"{ok:<6}  pred/meas s: {pairs}; "
                f"unpatched runs spread {max(self.unpatched) - min(self.unpatched):.2f} s")


@dataclass
class Row:
    case: str
    errors: list[float] = field(default_factory=list)
    detail: list[str] = field(default_factory=list)

    def add(self, predicted: float, measured: float) -> None:
        self.errors.append((predicted - measured) / measured)
        self.detail.append(f"{predicted:.2f}/{measured:.2f}")

    def line(self, width: int = 58) -> str:
        e = sorted(self.errors)
        med = statistics.median(e)
        ok = "ok" if all(abs(x) <= TARGET for x in e) else "MISSED"
        return (f"{self.case:<{width}} {med:+7.1%}  [{e[0]:+.1%}, {e[-1]:+.1%}]  {ok:<6}  "
                f"pred/meas s: {' '.join(self.detail)}")


def characterise(work: Path, rate: str, sweep: Path) -> PathModel:
    """The cluster's inter-node path from a traced ping-pong sweep between two nodes."""
    from mpiscope.analysis.simulate import fit
    from mpiscope.analysis.simulate.model import INTER
    from mpiscope.archive import reader

    d = traced(work / f"sweep-{rate}", [str(sweep), "10"], cluster=True, cwd=work,
               ranks=2)
    return fit(reader.load(d, use_cache=False)).paths[INTER]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "build/bench-whatif")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--rates", default="10mbit,100mbit")
    ap.add_argument("--apps", type=app_names, default=list(APPS),
                    help=f"comma-separated, of {','.join(APPS)} (default: all)")
    ap.add_argument("--local-ranks", type=rank_counts, default=[NODES, 2],
                    help=f"ranks of the local trace, and of the cluster run on as many of "
                    f"its {NODES} nodes (default: {NODES},2)")
    ap.add_argument("--himeno-iterations", type=int, default=100)
    ap.add_argument("--lammps-steps", type=int, default=200)
    ap.add_argument("--mumps-grid", type=int, default=20,
                    help="MUMPS solves a 3-D Laplacian on this many points a side "
                    "(default 20: 8000 unknowns)")
    args = ap.parse_args()

    from mpiscope.jobs import cluster

    work = args.out.resolve()
    work.mkdir(parents=True, exist_ok=True)
    sweep = work / "sweep"
    sh("mpicc", "-O1", "-o", str(sweep), str(REPO / "bench/whatif/sweep.c"))
    melt = work / "in.melt"
    melt.write_text((REPO / "tests/apps/in.melt").read_text()
                    .replace("0 6 0 6 0 6", "0 10 0 10 0 10")
                    .replace("run             100", f"run             {args.lammps_steps}"))
    laplace = work / f"laplace{args.mumps_grid}.mumps"
    laplace.write_text(laplace3d(args.mumps_grid))
    himeno = str(REPO / "workloads/himeno/himeno")
    hargs = ["--size", "S", "--iterations", str(args.himeno_iterations)]
    apps = {"himeno": [himeno, *hargs],
            "lammps": ["lmp", "-in", str(melt), "-log", "none"],
            # dsimpletest reads its input on stdin; mpirun would forward its own stdin to
            # rank 0 over the cluster's shaped link (seconds at 10 Mbit, measured as the
            # host's computation), so each rank opens the shared file itself
            "mumps": ["sh", "-c", f"exec {DSIMPLETEST} < {shlex.quote(str(laplace))}"]}
    patched = [himeno, *hargs, "--variant", "patched", "--allreduce-every", "10"]
    rows: list[Row | GainRow] = []
    paths: list[str] = []
    try:
        for rate in args.rates.split(","):
            cluster.ensure_up(cluster.parse_spec(f"{NODES}x{rate}"))
            path = characterise(work, rate, sweep)
            nominal = cluster.parse_rate(rate) / 8
            paths.append(f"{rate}: fitted {path.latency_s * 1e6:.1f} us + n / "
                         f"{path.bandwidth_Bps / 1e6:.2f} MB/s (nominal {nominal / 1e6:.3g} "
                         f"MB/s, {path.bandwidth_Bps / nominal:.0%} of it)")
            print(paths[-1], flush=True)
            for app in args.apps:
                for ranks in args.local_ranks:
                    rows += measure_app(app, apps[app], patched, ranks, rate, path,
                                        work=work, pairs=args.pairs)
    finally:
        cluster.down()
    print("\nbench/whatif: prediction error (predicted - measured) / measured, "
          f"{args.pairs} alternating pairs each; target |error| <= {TARGET:.0%}")
    for p in paths:
        print("  path " + p)
    width = max([58, *(len(r.case) for r in rows)])
    print(f"{'case':<{width}} {'median':>7}  [range]")
    for r in rows:
        print(r.line(width))
    return 0 if all(all(abs(x) <= TARGET for x in r.errors) for r in rows) else 1


def measure_app(app: str, cmd: list[str], patched: list[str], ranks: int, rate: str,
                path: PathModel, work: Path, pairs: int) -> list[Row | GainRow]:
    """`pairs` alternating pairs of `app` at `ranks` ranks: traced locally, predicted onto
    `ranks` of the cluster's nodes (one rank each) with the characterised inter-node
    `path`, traced there; for Himeno also the fix, patched on the cluster after each
    unpatched cluster run. Returns the app's rows."""
    from mpiscope.analysis import simulate
    from mpiscope.analysis.simulate.scenario import CallSite, CollectiveEvery, Scenario
    from mpiscope.archive import reader

    where = on_nodes(ranks, rate)
    on_cluster = Scenario(nodes=ranks, inter_latency_s=path.latency_s,
                          inter_bandwidth_Bps=path.bandwidth_Bps)
    row = Row(f"{app} {ranks} ranks local -> {where}")
    noisy = Row(f"{app} {ranks} ranks local -> {where}, --noise keep")
    fix_c = Row(f"himeno fix (Allreduce/10) on {where}, from cluster trace")
    fix_l = Row(f"himeno fix (Allreduce/10) on {where}, from local trace")
    gain = GainRow(f"himeno fix gain on {where} (from cluster trace)")
    for i in range(pairs):
        tag = f"{app}-{ranks}r-{rate}-{i}"
        local = reader.load(traced(work / f"{tag}-local", cmd, False, work, ranks),
                            use_cache=False)
        pred = simulate.replay(local, on_cluster)
        meas = reader.load(traced(work / f"{tag}-cluster", cmd, True, work, ranks),
                           use_cache=False)
        row.add(pred.predicted_s, runtime_s(meas))
        keep = simulate.replay(local, replace(on_cluster, noise=True))
        noisy.add(keep.predicted_s, runtime_s(meas))
        print(f"  {tag}: predicted {pred.predicted_s:.3f} s, measured "
              f"{runtime_s(meas):.3f} s (local {runtime_s(local):.3f} s)", flush=True)
        if app != "himeno":
            continue
        site = allreduce_site(meas)
        every = (CollectiveEvery(CallSite("MPI_Allreduce", site), 10),)
        from_c = simulate.replay(meas, Scenario(collective_every=every))
        from_l = simulate.replay(local, replace(on_cluster, collective_every=every))
        pmeas = runtime_s(reader.load(traced(work / f"{tag}-patched", patched, True, work,
                                             ranks), use_cache=False))
        fix_c.add(from_c.predicted_s, pmeas)
        fix_l.add(from_l.predicted_s, pmeas)
        gain.predicted.append(from_c.replayed_s - from_c.predicted_s)
        gain.measured.append(runtime_s(meas) - pmeas)
        gain.unpatched.append(runtime_s(meas))
        print(f"  {tag} fix: predicted {from_c.predicted_s:.3f} s (cluster "
              f"trace), {from_l.predicted_s:.3f} s (local trace); measured "
              f"{pmeas:.3f} s", flush=True)
    return [row, noisy, fix_c, fix_l, gain] if app == "himeno" else [row, noisy]


def allreduce_site(trace) -> str:
    c = trace.calls
    c = c[c["function"].astype(str) == "MPI_Allreduce"]
    return str(c["callsite"].astype(str).value_counts().index[0])


if __name__ == "__main__":
    sys.exit(main())
