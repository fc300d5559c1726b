"""bench/replay: the replay simulator's self-consistency and speed.

For each trace (made here: Himeno at 1, 2 and 4 ranks, the analyzer tests' imbalance
program at 4 ranks, a synthetic trace from build/native/mpiscope-synth; plus any
--trace given): replays it on its own fitted machine and prints measured and replayed
runtime, their relative error, the largest per-rank error of the MPI time (relative to
the runtime), and the speed of the engine: OTF2 events replayed per second of engine
time (CPU, one core), with the reader's events per second on the same trace and run
(reader.load without cache) and the ratio of the two, and the CPU time of the whole
replay (fitting the machine, building the program, two engine runs). Then, for Himeno
at 2 and 4 ranks, the gain `whatif --collective-every MPI_Allreduce@…=10` predicts from
the unpatched trace against the measured gain of the patched run made after it, over
--pairs pairs: each pair, the medians, and the run-to-run noise (the spread of the
measured gains; informational). Exit 1 if a trace misses the 5%
target or the engine stays below 1 M events/s on the largest trace.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TARGET_ERROR = 0.05
TARGET_RATE = 1e6


def sh(*cmd: str, env: dict | None = None) -> None:
    subprocess.run(cmd, check=True, capture_output=True, timeout=600,
                   env={**os.environ, **(env or {})})


def make_traces(out: Path, himeno_size: str, iterations: int, synth_events: int) -> list[Path]:
    root = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    mpirun = ["mpirun", "--oversubscribe", "--bind-to", "none"]
    made = []
    for n in (1, 2, 4):
        d = out / f"himeno-{n}"
        if not (d / "traces.otf2").is_file():
            sh(sys.executable, "-m", "mpiscope", "run", "--out", str(d), "--", *mpirun, "-np",
               str(n), str(REPO / "workloads/himeno/himeno"), "--size", himeno_size,
               "--iterations", str(iterations), env=root)
        made.append(d)
    d = out / "imbalance-4"
    if not (d / "traces.otf2").is_file():
        exe = out / "imbalance"
        sh("mpicc", "-O1", "-o", str(exe), str(REPO / "analyzer/tests/programs/imbalance.c"))
        sh(sys.executable, "-m", "mpiscope", "run", "--out", str(d), "--", *mpirun, "-np", "4",
           str(exe), "20", env=root)
    made.append(d)
    d = out / f"synth-{synth_events}"
    if not (d / "traces.otf2").is_file():
        sh(str(REPO / "build/native/mpiscope-synth"), "--ranks", "16", "--events",
           str(synth_events), "--out", str(d))
    made.append(d)
    return made


def measure(path: Path) -> tuple[bool, float]:
    from mpiscope.analysis import simulate
    from mpiscope.analysis.simulate import engine, program
    from mpiscope.archive import reader

    c0 = time.process_time()
    trace = reader.load(path, use_cache=False)
    read_s = time.process_time() - c0
    events = int(trace.ranks["events"].sum())
    c0 = time.process_time()
    r = simulate.replay(trace)
    replay_s = time.process_time() - c0
    prog = program.build(trace, r.fitted, r.fitted, simulate.Scenario())
    best = float("inf")
    for _ in range(3):
        c0 = time.process_time()
        engine.run(prog)
        best = min(best, time.process_time() - c0)
    rate = events / max(best, 1e-9)
    read_rate = events / read_s
    rank_err = float((r.ranks["replayed_mpi_s"] - r.ranks["measured_mpi_s"]).abs().max()
                     / r.measured_s)
    ok = abs(r.error) <= TARGET_ERROR and rank_err <= TARGET_ERROR
    print(f"{path.name:<22} {trace.num_ranks:>5} {events:>10} {r.measured_s:>10.4f} "
          f"{r.replayed_s:>10.4f} {r.error:>+8.2%} {rank_err:>8.2%} {rate / 1e6:>9.1f} "
          f"{read_rate / 1e6:>8.2f} {rate / read_rate:>7.1f}x {replay_s:>8.2f} "
          f"{'ok' if ok else 'MISSED'}")
    return ok, rate if events >= 100_000 else float("inf")


def make_pair(out: Path, ranks: int, size: str, iterations: int, every: int,
              rep: int) -> tuple[Path, Path]:
    """Himeno unpatched and patched (Allreduce every `every` iterations), traced, one
    after the other (repetition `rep`)."""
    root = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    pair = []
    for variant in ("unpatched", "patched"):
        d = out / "reps" / f"himeno-{ranks}-{variant}-{rep}"
        extra = ["--allreduce-every", str(every)] if variant == "patched" else []
        if not (d / "traces.otf2").is_file():
            sh(sys.executable, "-m", "mpiscope", "run", "--out", str(d), "--", "mpirun",
               "--oversubscribe", "--bind-to", "none", "-np", str(ranks),
               str(REPO / "workloads/himeno/himeno"), "--size", size, "--iterations",
               str(iterations), "--variant", variant, *extra, env=root)
        pair.append(d)
    return pair[0], pair[1]


def gain(pairs: list[tuple[Path, Path]], every: int) -> None:
    """The gain `--collective-every` predicts on each unpatched trace against the
    measured gain of the patched run made right after it; the medians, and the
    run-to-run noise: the spread (max - min) of the measured gains."""
    import statistics

    from mpiscope.analysis import simulate
    from mpiscope.analysis.simulate.scenario import CallSite, CollectiveEvery, Scenario
    from mpiscope.archive import reader

    predicted, measured = [], []
    for unpatched, patched in pairs:
        a, b = reader.load(unpatched), reader.load(patched)
        calls = a.calls[a.calls["function"] == "MPI_Allreduce"]
        site = str(calls["callsite"].astype(str).value_counts().index[0])
        r = simulate.replay(a, Scenario(collective_every=(
            CollectiveEvery(CallSite("MPI_Allreduce", site), every),)))
        predicted.append(r.replayed_s - r.predicted_s)
        measured.append(r.measured_s - simulate.replay(b).measured_s)
        print(f"  {unpatched.name:<24} {r.measured_s:>8.3f} s, patched "
              f"{r.measured_s - measured[-1]:>8.3f} s: predicted gain {predicted[-1]:>+7.3f} s, "
              f"measured {measured[-1]:>+7.3f} s")
    p, m = statistics.median(predicted), statistics.median(measured)
    noise = max(measured) - min(measured)
    verdict = ("within 25%" if m and abs(p - m) <= 0.25 * abs(m) else
               "within the noise" if abs(p - m) <= noise else "OUTSIDE the noise")
    print(f"  median: predicted {p:+.3f} s, measured {m:+.3f} s (noise: measured gains "
          f"spread {noise:.3f} s over {len(pairs)} pairs): {verdict}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "build" / "bench-replay")
    ap.add_argument("--himeno-size", default="S")
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--synth-events", type=int, default=2_000_000)
    ap.add_argument("--pairs", type=int, default=3,
                    help="unpatched/patched Himeno pairs per rank count (noise estimate)")
    ap.add_argument("--trace", type=Path, action="append", default=[],
                    help="also replay this trace")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    traces = make_traces(a.out, a.himeno_size, a.iterations, a.synth_events) + a.trace
    print(f"{'trace':<22} {'ranks':>5} {'events':>10} {'measured':>10} {'replayed':>10} "
          f"{'error':>8} {'rank err':>8} {'engine':>9} {'read':>8} {'ratio':>8} {'replay':>8}")
    print(f"{'':<22} {'':>5} {'':>10} {'s':>10} {'s':>10} {'':>8} {'(MPI)':>8} "
          f"{'Mev/s':>9} {'Mev/s':>8} {'':>8} {'CPU s':>8}")
    results = [measure(t) for t in traces]
    print("gain of running Himeno's Allreduce every 10th iteration, predicted vs measured "
          "(informational):")
    for n in (2, 4):
        print(f"Himeno {a.himeno_size}, {n} ranks, {a.iterations} iterations, "
              f"{a.pairs} pairs (unpatched, then patched with --allreduce-every 10):")
        gain([make_pair(a.out, n, a.himeno_size, a.iterations, 10, rep)
              for rep in range(1, a.pairs + 1)], 10)
    slowest = min(rate for _, rate in results)
    all_ok = all(ok for ok, _ in results) and slowest >= TARGET_RATE
    print(f"targets: |error| <= {TARGET_ERROR:.0%} per trace, engine >= "
          f"{TARGET_RATE / 1e6:.0f} M events/s (CPU, one core): "
          f"{'met' if all_ok else 'MISSED'}")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
