"""bench/reader: the reader's speed and memory against a bare libotf2 decode loop and pipit.

Generates synthetic traces with build/native/mpiscope-synth, then measures, each in a
fresh process pinned to one core (--cpu, as `taskset -c`) and best of --repeat runs (the
machine may be shared: CPU time, user+sys, is the fair measure of work per core; wall
time and the load average are printed too):
  - otf2-decode: libotf2 decoding every event with no-op callbacks (the decode limit);
  - the floor, `otf2-decode --write B`: the same loop storing B bytes per event into
    growable columns in fresh memory the way the reader does, B = the bytes per event of
    the reader's tables in this run (the column bytes of calls, regions, p2p, messages,
    collectives and flushes): the cheapest reader that writes these tables through
    libotf2; its CPU is the process's own at the end of decoding, columns still alloc'd;
  - mpiscope: reader.load(use_cache=False) after the imports, i.e. definitions, events,
    all tables and message matching, cold; peak RSS of the whole process; the share of
    the native reader (native.read_events: libotf2 decoding into the tables' columns and
    message matching) and its system time (page faults of the columns) are printed;
  - cache: the same trace re-opened from its Parquet cache;
  - pipit.Trace.from_otf2 if pipit is importable (CPU of all its worker processes).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NATIVE = REPO / "build" / "native"  # --native
TABLES = ("calls", "regions", "p2p", "messages", "collectives", "flushes")

LOAD = """
import json, resource, sys, time
from mpiscope.archive import native, reader
import numpy, otf2, pandas, pyarrow  # imports and library set-up are not part of reading
pandas.DataFrame({"a": numpy.zeros(2)}).astype({"a": "category"})  # pandas' lazy set-up
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
use_cache = sys.argv[2] == "cache"
def usage():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime
native_cpu = [0.0, 0.0]  # user, sys in native.read_events
read_events = native.read_events
def timed(*args, **kw):
    u0, s0 = usage()
    try:
        return read_events(*args, **kw)
    finally:
        u1, s1 = usage()
        native_cpu[0] += u1 - u0
        native_cpu[1] += s1 - s0
native.read_events = timed
w0, (u0, s0) = time.perf_counter(), usage()
t = reader.load(sys.argv[1], use_cache=use_cache)
w1, (u1, s1) = time.perf_counter(), usage()
tables = sum(int(getattr(t, name).memory_usage(index=False, deep=True).sum())
             for name in sys.argv[3].split(","))  # the native part's tables, columns only
print(json.dumps({"wall": w1 - w0, "cpu": u1 - u0 + s1 - s0, "sys": s1 - s0,
                  "native_user": native_cpu[0], "native_sys": native_cpu[1],
                  "events": int(t.ranks["events"].sum()), "table_bytes": tables,
                  "calls": len(t.calls), "messages": len(t.messages),
                  "rss_base": base * 1024,
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""

PIPIT = """
import json, resource, sys, time
import pipit
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
def cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
w0, c0 = time.perf_counter(), cpu()
t = pipit.Trace.from_otf2(sys.argv[1])
w1, c1 = time.perf_counter(), cpu()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"wall": w1 - w0, "cpu": c1 - c0, "events": len(t.events),
                  "rss_base": base * 1024, "rss": (peak + child) * 1024}))
"""


@dataclass
class Run:
    wall: float
    cpu: float  # user + sys
    events: int
    rss: int = 0
    rss_base: int = 0
    sys: float = 0.0
    native_user: float = 0.0  # in native.read_events (mpiscope load only)
    native_sys: float = 0.0
    table_bytes: int = 0  # the tables' column bytes (mpiscope load only)


def env(path: Path | None = None) -> dict[str, str]:
    """The child's environment; `path` (a pipit checkout) goes first on PYTHONPATH."""
    # numpy's BLAS threads would only add idle spinning to the CPU time
    e = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    if path is not None and (path / "pipit" / "__init__.py").is_file():
        e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(path), e.get("PYTHONPATH")]))
    return e


def python_run(code: str, *args: str, timeout: float = 1800,
               path: Path | None = None) -> Run:
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          timeout=timeout, env=env(path))
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip()
                           else f"exit {proc.returncode}")
    d = json.loads(proc.stdout.strip().splitlines()[-1])
    return Run(d["wall"], d["cpu"], d["events"], d.get("rss", 0), d.get("rss_base", 0),
               d.get("sys", 0.0), d.get("native_user", 0.0), d.get("native_sys", 0.0),
               d.get("table_bytes", 0))


def decode_run(anchor: Path, write: int = 0) -> Run:
    """otf2-decode; `write` > 0: with --write WRITE (bytes per event into fresh columns).

    The plain loop's CPU is the whole process's (RUSAGE_CHILDREN: start-up and exit too,
    a few ms); with --write it is the one otf2-decode reports at the end of decoding, with
    its columns still allocated, like mpiscope's in-process figure (the exit's unmapping
    of the columns is not counted, as the reader's tables are not freed either)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    w0 = time.perf_counter()
    opt = ["--write", str(write)] if write > 0 else []
    out = subprocess.run([str(NATIVE / "otf2-decode"), *opt, str(anchor)], capture_output=True,
                         text=True, check=True).stdout.split()
    wall = time.perf_counter() - w0
    if write > 0:
        user, sys_ = float(out[3]), float(out[4])
        return Run(float(out[1]), user + sys_, int(out[0]), sys=sys_)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return Run(wall, cpu, int(out[0]), sys=after.ru_stime - before.ru_stime)


def best(runs: list[Run]) -> Run:
    return min(runs, key=lambda r: r.cpu)


def generate(out: Path, ranks: int, events: int) -> Path:
    trace = out / f"synth-r{ranks}-e{events}"
    stamp = trace / ".generated"
    if not stamp.is_file():
        subprocess.run(["rm", "-rf", str(trace)], check=True)
        subprocess.run([str(NATIVE / "mpiscope-synth"), "--ranks", str(ranks), "--events",
                        str(events), "--out", str(trace)], check=True, stdout=subprocess.DEVNULL)
        stamp.touch()
    subprocess.run(["rm", "-rf", str(trace / ".mpiscope-cache")], check=True)
    return trace


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def rate(r: Run) -> float:
    return r.events / r.cpu / 1e6 if r.cpu > 0 else float("inf")


def pipit_status(path: Path | None) -> str | None:
    """None if pipit's OTF2 reader can be used, else why not."""
    probe = subprocess.run([sys.executable, "-c",
                            "import pipit; pipit.Trace.from_otf2"], capture_output=True,
                           text=True, env=env(path))
    if probe.returncode == 0:
        return None
    last = probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else "import failed"
    if "No module named" in last:
        return "not installed, no PIPIT_SRC, and github.com/hpcgroup/pipit could not be " \
               "cloned (PyPI's `pipit` 0.0.1 is an empty placeholder)"
    return last


def main() -> int:
    global NATIVE  # --native
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=REPO / "build" / "bench-reader")
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--events", type=int, nargs="+", default=[1_000_000, 10_000_000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pipit-max-events", type=int, default=1_000_000,
                    help="skip pipit above this size (it needs GBs of memory there)")
    ap.add_argument("--pipit-src", type=Path, help="a checkout of github.com/hpcgroup/pipit")
    ap.add_argument("--cpu", type=int, default=min(os.sched_getaffinity(0)),
                    help="the core every measured process runs on (taskset -c CPU)")
    ap.add_argument("--native", type=Path, default=NATIVE,
                    help="the directory of otf2-decode and mpiscope-synth (default: %(default)s)")
    a = ap.parse_args()
    NATIVE = a.native
    a.out.mkdir(parents=True, exist_ok=True)
    pipit_why = pipit_status(a.pipit_src)
    # one core for all: the decode loop and the reader are single-threaded, and pinning
    # both to the same core compares them on the same cache and clock (children inherit it)
    os.sched_setaffinity(0, {a.cpu})
    print(f"bench/reader: synthetic traces from mpiscope-synth ({a.ranks} ranks, halo exchange "
          f"+ Allreduce + Barrier + small Send/Recv), best of {a.repeat} fresh processes on "
          f"core {a.cpu}, rates per core = events / CPU seconds (user+sys); load average "
          f"{load()} on {os.cpu_count()} cores")
    ok = True
    for n in a.events:
        trace = generate(a.out, a.ranks, n)
        anchor = trace / "traces.otf2"
        dec = best([decode_run(anchor) for _ in range(a.repeat)])
        tables = ",".join(TABLES)
        ours = best([python_run(LOAD, str(trace), "nocache", tables) for _ in range(a.repeat)])
        assert ours.events == dec.events, (ours.events, dec.events)
        # the floor: the same decode writing the reader's bytes per event to fresh memory
        nbytes = max(1, round(ours.table_bytes / ours.events))
        floor = best([decode_run(anchor, nbytes) for _ in range(a.repeat)])
        assert floor.events == dec.events, (floor.events, dec.events)
        first = python_run(LOAD, str(trace), "cache", tables)  # writes the cache
        cached = best([python_run(LOAD, str(trace), "cache", tables) for _ in range(a.repeat)])
        print(f"\n== {dec.events:,} events ({trace.name})")
        print(f"  libotf2 decode loop : {rate(dec):6.2f} M events/s  "
              f"(CPU {dec.cpu:.3f} s of which sys {dec.sys:.3f} s, wall {dec.wall:.3f} s)")
        per_event = ours.rss / ours.events
        above = (ours.rss - ours.rss_base) / ours.events
        print(f"  mpiscope load, cold : {rate(ours):6.2f} M events/s per core  "
              f"(CPU {ours.cpu:.3f} s of which sys {ours.sys:.3f} s, wall {ours.wall:.3f} s) "
              f"= {rate(ours) / rate(dec):.2f}x the decode loop")
        print(f"    native reader     : user {ours.native_user:.3f} s + sys "
              f"{ours.native_sys:.3f} s (decoding into columns, matching); the rest, "
              f"{ours.cpu - ours.native_user - ours.native_sys:.3f} s: definitions and "
              "DataFrames")
        print(f"  floor: decode + {nbytes} B/event to fresh memory : {rate(floor):6.2f} M events/s "
              f"(CPU {floor.cpu:.3f} s of which sys {floor.sys:.3f} s) = "
              f"{rate(floor) / rate(dec):.2f}x the decode loop; mpiscope = "
              f"{rate(ours) / rate(floor):.2f}x this floor")
        print(f"    ({nbytes} B/event: the column bytes of mpiscope's {', '.join(TABLES)} "
              "tables in this run)")
        print(f"  mpiscope peak memory: {ours.rss / 2**20:.0f} MiB = {per_event:.0f} bytes/event "
              f"(process with interpreter and libraries; {above:.0f} bytes/event above the "
              f"{ours.rss_base / 2**20:.0f} MiB after imports)")
        print(f"  first open + cache  : {first.wall:.3f} s wall; re-open from cache: "
              f"{cached.wall:.3f} s wall (CPU {cached.cpu:.3f} s)")
        vs_pipit = None
        if pipit_why is None and n <= a.pipit_max_events:
            try:
                pip = python_run(PIPIT, str(trace), path=a.pipit_src)
                print(f"  pipit.from_otf2     : {rate(pip):6.2f} M events/s per core  "
                      f"(CPU {pip.cpu:.2f} s over its processes, wall {pip.wall:.2f} s), "
                      f"peak {pip.rss / 2**20:.0f} MiB = {pip.rss / pip.events:.0f} bytes/event;"
                      f" mpiscope is {rate(ours) / rate(pip):.0f}x pipit per core, "
                      f"{pip.wall / ours.wall:.0f}x in wall time")
                vs_pipit = rate(ours) / rate(pip)
            except (RuntimeError, subprocess.TimeoutExpired) as err:
                print(f"  pipit: not available ({err})")
        elif pipit_why is None:
            print(f"  pipit: skipped above {a.pipit_max_events:,} events "
                  "(--pipit-max-events; it needs several GB there)")
        else:
            print(f"  pipit: not available ({pipit_why})")
        verdict = [
            ("speed >= 5 M events/s per core", rate(ours) >= 5.0),
            (">= 1/3 of the decode loop", rate(ours) >= rate(dec) / 3),
        ]
        # issue 17's goal, printed but not failing the run: out of reach with 4 KiB pages
        # (analyzer/native/README.md: where the reader's time goes)
        goal = rate(ours) >= 0.8 * rate(dec)
        print(f"  {'PASS' if goal else 'MISS'} (goal, not gating): >= 0.8x the decode loop "
              f"(issue 17): {rate(ours) / rate(dec):.2f}x")
        if rate(floor) < 0.8 * rate(dec):
            print(f"  the 0.8x goal is out of reach: the floor itself is "
                  f"{rate(floor) / rate(dec):.2f}x the decode loop here (no reader writing "
                  "these tables through libotf2 can be faster)")
        else:
            print(f"  the 0.8x goal is within reach: the floor is "
                  f"{rate(floor) / rate(dec):.2f}x the decode loop here")
        if vs_pipit is not None:
            verdict.append((">= 40x pipit per core", vs_pipit >= 40))
        if n >= 10_000_000:  # where the interpreter's fixed ~100 MiB no longer dominates
            verdict.append(("memory <= 100 bytes/event", per_event <= 100))
        for what, passed in verdict:
            print(f"  {'PASS' if passed else 'MISS'}: {what}")
            ok &= passed
    print(f"\nload average {load()} on {os.cpu_count()} cores")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
