"""bench/dask: pandas engine vs Dask (1 and 2 workers) on synthetic traces.

Per trace size, each measurement cold (cache removed) in a fresh process:
  - pandas: `mpiscope.analyze(load(dir, use_cache=False)).to_dict()`: wall time and the
    process's peak RSS; "does not fit" (not run) when events x the engine's bytes per
    event (engines/choose.py) exceed the memory available;
  - dask N: `mpiscope.engines.dask_engine.analyze(dir)` (only `convert.convert` where
    the client-side analyses would not fit in memory) on a LocalCluster of N workers
    (one thread each, BENCH_DASK_MEMORY each): wall time, events/s per worker, the peak
    RSS of each worker (sampled every 50 ms), bytes spilled to disk, and the peak RSS of
    the client process (which still runs the cross-rank analyses: engines/dask_engine.py).
Prints the figures and the ratios (pandas / dask time, 1 -> 2 worker scaling).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SYNTH = REPO / "build" / "native" / "mpiscope-synth"
OUT = Path(os.environ.get("BENCH_DASK_DIR", REPO / "build" / "bench" / "dask"))
SIZES = [int(x) for x in os.environ.get("BENCH_DASK_EVENTS",
                                        "10000000 100000000 300000000").split()]
RANKS = int(os.environ.get("BENCH_DASK_RANKS", "64"))
MEMORY = os.environ.get("BENCH_DASK_MEMORY", "2GB")
FULL = os.environ.get("BENCH_DASK_FULL") == "1"

PANDAS = """
import json, resource, sys, time
import mpiscope
t = time.perf_counter()
mpiscope.analyze(mpiscope.load(sys.argv[1], use_cache=False)).to_dict()
print(json.dumps({"s": time.perf_counter() - t,
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""

DASK = """
import json, resource, sys, threading, time
from mpiscope.engines import cluster, convert, dask_engine

def rss(dask_worker=None):
    import psutil
    return psutil.Process().memory_info().rss

def spilled(dask_worker):
    s = getattr(dask_worker.data, "spilled_total", None)
    return int(getattr(s, "disk", 0) or 0) if s is not None else 0

def main():
    workers = int(sys.argv[2])
    spec = cluster.ClusterSpec(workers=workers, memory_limit=sys.argv[3])
    with cluster.connect(spec) as c:
        peak = {}
        stop = threading.Event()
        def sample():
            while not stop.is_set():
                try:
                    for w, v in c.run(rss).items():
                        peak[w] = max(peak.get(w, 0), v)
                except Exception:
                    pass
                time.sleep(0.05)
        th = threading.Thread(target=sample, daemon=True)
        th.start()
        t = time.perf_counter()
        if sys.argv[4] == "convert":
            convert.convert(sys.argv[1], c)
        else:
            a = dask_engine.analyze(sys.argv[1], client=c)
        on_cluster = time.perf_counter() - t
        spill = sum(c.run(spilled).values())
        stop.set(); th.join()
        if sys.argv[4] != "convert":
            a.to_dict()  # the client-side results too
        s = time.perf_counter() - t
    print(json.dumps({"s": s, "cluster_s": on_cluster, "worker_rss": sorted(peak.values()),
                      "spilled": spill,
                      "client_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))

if __name__ == "__main__":
    main()
"""


def run(code: str, *args: str) -> dict | None:
    # not pandas.py / dask.py: the script's directory comes first on sys.path
    script = OUT / ("run_pandas.py" if code is PANDAS else "run_dask.py")
    script.write_text(code)
    p = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True)
    if p.returncode != 0:
        print(f"  failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])


def gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


def main() -> int:
    from mpiscope.engines.choose import PANDAS_BYTES_PER_EVENT, available_memory

    OUT.mkdir(parents=True, exist_ok=True)
    for events in SIZES:
        if events > 100_000_000 and not FULL:
            print(f"{events:.0e} events: skipped (BENCH_DASK_FULL=1 runs it: generating and "
                  "converting 3x10^8 events takes about an hour on 2 cores, and the "
                  "cross-rank analyses still run in the client process)")
            continue
        d = OUT / f"synth-{RANKS}-{events}"
        if not (d / "traces.otf2").exists():
            subprocess.run([str(SYNTH), "--ranks", str(RANKS), "--events", str(events),
                            "--out", str(d)], check=True, capture_output=True)
        from mpiscope.engines.choose import event_count

        shutil.rmtree(d / ".mpiscope-cache", ignore_errors=True)
        n = event_count(d)
        print(f"== {n:,} events, {RANKS} ranks")
        row = {}
        need = n * PANDAS_BYTES_PER_EVENT
        if need > available_memory():
            print(f"  pandas: does not fit ({gb(need)} needed, {gb(available_memory())} "
                  "available)")
        else:
            row["pandas"] = r = run(PANDAS, str(d))
            if r:
                print(f"  pandas: {r['s']:.1f} s, peak RSS {gb(r['rss'])} "
                      f"({r['rss'] / n:.0f} B/event)")
        # the client still runs the cross-rank analyses on the whole trace
        # (engines/dask_engine.py): where that does not fit, only the conversion is run
        mode = "analyze" if need <= available_memory() else "convert"
        if mode == "convert":
            print("  dask: conversion only (the cross-rank analyses still run in the client "
                  "process and would not fit)")
        for w in (1, 2):
            shutil.rmtree(d / ".mpiscope-cache", ignore_errors=True)
            row[w] = r = run(DASK, str(d), str(w), MEMORY, mode)
            if r:
                print(f"  dask {mode} {w} worker{'s' if w > 1 else ''}: {r['s']:.1f} s "
                      f"(on the cluster {r['cluster_s']:.1f} s, "
                      f"{n / r['cluster_s'] / w / 1e6:.2f} M events/s per worker), "
                      f"peak RSS per worker {', '.join(gb(x) for x in r['worker_rss'])}, "
                      f"spilled {gb(r['spilled'])}, client peak RSS {gb(r['client_rss'])}")
        p, d1, d2 = row.get("pandas"), row.get(1), row.get(2)
        ratios = []
        if p and d1:
            ratios.append(f"pandas/dask1 time {p['s'] / d1['s']:.2f}x")
        if p and d2:
            ratios.append(f"pandas/dask2 time {p['s'] / d2['s']:.2f}x")
        if d1 and d2:
            scale = d1["cluster_s"] / d2["cluster_s"]
            ratios.append(f"dask 1->2 workers (cluster part) {scale:.2f}x")
        print("  ratios: " + ("; ".join(ratios) or "-"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
