"""bench/dask/passes.py CACHE_TRACE_DIR: what each of the Dask engine's rank passes costs,
without Dask: every pass of `DaskAnalysis._distributed` and the wait states run in this
process over every rank's slice held in memory, each rank function's CPU time summed.
Compare its total with the pandas engine's analysis CPU (bench/dask/run prints it):
the difference between the two and the Dask workers' CPU is Dask's own overhead.

    PYTHONPATH=analyzer:webui:testing python3 bench/dask/passes.py DIR  # DIR has a cache
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from mpiscope.analysis import callpaths
from mpiscope.engines import dask_engine, fused, ranktasks, slices, waits
from mpiscope.engines.daskcache import open_cache


def main(d: str) -> None:
    t = open_cache(d)
    if t is None:
        raise SystemExit(f"{d}: no complete cache (run mpiscope analyze on it once)")
    ranks = sorted(int(r) for r in t.small("ranks")["rank"].unique())
    bare = ranktasks.Source(str(t.dir), str(t.trace_dir), t.manifest, None, None)
    used = sorted({p for r in ranks for p in ranktasks._used_paths(bare, r)})
    paths = callpaths.CallPaths.of(
        SimpleNamespace(callpaths=ranktasks._small(t, "callpaths")), (),  # type: ignore[arg-type]
        used=used)
    rec = t.dir / ranktasks.DERIVED / "received-by-receiver"
    src = replace(bare, paths=paths, received=str(rec) if rec.is_dir() else None)
    c0 = time.process_time()
    sl = {r: ranktasks.build_slice(src, r, with_waits=False) for r in ranks}
    build = time.process_time() - c0
    cost: dict[str, float] = defaultdict(float)
    kept: dict[int, Any] = {}

    def name(fn: Any) -> str:
        f = getattr(fn, "func", fn)
        mod = getattr(f, "__module__", "?").split(".")[-1]
        return f"{getattr(f, '__qualname__', type(f).__name__)} ({mod})"

    def one(fn: Any, s: slices.RankSlice) -> Any:
        if isinstance(fn, fused._Fused):
            return [one(f, s) for f in fn.fns]
        if isinstance(fn, slices.Reduced):
            return one(fn.fn, s)
        key = name(fn.fn if isinstance(fn, slices.PerRank) else fn)
        c = time.process_time()
        try:
            return fn(s)
        finally:
            cost[key] += time.process_time() - c

    def run(fn: Any, *, waits: bool = True) -> list:
        return [one(fn, replace(sl[r], waits=kept[r]) if waits else sl[r]) for r in ranks]

    tmp = Path(tempfile.mkdtemp()) / "w"
    tmp.mkdir()
    ws = replace(waits.compute(lambda fn: run(fn, waits=False), tmp), scratch=tmp)
    for r in ranks:
        kept[r] = waits.read_rank(str(tmp), r)
    a = dask_engine.DaskAnalysis(t)
    a._paths = paths
    a._results["wait_states"] = ws
    c0 = time.process_time()
    a._distributed(run, ws)
    a.to_dict()
    total = sum(cost.values())
    n = int(t.small("ranks")["events"].sum())
    print(f"{n:,} events, {len(ranks)} ranks: building the slices {build:.2f} CPU s; the "
          f"passes {total:.2f} CPU s = {total / n * 1e6:.2f} us/event; the analysis after "
          f"the wait states, passes and combines, {time.process_time() - c0:.2f} CPU s")
    for k, v in sorted(cost.items(), key=lambda kv: -kv[1]):
        print(f"  {v:7.2f} s  {k}")


if __name__ == "__main__":
    main(sys.argv[1])
