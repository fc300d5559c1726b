"""bench/dask: the pandas engine vs the Dask engine with 1 and 2 workers on synthetic traces.

Per trace size (mpiscope-synth, made once under BENCH_DASK_TRACES and reused), each run
cold (no cache) in a fresh process, each phase measured on its own:
  - pandas: `mpiscope.load` (OTF2 -> tables, writing the Parquet cache, as the first
    `mpiscope analyze` does), then `mpiscope.analyze(trace).to_dict()`: wall time and
    peak RSS of the process. Not run where events x the B/event measured at a smaller size
    (else engines/choose.py's figure) exceed BENCH_DASK_HEADROOM of the memory available:
    "does not fit (needs ~X GB at B B/event, Y GB available)".
  - dask N (a LocalCluster of N one-thread workers, BENCH_DASK_MEMORY each):
      conversion: `engines.convert.convert` (OTF2 -> the partitioned Parquet cache);
      analysis:   `engines.dask_engine.analyze(dir, client=...)` on that cache, then
                  `.to_dict()` (what `mpiscope analyze --engine dask` runs, whatever runs
                  on the workers at the time), its two parts timed apart;
    wall time, events/s per worker, each worker's peak RSS (its process sampled every
    20 ms with psutil, from outside: a worker busy in a task is still sampled), bytes the
    workers spilled to disk (their `disk-write` byte counters), the client's peak RSS, and
    the CPU seconds of the workers and of the client (on a busy machine the wall time
    scales with the cores the benchmark gets; the CPU seconds say what the work costs).
    The analysis is skipped where the client's peak RSS per event, measured at a smaller
    size, says the client would not fit.
Prints one table per size, the seconds the workers spent per kind of task (Dask's task
prefixes: which step dominates), and the ratios (1 -> 2 workers per phase; pandas / dask).

    BENCH_DASK_EVENTS="10000000 100000000 300000000"
    BENCH_DASK_RANKS="64 256 1024" (one per size; default: 64 to 10^7, 256 to 10^8, else 1024)
    BENCH_DASK_MEMORY=4GB (per worker)   BENCH_DASK_HEADROOM=0.7
    BENCH_DASK_WORKERS="1 2" (the Dask runs; the 1 -> 2 ratio needs both)
    BENCH_DASK_ANALYSIS=0 (the conversion only: its 1 -> 2 worker scaling on a big trace)
    BENCH_DASK_TRACES=/work/bigtraces (synth-<ranks>r-<events>, shared, reused)
    BENCH_DASK_DIR=build/bench/dask (per-trace directories of links: the caches go there)
"""

from __future__ import annotations

import fcntl
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SYNTH = Path(os.environ.get("MPISCOPE_BUILD_DIR", REPO / "build")) / "native" / "mpiscope-synth"
OUT = Path(os.environ.get("BENCH_DASK_DIR", REPO / "build" / "bench" / "dask"))
TRACES = Path(os.environ.get("BENCH_DASK_TRACES", "/work/bigtraces"))
SIZES = [int(float(x)) for x in os.environ.get(
    "BENCH_DASK_EVENTS", "10000000 100000000 300000000").split()]
RANKS = [int(x) for x in os.environ.get("BENCH_DASK_RANKS", "").split()]
MEMORY = os.environ.get("BENCH_DASK_MEMORY", "4GB")
HEADROOM = float(os.environ.get("BENCH_DASK_HEADROOM", "0.7"))
WORKERS = [int(x) for x in os.environ.get("BENCH_DASK_WORKERS", "1 2").split()]
ANALYSIS = os.environ.get("BENCH_DASK_ANALYSIS", "1") != "0"  # 0: the conversion only
SYNTH_BYTES_PER_EVENT = 17  # the OTF2 files mpiscope-synth writes (measured: 162 MB/10^7)


# ---- the trace -------------------------------------------------------------------------

def shared_trace(ranks: int, events: int) -> Path:
    """TRACES/synth-<ranks>r-<events>, made once (others may make or use it too: a lock
    file, and the directory appears whole or not at all)."""
    from mpiscope import output

    d = TRACES / f"synth-{ranks}r-{events}"
    TRACES.mkdir(parents=True, exist_ok=True)
    with open(TRACES / f".{d.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (d / "traces.otf2").exists():
            need = events * SYNTH_BYTES_PER_EVENT
            free = shutil.disk_usage(TRACES).free
            if need > free * 0.8:
                raise SystemExit(f"{d}: needs ~{gb(need)}, {gb(free)} free on its disk")
            print(f"making {d} ...", flush=True)
            with output.publish_dir(d) as tmp:
                subprocess.run([str(SYNTH), "--ranks", str(ranks), "--events", str(events),
                                "--out", str(tmp / "t")], check=True, capture_output=True)
                for f in (tmp / "t").iterdir():
                    f.rename(tmp / f.name)
                (tmp / "t").rmdir()
    return d


def private_copy(trace: Path) -> Path:
    """A directory of links to the shared trace's files: its caches are written here, so
    removing them for a cold run never touches what others read."""
    d = OUT / trace.name
    d.mkdir(parents=True, exist_ok=True)
    for f in trace.iterdir():
        if f.name.startswith("."):
            continue
        link = d / f.name
        if not link.is_symlink():
            link.symlink_to(f)
    return d


def cold(d: Path) -> None:
    from mpiscope.archive import cache

    for c in cache.candidates(d):
        shutil.rmtree(c, ignore_errors=True)


# ---- the measured processes -------------------------------------------------------------

def rss() -> int:
    import psutil

    return int(psutil.Process().memory_info().rss)


def child_pandas(trace: str) -> dict:
    import mpiscope

    c0, t0 = time.process_time(), time.perf_counter()
    tr = mpiscope.load(trace)
    c1, t1 = time.process_time(), time.perf_counter()
    read_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    mpiscope.analyze(tr).to_dict()
    t2 = time.perf_counter()
    return {"read_s": t1 - t0, "analysis_s": t2 - t1, "read_rss": read_peak,
            "read_cpu": c1 - c0, "analysis_cpu": time.process_time() - c1,
            "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}


def spilled_bytes(dask_worker) -> int:
    """Bytes this worker wrote to its spill directory so far (its metric counters)."""
    return int(sum(v for k, v in dask_worker.digests_total.items()
                   if isinstance(k, tuple) and k[-2:] == ("disk-write", "bytes")))


def task_seconds(dask_scheduler) -> dict[str, float]:
    """Seconds the workers spent computing tasks so far, per task name (Dask's prefixes:
    mpiscope-decode, place, match, finish, ...)."""
    return {name: float(tp.all_durations.get("compute", 0.0))
            for name, tp in dask_scheduler.task_prefixes.items()}


def tasks_between(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    d = {k: v - before.get(k, 0.0) for k, v in after.items()}
    return dict(sorted(((k, round(v, 1)) for k, v in d.items() if v >= 0.05),
                       key=lambda kv: -kv[1]))


class Sampler:
    """Peak RSS of each worker process and of this process, every 20 ms, from outside."""

    def __init__(self, client) -> None:
        self.client = client
        self.pids: dict[str, int] = client.run(os.getpid)
        self.peak: dict[str, int] = {}
        self.client_peak = 0
        self.own_cpu = 0.0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        import psutil

        me = psutil.Process()
        while not self.stop.is_set():
            self.own_cpu = time.thread_time()  # this thread's polling, not the client's work
            with self.lock:
                for w, pid in list(self.pids.items()):
                    try:
                        v = psutil.Process(pid).memory_info().rss
                    except psutil.Error:  # restarted (memory limit): its new process
                        try:
                            self.pids = self.client.run(os.getpid)
                        except Exception:  # noqa: BLE001 - sampling only
                            pass
                        continue
                    self.peak[w] = max(self.peak.get(w, 0), v)
                self.client_peak = max(self.client_peak, me.memory_info().rss)
            time.sleep(0.02)

    def phase(self) -> tuple[list[int], int]:
        """Peaks since the last call (per worker, sorted; the client's), then reset."""
        with self.lock:
            out = sorted(self.peak.values()), self.client_peak
            self.peak, self.client_peak = {}, 0
        return out

    def cpu(self) -> tuple[float, float]:
        """CPU seconds (user + system) used so far by the workers (summed) and by this
        process less the sampling: on a busy machine the wall time scales with the cores
        we get, these not."""
        import psutil

        def used(pid: int) -> float:
            try:
                t = psutil.Process(pid).cpu_times()
            except psutil.Error:
                return 0.0
            return t.user + t.system

        with self.lock:
            pids = list(self.pids.values())
        return sum(used(p) for p in pids), used(os.getpid()) - self.own_cpu

    def close(self) -> None:
        self.stop.set()
        self.thread.join()


def child_dask(trace: str, workers: int, memory: str, analysis: bool) -> dict:
    import dask

    from mpiscope.engines import cluster, convert, dask_engine

    # a worker whose task holds the GIL for long on a loaded machine answers late: the
    # benchmark's own calls to it (RSS, spill counters) wait instead of failing
    dask.config.set({"distributed.comm.timeouts.connect": "300s",
                     "distributed.comm.timeouts.tcp": "300s"})
    res: dict = {}
    with cluster.connect(cluster.ClusterSpec(workers=workers, memory_limit=memory)) as c:
        s = Sampler(c)
        s.phase()
        spill0 = sum(c.run(spilled_bytes).values())
        cpu0, ts0 = s.cpu(), c.run_on_scheduler(task_seconds)
        t0 = time.perf_counter()
        convert.convert(trace, c)
        res["convert_s"] = time.perf_counter() - t0
        cpu1, ts1 = s.cpu(), c.run_on_scheduler(task_seconds)
        res["convert_cpu"] = [cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]]
        res["convert_tasks"] = tasks_between(ts0, ts1)
        spill1 = sum(c.run(spilled_bytes).values())
        res["convert_worker_rss"], res["convert_client_rss"] = s.phase()
        res["convert_spilled"] = spill1 - spill0
        if analysis:
            base = rss()
            t0 = time.perf_counter()
            a = dask_engine.analyze(trace, client=c)
            t1 = time.perf_counter()
            a.to_dict()
            t2 = time.perf_counter()
            res.update(analyze_s=t1 - t0, to_dict_s=t2 - t1, analysis_s=t2 - t0)
            cpu2 = s.cpu()
            res["analysis_cpu"] = [cpu2[0] - cpu1[0], cpu2[1] - cpu1[1]]
            res["analysis_tasks"] = tasks_between(ts1, c.run_on_scheduler(task_seconds))
            res["analysis_worker_rss"], res["analysis_client_rss"] = s.phase()
            res["analysis_client_base"] = base
            res["analysis_spilled"] = sum(c.run(spilled_bytes).values()) - spill1
        s.close()
    return res


def run_child(*args: str) -> dict | None:
    # this file run again in a fresh process (bench/dask holds no pandas.py or dask.py)
    p = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
    if p.returncode != 0:
        # the exception, with the line that raised it
        tail = [x.strip() for x in p.stderr.strip().splitlines()[-3:]]
        print(f"  failed: {' / '.join(tail) or '?'}", flush=True)
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])


# ---- the table ---------------------------------------------------------------------------

def gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


def row(name: str, phase: str, s: float | None, cpu: str, n: int, workers: int,
        wrss: list[int] | str, spill: int | None, crss: int | None) -> str:
    rate = f"{n / s / workers / 1e6:.2f}" if s else "-"
    w = wrss if isinstance(wrss, str) else (", ".join(gb(x) for x in wrss) or "-")
    return (f"| {name} | {phase} | {f'{s:.1f}' if s else '-'} | {cpu} | {rate} | {w} | "
            f"{gb(spill) if spill is not None else '-'} | {gb(crss) if crss else '-'} |")


def cpu(workers_and_client: list[float], wall: float, workers: int) -> str:
    """Workers' + client's CPU seconds, and the share of the phase the workers computed:
    well below 100% with idle workers, or on a machine whose cores others are using."""
    w, c = workers_and_client
    return f"{w:.1f} + {c:.1f} ({w / wall / workers:.0%})"


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> int:
    from mpiscope.engines.choose import PANDAS_BYTES_PER_EVENT, available_memory, event_count

    OUT.mkdir(parents=True, exist_ok=True)
    pandas_bpe = float(PANDAS_BYTES_PER_EVENT)  # until measured here
    pandas_bpe_from = "engines/choose.py"
    client_bpe: float | None = None
    client_bpe_from = ""
    # default: 64 ranks up to 10^7 events, 256 up to 10^8, 1024 beyond
    ranks_of = RANKS + [RANKS[-1]] * (len(SIZES) - len(RANKS)) if RANKS else \
        [64 if e <= 10**7 else 256 if e <= 10**8 else 1024 for e in SIZES]
    print(f"{os.cpu_count()} cores, {gb(available_memory())} available, workers "
          f"{MEMORY} each, headroom {HEADROOM:.0%} of the available memory", flush=True)
    for events, ranks in zip(SIZES, ranks_of, strict=True):
        d = private_copy(shared_trace(ranks, events))
        n = event_count(d)
        avail = available_memory()
        print(f"\n== {d.name}: {n:,} events, {ranks} ranks (load avg 1/5/15 min before: "
              f"{load()})", flush=True)
        lines = ["| run | phase | time s | CPU s workers + client (workers busy) "
                 "| M events/s per worker "
                 "| peak RSS per worker | spilled | client peak RSS |",
                 "|---|---|---|---|---|---|---|---|"]
        res: dict[str, dict | None] = {}
        need = n * pandas_bpe
        if need > HEADROOM * avail:
            lines.append(f"| pandas | - | does not fit (needs ~{gb(need)} at {pandas_bpe:.0f} "
                         f"B/event from {pandas_bpe_from}, {gb(avail)} available) "
                         "| | | | | |")
        else:
            cold(d)
            p = res["pandas"] = run_child("pandas", str(d))
            if p:
                pandas_bpe, pandas_bpe_from = p["rss"] / n, f"{n:.0e} events"
                for phase, sec, c, peak in (
                        ("read + cache", p["read_s"], p["read_cpu"], p["read_rss"]),
                        ("analysis", p["analysis_s"], p["analysis_cpu"], p["rss"]),
                        ("total", p["read_s"] + p["analysis_s"],
                         p["read_cpu"] + p["analysis_cpu"], p["rss"])):
                    lines.append(row("pandas", phase, sec, f"{c:.1f} ({c / sec:.0%})", n, 1,
                                     "-", None, peak))
        analysis = ANALYSIS and (client_bpe is None or n * client_bpe <= HEADROOM * avail)
        for w in WORKERS:
            cold(d)
            r = res[f"dask{w}"] = run_child("dask", str(d), str(w), MEMORY,
                                            "1" if analysis else "0")
            name = f"dask {w} worker{'s' if w > 1 else ''}"
            if not r:
                continue
            lines.append(row(name, "conversion", r["convert_s"],
                             cpu(r["convert_cpu"], r["convert_s"], w), n, w,
                             r["convert_worker_rss"], r["convert_spilled"],
                             r["convert_client_rss"]))
            if "analysis_s" in r:
                lines.append(row(name, f"analysis (analyze {r['analyze_s']:.1f} s + to_dict "
                                 f"{r['to_dict_s']:.1f} s)", r["analysis_s"],
                                 cpu(r["analysis_cpu"], r["analysis_s"], w), n, w,
                                 r["analysis_worker_rss"], r["analysis_spilled"],
                                 r["analysis_client_rss"]))
                bpe = max(r["analysis_client_rss"] - r["analysis_client_base"], 0) / n
                if client_bpe is None or bpe > client_bpe:
                    client_bpe, client_bpe_from = bpe, f"{n:.0e} events"
            elif not ANALYSIS:
                lines.append(f"| {name} | analysis | not run (BENCH_DASK_ANALYSIS=0) "
                             "| | | | | |")
            else:
                lines.append(f"| {name} | analysis | not run: the client would need "
                             f"~{gb(n * (client_bpe or 0))} ({client_bpe or 0:.0f} B/event "
                             f"over its base at {client_bpe_from}), {gb(avail)} available "
                             "| | | | | |")
        print("\n".join(lines))
        for w in WORKERS:
            r = res.get(f"dask{w}")
            for phase in ("convert", "analysis"):
                if r and f"{phase}_tasks" in r:
                    print(f"dask {w}, {phase}: task seconds " + ", ".join(
                        f"{k} {v}" for k, v in r[f"{phase}_tasks"].items()))
        ratios = []
        d1, d2, p = res.get("dask1"), res.get("dask2"), res.get("pandas")
        for key, what in (("convert_s", "conversion"), ("analysis_s", "analysis")):
            if d1 and d2 and key in d1 and key in d2:
                ratios.append(f"{what} 1 -> 2 workers {d1[key] / d2[key]:.2f}x")
        if p and d2 and "analysis_s" in d2:
            tot = d2["convert_s"] + d2["analysis_s"]
            ratios.append(f"pandas total / dask 2 workers total "
                          f"{(p['read_s'] + p['analysis_s']) / tot:.2f}x")
        for w in WORKERS:
            r = res.get(f"dask{w}")
            if p and r and "analysis_cpu" in r:
                # the target: the workers' CPU per event within 1.5x pandas'
                wa, ca = r["analysis_cpu"]
                wt = wa + r["convert_cpu"][0]
                pt = p["read_cpu"] + p["analysis_cpu"]
                ratios.append(
                    f"dask {w} worker CPU/event analysis {wa / n * 1e6:.2f} us vs pandas "
                    f"analysis {p['analysis_cpu'] / n * 1e6:.2f} us: "
                    f"{wa / p['analysis_cpu']:.2f}x (with conversion vs read: "
                    f"{wt / pt:.2f}x); client CPU {ca / n * 1e6:.2f} us/event")
        print("ratios: " + ("; ".join(ratios) or "-"))
        print(f"load avg after: {load()}", flush=True)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "pandas":
        print(json.dumps(child_pandas(sys.argv[2])))
    elif len(sys.argv) > 1 and sys.argv[1] == "dask":
        print(json.dumps(child_dask(sys.argv[2], int(sys.argv[3]), sys.argv[4],
                                    sys.argv[5] == "1")))
    else:
        sys.exit(main())
