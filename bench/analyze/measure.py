"""bench/analyze: `mpiscope analyze` end to end against the reader alone and the decode loop.

Generates synthetic traces with build/native/mpiscope-synth (kept in --out), then measures,
each in a fresh process pinned to one core (--cpu) and best of --repeat runs by CPU time
(the machine may be shared: CPU time, user+sys, is the measure of work per core; wall time
and the load average are printed beside it):
  - otf2-decode: libotf2 decoding every event with no-op callbacks (the decode limit);
  - reader: mpiscope.archive.reader.load(use_cache=False) after the imports;
  - analyze: `python -m mpiscope analyze TRACE --no-cache --engine E --json OUT`, the whole
    command (start-up, imports, reading, every analysis, JSON), peak RSS of the process.
--per-analysis also prints, for the largest size, each analysis of the session in turn
(the order to_dict asks for them, dependencies first) with its CPU time and the peak memory
it adds above what was resident before it (Linux: VmHWM reset through /proc/self/clear_refs),
in bytes per event: the table of docs/performance.md.
Rates per core = events / CPU seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NATIVE = REPO / "build" / "native"

LOAD = """
import json, resource, sys, time
from mpiscope.archive import reader
import numpy, pandas  # imports are not part of reading
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
w0, c0 = time.perf_counter(), cpu()
t = reader.load(sys.argv[1], use_cache=False)
w1, c1 = time.perf_counter(), cpu()
print(json.dumps({"wall": w1 - w0, "cpu": c1 - c0, "events": int(t.ranks["events"].sum()),
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""

# the session's results in the order Analysis.to_dict asks for them (dependencies first)
STEPS = ("wait_states", "ranks", "threads", "functions", "uninterpreted", "callsites",
         "critical_path", "loop", "findings", "message_sizes", "protocol_switches",
         "comm_matrix", "host_split", "time_bins", "flushes", "per_iteration",
         "message_counts")

PER_ANALYSIS = """
import json, resource, sys, time
from mpiscope.archive import reader
from mpiscope.analysis.session import Analysis
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
def step(name, fn):
    rss0 = status("VmRSS")
    reset_peak()
    c0 = cpu()
    fn()
    peak[0] = max(peak[0], status("VmHWM"))  # clear_refs resets ru_maxrss too
    out.append({"name": name, "cpu": cpu() - c0, "extra": status("VmHWM") - rss0,
                "rss": status("VmRSS")})
out = []
peak = [0]
t = None
def load():
    global t
    t = reader.load(sys.argv[1], use_cache=False)
step("read (reader.load)", load)
a = None
def session():
    global a
    a = Analysis(t)
step("session set-up (call paths)", session)
for name in sys.argv[2].split(","):
    step(name, lambda: getattr(a, name))
step("JSON (to_json)", a.to_json)
print(json.dumps({"events": int(t.ranks["events"].sum()), "steps": out,
                  "peak": peak[0]}))
"""


@dataclass
class Run:
    wall: float
    cpu: float  # user + sys
    events: int
    rss: int = 0


def env() -> dict[str, str]:
    # numpy's BLAS threads would only add idle spinning to the CPU time
    return {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def python_json(code: str, *args: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=env(), check=False)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip()[-2000:] or f"exit {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def load_run(trace: Path) -> Run:
    d = python_json(LOAD, str(trace))
    return Run(d["wall"], d["cpu"], d["events"], d["rss"])


def child_run(cmd: list[str], events: int) -> Run:
    """The whole process: CPU and peak RSS from wait4 (this child's own usage)."""
    w0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=env())
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - w0
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {proc.returncode}: {err[-2000:]}")
    return Run(wall, usage.ru_utime + usage.ru_stime, events, usage.ru_maxrss * 1024)


def decode_run(anchor: Path) -> Run:
    w0 = time.perf_counter()
    proc = subprocess.Popen([str(NATIVE / "otf2-decode"), str(anchor)],
                            stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read().split() if proc.stdout else []
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"otf2-decode: exit {proc.returncode}")
    return Run(time.perf_counter() - w0, usage.ru_utime + usage.ru_stime, int(out[0]),
               usage.ru_maxrss * 1024)


def best(runs: list[Run]) -> Run:
    return min(runs, key=lambda r: r.cpu)


def generate(out: Path, ranks: int, events: int) -> Path:
    trace = out / f"synth-r{ranks}-e{events}"
    stamp = trace / ".generated"
    if not stamp.is_file():
        subprocess.run(["rm", "-rf", str(trace)], check=True)
        subprocess.run([str(NATIVE / "mpiscope-synth"), "--ranks", str(ranks), "--events",
                        str(events), "--out", str(trace)], check=True,
                       stdout=subprocess.DEVNULL)
        stamp.touch()
    subprocess.run(["rm", "-rf", str(trace / ".mpiscope-cache")], check=True)
    return trace


def rate(r: Run) -> float:
    return r.events / r.cpu / 1e6 if r.cpu > 0 else float("inf")


def load_avg() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def per_analysis(trace: Path) -> None:
    d = python_json(PER_ANALYSIS, str(trace), ",".join(STEPS))
    n = d["events"]
    print(f"\n== per analysis, {n:,} events (one process, in this order; 'adds' = peak "
          "above the memory resident before the step)")
    print(f"  {'step':32} {'CPU s':>7} {'adds B/event':>13} {'resident after':>15}")
    total = 0.0
    for s in d["steps"]:
        total += s["cpu"]
        print(f"  {s['name']:32} {s['cpu']:7.2f} {max(s['extra'], 0) / n:13.1f} "
              f"{s['rss'] / 2**20:11.0f} MiB")
    print(f"  {'total':32} {total:7.2f}   peak {d['peak'] / 2**20:.0f} MiB = "
          f"{d['peak'] / n:.0f} B/event")


def main() -> int:
    global NATIVE
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=REPO / "build" / "bench-analyze")
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--events", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--engine", default="pandas", choices=("pandas", "dask", "auto"))
    ap.add_argument("--per-analysis", action="store_true",
                    help="also the CPU and peak memory of each analysis (largest size)")
    ap.add_argument("--cpu", type=int, default=min(os.sched_getaffinity(0)),
                    help="the core every measured process runs on (taskset -c CPU)")
    ap.add_argument("--native", type=Path, default=NATIVE)
    ap.add_argument("--trace", type=Path, action="append", default=[],
                    help="measure this trace (e.g. a real program's, bench/analyze/mpi4py) "
                    "instead of synthetic ones; --per-analysis then on the last one")
    ap.add_argument("--wall-target", type=float, default=None, metavar="S",
                    help="also say whether the whole command's wall time is within S s")
    a = ap.parse_args()
    NATIVE = a.native
    a.out.mkdir(parents=True, exist_ok=True)
    os.sched_setaffinity(0, {a.cpu})  # children inherit it
    what = (", ".join(str(t) for t in a.trace) if a.trace
            else f"synthetic traces from mpiscope-synth ({a.ranks} ranks)")
    print(f"bench/analyze: {what}, best of "
          f"{a.repeat} fresh process(es) on core {a.cpu}, engine {a.engine}; rates per core "
          f"= events / CPU s (user+sys); load average {load_avg()} on {os.cpu_count()} cores")
    traces = a.trace or [generate(a.out, a.ranks, n) for n in a.events]
    for trace in traces:
        dec = best([decode_run(trace / "traces.otf2") for _ in range(a.repeat)])
        rd = best([load_run(trace) for _ in range(a.repeat)])
        if not a.trace:  # a synthetic trace's every event is one the reader counts
            assert rd.events == dec.events, (rd.events, dec.events)
        elif rd.events != dec.events:
            print(f"  (the reader counts {rd.events:,} events, the decode loop "
                  f"{dec.events:,}: rates below are per decoded event)")
        cmd = [sys.executable, "-m", "mpiscope", "analyze", str(trace), "--no-cache",
               "--engine", a.engine, "--json", str(a.out / f"analyze-{trace.name}.json")]
        an = best([child_run(cmd, dec.events) for _ in range(a.repeat)])
        print(f"\n== {dec.events:,} events ({trace.name}), load average {load_avg()}")
        for name, r in (("libotf2 decode loop", dec), ("reader (load, cold)", rd),
                        ("analyze (whole command)", an)):
            print(f"  {name:24}: CPU {r.cpu:7.2f} s  wall {r.wall:7.2f} s  peak RSS "
                  f"{r.rss / 2**20:6.0f} MiB = {r.rss / r.events:5.0f} B/event  "
                  f"{rate(r):6.2f} M events/s per core")
        print(f"  analyze = {an.cpu / rd.cpu:.1f}x the reader's CPU, "
              f"{an.cpu / dec.cpu:.1f}x the decode loop's; targets (issue 30): >= 2 M "
              f"events/s per core ({'met' if rate(an) >= 2 else 'missed'}), <= 60 B/event "
              f"({'met' if an.rss / an.events <= 60 else 'missed'})")
        if a.wall_target is not None:
            print(f"  whole command's wall {an.wall:.1f} s: target <= {a.wall_target:g} s "
                  f"({'met' if an.wall <= a.wall_target else 'missed'})")
    if a.per_analysis:
        per_analysis(traces[-1] if a.trace else generate(a.out, a.ranks, max(a.events)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
