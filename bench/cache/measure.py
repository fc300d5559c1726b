"""bench/cache: the cost of never trusting a cache (archive/cache.py), beside the cost of
reading one. See `run` for what is printed; each figure in a fresh process, best of
--repeat by CPU time (the machine may be shared: the load average is printed too)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CHILD = """
import json, resource, sys, time
from pathlib import Path
from mpiscope.archive import cache, reader
from mpiscope.archive.decode import READER_VERSION
import numpy, pandas, pyarrow  # imports are not part of what is measured
what, trace = sys.argv[1], Path(sys.argv[2])
d = trace / cache.CACHE_NAME
def usage():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
w0, c0 = time.perf_counter(), usage()
if what == "cold":
    reader.load(trace)
elif what == "sources":
    cache.sources(trace)
elif what == "files":
    cache._records(cache._cache_files(d), d)
elif what == "open":
    assert cache.load(trace, f"{READER_VERSION}:traces.otf2") is not None
elif what == "checks":
    man = json.loads((d / "manifest.json").read_text())
    t = cache._read(d, trace, man)
    w0, c0 = time.perf_counter(), usage()
    assert cache.check_manifest(man) is None and cache.check_trace(t, man) is None
print(json.dumps({"wall": time.perf_counter() - w0, "cpu": usage() - c0}))
"""


def measure(what: str, trace: Path, repeat: int, before=None) -> tuple[float, float]:
    """(best CPU s, wall s of that run) of `what` on `trace`; `before()` runs first each
    time (unmeasured)."""
    best = None
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    for _ in range(repeat):
        if before:
            before()
        out = subprocess.run([sys.executable, "-c", CHILD, what, str(trace)], env=env,
                             capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        if best is None or r["cpu"] < best[0]:
            best = (r["cpu"], r["wall"])
    assert best is not None
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--ranks", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    base = a.out / f"r{a.ranks}-e{a.events}"
    if not (base / "traces.otf2").is_file():
        shutil.rmtree(base, ignore_errors=True)
        base.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([str(REPO / "build" / "native" / "mpiscope-synth"), "--ranks",
                        str(a.ranks), "--events", str(a.events), "--out", str(base)],
                       check=True, capture_output=True)
    trace_bytes = sum(f.stat().st_size for f in base.rglob("*")
                      if f.is_file() and ".mpiscope-cache" not in f.parts)
    print(f"trace: {a.events:.0e} events, {a.ranks} ranks, {trace_bytes / 2**20:.0f} MiB; "
          f"load average {os.getloadavg()[0]:.1f}; best of {a.repeat} (CPU s, wall s)")

    def drop_cache() -> None:
        shutil.rmtree(base / ".mpiscope-cache", ignore_errors=True)

    cold = measure("cold", base, a.repeat, drop_cache)
    measure("cold", base, 1, drop_cache)  # leave a cache made as `analyze` makes it
    cache_bytes = sum(f.stat().st_size for f in (base / ".mpiscope-cache").rglob("*")
                      if f.is_file())
    sources = measure("sources", base, a.repeat)
    files = measure("files", base, a.repeat)
    checks = measure("checks", base, a.repeat)
    opened = measure("open", base, a.repeat)
    copy = base.parent / (base.name + "-copy")

    def fresh_copy() -> None:
        shutil.rmtree(copy, ignore_errors=True)
        subprocess.run(["cp", "-a", str(base), str(copy)], check=True)
    copied = measure("open", copy, a.repeat, fresh_copy)
    shutil.rmtree(copy, ignore_errors=True)
    row = "{:<44} {:>7.3f} {:>7.3f}  {}"
    print(row.format("cold read + cache written (hashes included)", *cold, ""))
    print(row.format(f"SHA-256 of the trace's files ({trace_bytes / 2**20:.0f} MiB)", *sources,
                     f"{100 * sources[0] / cold[0]:.1f}% of the cold read"))
    print(row.format(f"SHA-256 of the cache's files ({cache_bytes / 2**20:.0f} MiB)", *files,
                     f"{100 * files[0] / opened[0]:.1f}% of opening the cache"))
    print(row.format("checks of the manifest and tables", *checks,
                     f"{100 * checks[0] / opened[0]:.1f}% of opening the cache"))
    print(row.format("open the cache (stat keys unchanged)", *opened, ""))
    print(row.format("open the cache after cp -a (hashed once)", *copied,
                     f"{copied[0] / opened[0]:.2f}x the unchanged open"))


if __name__ == "__main__":
    main()
