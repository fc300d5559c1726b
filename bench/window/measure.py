"""Window statistics on a big trace: what a zoom costs the analysis tabs (issue 32).

Prints, for a user session of zooms and pans (bench/webui's windows), the time of each
tab's tables for the visible window (the Window is new for each step: nothing cached),
against the target (a zoom within 300 ms at 10 M events) and, measured side by side, the
reference: the same function profile computed the plain way, a pandas filter of the calls
overlapping the window and a groupby (calls, time inside, min/median/max).

Then the web UI's Profiles tab as its callback answers it (every table of the tab and the
layout's JSON, mpiscope_webui.app.analysis_panel): the whole run computed (once per trace,
at start-up: windowstats.warm) and served (kept by the session), and each window of the
session from scratch.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from mpiscope.analysis.session import Analysis
from mpiscope.archive import reader

TARGET_S = 0.3
TABS = {
    "breakdown": lambda w: w.breakdown(),
    "functions": lambda w: w.functions(),
    "messages": lambda w: (w.comm_matrix(), w.message_sizes()),
    "profiles": lambda w: ([w.profile(by) for by in (("rank", "function"),
                                                      ("function", "callsite"),
                                                      ("function", "comm"),
                                                      ("function", "tag"),
                                                      ("rank", "thread", "function"))],
                           w.message_profile(), w.wait_states(), w.regions(),
                           w.regions(by_rank=True)),
}


def windows(t0: int, t1: int) -> list[tuple[str, int, int]]:
    """Whole run, then zoom in by 3x steps, pan, zoom back out (as bench/webui)."""
    w = t1 - t0
    a = t0 + int(0.37 * w)
    out = [("whole run", t0, t1)]
    out += [(f"zoom 1/{3 ** k}", a, a + w // 3 ** k) for k in range(1, 9)]
    span = w // 3 ** 4
    out += [(f"pan +{k}", a + k * span // 2, a + k * span // 2 + span) for k in range(1, 4)]
    out += [(f"zoom out 1/{3 ** k}", a, a + w // 3 ** k) for k in (2, 1)]
    return out


def reference(calls: pd.DataFrame, t0: int, t1: int) -> pd.DataFrame:
    s, e = calls["start"].to_numpy(), calls["end"].to_numpy()
    hit = (s < t1) & (e > t0)
    c = calls[hit]
    inside = np.minimum(e[hit], t1) - np.maximum(s[hit], t0)
    d = c["end"] - c["start"]
    df = pd.DataFrame({"function": c["function"].to_numpy(), "inside": inside, "d": d})
    g = df.groupby("function", observed=True)
    return g.agg(calls=("d", "size"), time=("inside", "sum"), lo=("d", "min"),
                 med=("d", "median"), hi=("d", "max"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace", type=Path)
    ap.add_argument("--ranks", type=int, default=0, help="also a rank set of this many")
    args = ap.parse_args()
    t = time.perf_counter()
    trace = reader.load(args.trace)
    print(f"trace: {args.trace} · {trace.num_ranks} ranks · {len(trace.calls):,} calls · "
          f"{len(trace.messages):,} messages · loaded in {time.perf_counter() - t:.2f} s · "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    s = Analysis(trace)
    t = time.perf_counter()
    _ = s.wait_states
    print(f"wait states (needed first, once per trace): {time.perf_counter() - t:.2f} s")
    t = time.perf_counter()
    ix = s.window_index
    print(f"window index (once per trace): {time.perf_counter() - t:.2f} s")
    lo, hi = ix.span
    sets = [None] + ([tuple(range(0, trace.num_ranks, max(trace.num_ranks // args.ranks, 1)))
                      [:args.ranks]] if args.ranks else [])
    print(f"{'window':>16} {'ranks':>6} {'calls':>11} " + " ".join(f"{k:>10}" for k in TABS)
          + f" {'worst':>8} {'target':>7} {'reference':>10}")
    worst_all = 0.0
    for ranks in sets:
        for name, a, b in windows(lo, hi + 1):
            ix.forget()  # each step from scratch: nothing kept from the last
            times = []
            for fn in TABS.values():
                ix.forget()
                t = time.perf_counter()
                w = s.window(a, b, ranks)
                fn(w)
                times.append(time.perf_counter() - t)
            t = time.perf_counter()
            reference(trace.calls, a, b)
            ref = time.perf_counter() - t
            worst = max(times)
            worst_all = max(worst_all, worst)
            print(f"{name:>16} {'all' if ranks is None else len(ranks):>6} {len(w.pos):>11,} "
                  + " ".join(f"{x * 1e3:>8.0f}ms" for x in times)
                  + f" {worst * 1e3:>6.0f}ms {'ok' if worst <= TARGET_S else 'OVER':>7}"
                  f" {ref * 1e3:>8.0f}ms")
    print(f"slowest tab of any window: {worst_all * 1e3:.0f} ms (target {TARGET_S * 1e3:.0f} ms)")
    profiles_tab(trace, s, windows(lo, hi + 1))
    return 0


def profiles_tab(trace, s: Analysis, steps: list[tuple[str, int, int]]) -> None:
    """The Profiles tab's callback (tables + layout JSON), as the web UI serves it."""
    try:
        from dash import html
        from plotly.io.json import to_json_plotly

        from mpiscope_webui import app, windowstats
        from mpiscope_webui.controller import Controller
        from mpiscope_webui.model import TraceModel
    except ImportError as err:
        print(f"Profiles tab: not measured (web UI not importable: {err})")
        return
    model = TraceModel.build(trace)
    model.session = s  # the session above: its wait states and window index
    ctl = Controller([model])
    ix = s.window_index

    def answer(scope: windowstats.Scope) -> tuple[float, int]:
        t = time.perf_counter()
        n = len(to_json_plotly(html.Div(app.analysis_panel(ctl, 0, "profiles", scope))))
        return time.perf_counter() - t, n

    print(f"\nProfiles tab callback (every table of the tab + layout JSON), "
          f"load {os.getloadavg()[0]:.2f}:")
    ix.forget()
    whole = windowstats.Scope(None, None)
    cold, n = answer(whole)
    served, _ = answer(whole)
    print(f"{'whole run, computed':>24} {cold * 1e3:8.0f} ms  (once per trace, at start-up)")
    print(f"{'whole run, served':>24} {served * 1e3:8.0f} ms  "
          f"{'ok' if served <= TARGET_S else 'OVER'}  {n / 1e3:.0f} kB")
    worst = 0.0
    for name, a, b in steps[1:]:
        ix.forget()
        took, n = answer(windowstats.Scope((a, b), None))
        worst = max(worst, took)
        print(f"{name:>24} {took * 1e3:8.0f} ms  {'ok' if took <= TARGET_S else 'OVER'}  "
              f"{n / 1e3:.0f} kB")
    print(f"slowest window of the Profiles tab: {worst * 1e3:.0f} ms "
          f"(target {TARGET_S * 1e3:.0f} ms)")


if __name__ == "__main__":
    sys.exit(main())
