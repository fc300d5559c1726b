"""Window statistics out of core (mpiscope_webui.oocwindow: the Functions tab of the
out-of-core page) on a big trace: what a zoom costs, against the target (300 ms at 10 M
events), with the reference measured side by side in the same run: the in-memory
window's function profile (mpiscope.analysis.window, a new Window each step) and a plain
pandas filter + groupby of the calls; each out-of-core answer is checked equal to the
in-memory one (calls exactly, time to the ns).

Each step is measured cold (the pyramid opened anew: no level or detail row group kept,
but the OS page cache warm) and warm (the page's next ask of a nearby window: the coarse
levels and the row groups read lately are kept, as in a serving session).

Then the Breakdown tab's window breakdown out of core (oocwindow.WindowBreakdown: each
rank's measured calls, memory-mapped, two binary searches per rank), its files written
here from the in-memory index (the server has them from the analysis' per-rank pass:
the same content), beside the in-memory window's breakdown, checked equal.

Then the Messages tab's tables out of core (oocwindow.WindowMessages: each rank's sent
messages by send time, memory-mapped, one range per sender; the matrix, the sizes and the
messages per communicator and tag), its files written here from the in-memory index split
by sender (the server's per-rank pass writes each rank's slice's: the same content),
beside the in-memory window's tables, checked equal.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from mpiscope.analysis.session import Analysis
from mpiscope.archive import reader
from mpiscope_webui import oocwindow, pyramid

sys.path.insert(0, str(Path(__file__).parent))
from measure import TARGET_S, reference, windows  # noqa: E402  (this directory's bench)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace", type=Path)
    ap.add_argument("--ranks", type=int, default=0, help="also a rank set of this many")
    args = ap.parse_args()
    t = time.perf_counter()
    trace = reader.load(args.trace)  # the reference's tables; writes the Parquet cache
    print(f"trace: {args.trace} · {trace.num_ranks} ranks · {len(trace.calls):,} calls · "
          f"loaded in {time.perf_counter() - t:.2f} s (in memory, for the reference) · "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    t = time.perf_counter()
    p = pyramid.Pyramid.open(args.trace)  # built if missing or of an older layout
    print(f"pyramid open (built if missing): {time.perf_counter() - t:.2f} s · "
          f"{p.levels} levels · finest {p.cols(p.levels - 1):,} columns")
    s = Analysis(trace)
    t = time.perf_counter()
    ix = s.window_index
    print(f"in-memory window index (once per trace): {time.perf_counter() - t:.2f} s")
    lo, hi = ix.span
    sets = [None] + ([tuple(range(0, trace.num_ranks, max(trace.num_ranks // args.ranks, 1)))
                      [:args.ranks]] if args.ranks else [])
    print(f"{'window':>16} {'ranks':>5} {'calls':>11} {'level':>5} {'cols':>5} "
          f"{'rows read':>9} {'ooc cold':>9} {'ooc warm':>9} {'target':>6} "
          f"{'in memory':>9} {'pandas':>8} equal")
    worst = 0.0
    warm_p = pyramid.Pyramid.open(args.trace, build_if_missing=False)
    for ranks in sets:
        for name, a, b in windows(lo, hi + 1):
            cold_p = pyramid.Pyramid.open(args.trace, build_if_missing=False)
            t = time.perf_counter()
            got = oocwindow.window_stats(cold_p, a, b, ranks)
            prof = got.profile()
            cold = time.perf_counter() - t
            t = time.perf_counter()
            oocwindow.window_stats(warm_p, a, b, ranks).profile()
            warm = time.perf_counter() - t
            ix.forget()
            t = time.perf_counter()
            want = s.window(a, b, ranks).functions()
            mem = time.perf_counter() - t
            t = time.perf_counter()
            reference(trace.calls if ranks is None else
                      trace.calls[trace.calls["rank"].isin(ranks)], a, b)
            ref = time.perf_counter() - t
            equal = (prof["name"].tolist() == want["name"].tolist()
                     and prof["calls"].tolist() == want["calls"].tolist()
                     and bool(np.allclose(prof["time_s"], want["time_s"], rtol=0,
                                          atol=0.5e-9)))
            worst = max(worst, cold)
            print(f"{name:>16} {'all' if ranks is None else len(ranks):>5} "
                  f"{int(got.calls.sum()):>11,} {str(got.level):>5} {got.columns:>5} "
                  f"{got.calls_read:>9,} {cold * 1e3:>7.0f}ms {warm * 1e3:>7.0f}ms "
                  f"{'ok' if cold <= TARGET_S else 'OVER':>6} {mem * 1e3:>7.0f}ms "
                  f"{ref * 1e3:>6.0f}ms {'yes' if equal else 'NO'}")
    print(f"slowest out-of-core window (cold): {worst * 1e3:.0f} ms "
          f"(target {TARGET_S * 1e3:.0f} ms), load {os.getloadavg()[0]:.2f}")
    breakdowns(s, sets, windows(lo, hi + 1))
    messages(s, sets, windows(lo, hi + 1))
    return 0


def breakdowns(s: Analysis, sets: list, steps: list[tuple[str, int, int]]) -> None:
    ix = s.window_index
    with tempfile.TemporaryDirectory(prefix="mpiscope-bench-breakdown-") as tmp:
        d = Path(tmp)
        t = time.perf_counter()
        meta = [oocwindow.write_breakdown(d, r, ix) for r in range(ix.num_ranks)]
        (d / oocwindow.BREAKDOWN_META).write_text(json.dumps(meta))
        size = sum(f.stat().st_size for f in d.iterdir())
        print(f"\nwindow breakdown files: {time.perf_counter() - t:.2f} s to write here, "
              f"{size / 1e6:.0f} MB; load {os.getloadavg()[0]:.2f}")
        print(f"{'window':>16} {'ranks':>5} {'ooc cold':>9} {'ooc warm':>9} {'target':>6} "
              f"{'in memory':>9} equal")
        worst = 0.0
        warm_b = oocwindow.WindowBreakdown.open(d)
        for ranks in sets:
            for name, a, b in steps:
                t = time.perf_counter()
                got = oocwindow.WindowBreakdown.open(d).frame(a, b, ranks)
                cold = time.perf_counter() - t
                t = time.perf_counter()
                warm_b.frame(a, b, ranks)
                warm = time.perf_counter() - t
                ix.forget()
                t = time.perf_counter()
                want = s.window(a, b, ranks).breakdown()
                mem = time.perf_counter() - t
                cols = ["total_s", "compute_s", "communication_s", "synchronization_s",
                        "io_s"]
                equal = (got["rank"].tolist() == want["rank"].tolist() and bool(
                    np.allclose(got[cols].to_numpy(), want[cols].to_numpy(), rtol=0,
                                atol=1.5e-9)))
                worst = max(worst, cold)
                print(f"{name:>16} {'all' if ranks is None else len(ranks):>5} "
                      f"{cold * 1e3:>7.1f}ms {warm * 1e3:>7.1f}ms "
                      f"{'ok' if cold <= TARGET_S else 'OVER':>6} {mem * 1e3:>7.0f}ms "
                      f"{'yes' if equal else 'NO'}")
        print(f"slowest out-of-core window breakdown (cold): {worst * 1e3:.1f} ms "
              f"(target {TARGET_S * 1e3:.0f} ms), load {os.getloadavg()[0]:.2f}")


def messages(s: Analysis, sets: list, steps: list[tuple[str, int, int]]) -> None:
    ix = s.window_index
    with tempfile.TemporaryDirectory(prefix="mpiscope-bench-messages-") as tmp:
        d = Path(tmp)
        t = time.perf_counter()
        rows = ix.message_rows()
        writer = oocwindow.MessagesWriter(d)
        for r in range(ix.num_ranks):
            writer.add(r, rows.take(np.flatnonzero(rows.send == r)), ix.comm_names)
        writer.close()
        size = sum(f.stat().st_size for f in d.iterdir())
        print(f"\nwindow message files: {time.perf_counter() - t:.2f} s to write here, "
              f"{size / 1e6:.0f} MB ({len(rows):,} messages); load {os.getloadavg()[0]:.2f}")
        print(f"{'window':>16} {'ranks':>5} {'messages':>10} {'ooc cold':>9} {'ooc warm':>9} "
              f"{'target':>6} {'in memory':>9} equal")
        worst = 0.0
        warm_m = oocwindow.WindowMessages.open(d)

        def tab(m: oocwindow.WindowMessages, a: int, b: int, ranks):
            """The Messages tab and the Profiles' messages table, as the page asks."""
            return m.tables(a, b, ranks, ix.num_ranks), m.profile(a, b, ranks)

        for ranks in sets:
            for name, a, b in steps:
                t = time.perf_counter()
                got, prof = tab(oocwindow.WindowMessages.open(d), a, b, ranks)
                cold = time.perf_counter() - t
                t = time.perf_counter()
                tab(warm_m, a, b, ranks)
                warm = time.perf_counter() - t
                ix._cache.clear()
                ix._whole = None
                t = time.perf_counter()
                w = s.window(a, b, ranks)
                want = (w.comm_matrix(), w.message_sizes(), w.message_profile())
                mem = time.perf_counter() - t
                equal = all(x.equals(y) for x, y in zip((got.matrix, got.sizes, prof), want,
                                                         strict=True))
                worst = max(worst, cold)
                print(f"{name:>16} {'all' if ranks is None else len(ranks):>5} "
                      f"{got.messages:>10,} {cold * 1e3:>7.1f}ms {warm * 1e3:>7.1f}ms "
                      f"{'ok' if cold <= TARGET_S else 'OVER':>6} {mem * 1e3:>7.0f}ms "
                      f"{'yes' if equal else 'NO'}")
        print(f"slowest out-of-core window messages (cold): {worst * 1e3:.1f} ms "
              f"(target {TARGET_S * 1e3:.0f} ms), load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    sys.exit(main())
