"""Terminal rendering (rich): the summary of one trace's analysis, and a comparison's
table. Every name from a trace goes through term.name (data, not markup)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
from rich.console import Console
from rich.table import Table

from mpiscope import numbers
from mpiscope.analysis import callpaths, critical_path, findings, stats, threads
from mpiscope.analysis.breakdown import PART_LABELS, PARTS
from mpiscope.analysis.comparison import Comparison
from mpiscope.analysis.session import Analysis, SpawnedJob
from mpiscope.analysis.stats import ProtocolSwitch
from mpiscope.render import term
from mpiscope.render.term import name


def _s(x: float) -> str:
    """Seconds in prose: 82.3 µs, 1.36 s (mpiscope.numbers)."""
    return numbers.seconds(x)


# a table wider than the terminal shrinks only the columns of names (they fold); headers,
# numbers and kinds keep their width, so nothing reads "communicat…" or "load_imbalanc/e"
def _table(title: str, columns: list[tuple[str, str]]) -> Table:
    """columns: (header, how) with how 'name' (left, may fold, keeps NAME_MIN columns),
    'left' or 'right' (never wrapped, at least as wide as the header)."""
    t = Table(title=title)
    for header, how in columns:
        if how == "name":
            t.add_column(header, justify="left", overflow="fold", min_width=NAME_MIN)
        else:
            t.add_column(header, justify=how, no_wrap=True, min_width=len(header))
    return t


NAME_MIN = 8


def size_text(n: float) -> str:
    """4096 -> '4 KiB', 1536 -> '1.5 KiB', 100 -> '100 B'."""
    return numbers.size(n)


def _switch_line(p: ProtocolSwitch, n_hosts: int) -> str:
    where = f" ({name(p.path)})" if n_hosts > 1 else ""
    trend = _s(p.alpha_s)
    if p.beta_Bps != float("inf"):
        trend += f", {numbers.rate(p.beta_Bps)}"
    size = size_text(p.bytes)
    return (f"Protocol switch near {size}{where}: {size} messages take "
            f"{_s(p.transfer_s)}, {p.jump:.1f}x the {_s(p.predicted_s)} predicted by the "
            f"latency/bandwidth of smaller ones ({trend}): eager up to "
            f"{size_text(p.last_below_bytes)}, rendezvous from {size}")


def _messages(analysis: Analysis, console: Console, n_hosts: int) -> None:
    """Intra- vs inter-node traffic (when there is more than one host) and the
    eager/rendezvous switch (where the message sizes show one)."""
    split = analysis.host_split
    if n_hosts > 1 and len(split):
        ht = _table(f"Messages within and between the {n_hosts} hosts",
                    [("path", "name"), ("messages", "right"), ("bytes", "right"),
                     ("bandwidth (MB/s)", "right")])
        for r in split.itertuples():
            ht.add_row(name(r.path), str(r.messages), str(r.bytes), f"{r.bandwidth_MBps:.1f}")
        console.print(ht)
    for p in analysis.protocol_switches:
        console.print(_switch_line(p, n_hosts))
    # where the sizes could show a switch and none stands out, say so: a real run may
    # have none (no step between eager and large-message copies); too few sizes say nothing
    named = {p.path for p in analysis.protocol_switches}
    for path, sizes in analysis.switch_evidence.items():
        if path not in named and sizes >= stats.SWITCH_MIN_BELOW + stats.SWITCH_MIN_ABOVE:
            where = f" ({name(path)})" if n_hosts > 1 else ""
            console.print(f"No protocol switch visible{where}: the transfer times of {sizes} "
                          "message sizes follow one latency/bandwidth trend")


def _critical_path(analysis: Analysis, console: Console, top: int) -> None:
    """What lies on the run's critical path, which rank holds most of it, and which
    findings lie off it (fixing those cannot shorten the run)."""
    path = analysis.critical_path
    length = path.length_ns / 1e9
    ranks = path.per_rank().sort_values("share", ascending=False, kind="stable")
    lead = ranks.iloc[0]
    run_s = analysis.overview.meta.duration_ns / 1e9
    # the measured interval, not the whole run: start-up and MPI_Finalize are left out
    console.print(f"Critical path: {_s(length)}, {_s(path.begin_ns / 1e9)} to "
                  f"{_s(path.end_ns / 1e9)} of the {_s(run_s)} run (the first rank "
                  f"leaving MPI_Init to the last entering MPI_Finalize), "
                  f"{path.rank_switches} rank switches; rank {int(lead['rank'])} holds "
                  f"{100 * lead['share']:.0f}% of it")
    skew = analysis.wait_states.skew
    if skew.offsets_ns:  # why the path may end past the recorded run
        shift = max(abs(o) for o in skew.offsets_ns.values())
        console.print(f"  on clocks corrected for skew: {len(skew.offsets_ns)} rank(s) "
                      f"shifted by up to {_s(shift / 1e9)} ({skew.violations} message(s) "
                      f"received before they were sent as recorded, {skew.remaining} left)")
    prof = path.profile().head(top)
    col = numbers.Column.of(prof["time_s"])
    ct = _table(f"Top {top} on the critical path", [
        ("what", "name"), ("call site", "name"), (col.header("time"), "right"),
        ("share", "right")])
    for r in prof.itertuples():
        what = f"compute before {r.before}" if r.name == critical_path.COMPUTE else r.name
        ct.add_row(name(what), name(r.callsite), col.cell(r.time_s), f"{100 * r.share:.1f}%")
    console.print(ct)
    off = [f for f in analysis.findings if analysis.path_fields(f)["on_critical_path"] is False]
    for f in off:
        console.print(f"[dim]• {f.kind} {name(findings.where(f.function, f.callsite))}: not on "
                      "the critical path: fixing it cannot shorten the run[/dim]")


def site_text(callsite: str, callpath: list[str]) -> str:
    """The call site, and its path where deeper: `app.c:10 via comm.c:5 <- app.c:10`."""
    v = callpaths.via(callpath, callsite)
    return f"{callsite} {v}" if v else callsite


def _site(analysis: Analysis, function: str, group: str) -> str:
    return name(site_text(*analysis.callpath(function, group)))


def _callsites(analysis: Analysis, console: Console, top: int) -> None:
    """The call sites of most time, each named by its chosen frame and its path."""
    cs = analysis.callsites.head(top)
    if not len(cs):
        return
    col = numbers.Column.of([*cs["time_s"], *cs["wait_s"]])
    ct = _table(f"Top {top} call sites", [
        ("function", "name"), ("call site", "name"), ("calls", "right"),
        (col.header("time"), "right"), (col.header("waiting"), "right")])
    for r in cs.itertuples():
        ct.add_row(name(r.function), name(site_text(str(r.callsite), list(r.callpath))),
                   str(r.calls), col.cell(r.time_s), col.cell(r.wait_s))
    console.print(ct)


def _threads(analysis: Analysis, console: Console, every: bool = False) -> None:
    """Ranks with several threads calling MPI: the table above is each rank's main thread;
    the other threads' MPI time is stated beside it, thread by thread (beyond RANKS_LISTED
    ranks summarised per thread number as the per-rank table is, `every`: every row)."""
    th = analysis.threads
    if not threads.multi_threaded(th):
        return
    console.print("Ranks with several threads calling MPI: the parts above are each "
                  "rank's main thread; time in MPI per thread:")
    col = numbers.Column.of(th["mpi_s"])
    tt = _table("MPI time per thread", [
        ("rank", "right"), ("thread", "right"), ("location", "name"), ("MPI calls", "right"),
        (col.header("time in MPI"), "right")])
    n_ranks = th["rank"].nunique()
    if every or n_ranks <= RANKS_LISTED:
        for r in th.itertuples():
            tt.add_row(str(r.rank), str(r.thread), name(r.name), str(r.calls),
                       col.cell(r.mpi_s))
        console.print(tt)
        return
    stat = {"min": np.min, "median": np.median, "max": np.max}
    numbers_of = sorted(th["thread"].unique())
    outside: list[int] = []
    for t in numbers_of:
        g = th[th["thread"] == t]
        for label, f in stat.items():
            tt.add_row(label, str(t), "", _calls(float(f(g["calls"]))),
                       col.cell(float(f(g["mpi_s"]))), style="bold",
                       end_section=label == "max" and t == numbers_of[-1])
        # a thread whose MPI time lies outside its thread number's quartiles ± 1.5 IQR
        # (as rank_rows picks ranks by their times)
        outside += [int(g.index[i]) for i in _outlying(g[["mpi_s"]].to_numpy(float))]
    far = outside[:RANKS_LISTED]  # each thread number's farthest first
    for r in th.loc[sorted(far)].itertuples():
        tt.add_row(str(r.rank), str(r.thread), name(r.name), str(r.calls), col.cell(r.mpi_s))
    console.print(tt)
    console.print(f"{numbers.count(n_ranks, 'rank')}: min, median and max of each thread "
                  "number's column" + (f", then the {numbers.count(len(far), 'thread')} "
                  "outside the quartiles ± 1.5 IQR" if far else "; no thread lies outside "
                  "the quartiles ± 1.5 IQR") + " (--ranks all lists every thread)",
                  highlight=False)


def _calls(x: float) -> str:
    # a median of counts may fall halfway; never an exponent
    return str(int(x)) if x == int(x) else f"{x:.1f}"


RANKS_LISTED = 16  # more ranks than this: the per-rank table is summarised (--ranks all)


def rank_rows(ranks: pd.DataFrame, every: bool = False,
              label: Callable[[int], str] = str) -> list[tuple[str, int | None]]:
    """What the per-rank table shows: every rank up to RANKS_LISTED (or with `every`),
    else the min, median and max of each column and the outlying ranks (outside the
    quartiles ± 1.5 IQR of a column, at most RANKS_LISTED, the farthest first), as
    (label, rank index or None for a statistic row); `label` names a rank ("spawn-1 rank 0"
    for a spawned job's)."""
    n = len(ranks)
    if every or n <= RANKS_LISTED:
        return [(label(int(r)), i) for i, r in enumerate(ranks["rank"])]
    cols = ["total_s", *(f"{p}_s" for p in PARTS if f"{p}_s" in ranks)]
    out = _outlying(ranks[cols].to_numpy(float))
    return [("min", None), ("median", None), ("max", None),
            *((label(int(ranks["rank"].iloc[i])), int(i)) for i in sorted(out))]


def _outlying(v: np.ndarray) -> list[int]:
    """The rows of v outside the quartiles ± 1.5 IQR of a column, at most RANKS_LISTED,
    the farthest first."""
    q1, q3 = np.nanpercentile(v, 25, axis=0), np.nanpercentile(v, 75, axis=0)
    fence = 1.5 * (q3 - q1)
    # how far outside its column's fences each row lies
    beyond = np.maximum(np.maximum(q1 - fence - v, v - q3 - fence), 0).max(axis=1)
    order = np.argsort(-beyond, kind="stable")
    return [int(i) for i in order[:RANKS_LISTED] if beyond[i] > 0]


def _per_rank(analysis: Analysis, console: Console, every: bool,
              job: SpawnedJob | None = None) -> None:
    rk = analysis.ranks
    # I/O only where a rank did some (the JSON always has io_s): 80 columns are few
    parts = [p for p in PARTS if f"{p}_s" in rk and (p != "io" or rk[f"{p}_s"].any())]
    col = numbers.Column.of(rk["total_s"])
    rows = rank_rows(rk, every, job.rank_label if job else str)
    summarised = rows and rows[0][1] is None
    of = f" of {job.name}" if job else ""
    tab = _table(f"Time per rank{of} ({col.unit}, and share of the rank's total)",
                 [("rank", "right"), ("host", "name"), ("total", "right"),
                  *((PART_LABELS[p], "right") for p in parts)])
    stat = {"min": np.min, "median": np.median, "max": np.max}
    for label, i in rows:
        if i is None:  # each column's own statistic (not one rank's row)
            f = stat[label]
            tab.add_row(label, "", col.cell(float(f(rk["total_s"]))),
                        *(col.cell(float(f(rk[f"{p}_s"]))) for p in parts),
                        style="bold", end_section=label == "max")
            continue
        r = rk.iloc[i]
        tot = r["total_s"] or 1.0
        tab.add_row(label, name(r["host"]), col.cell(r["total_s"]),
                    *(f"{col.cell(r[f'{p}_s'])} ({100 * r[f'{p}_s'] / tot:.0f}%)"
                      for p in parts))
    console.print(tab)
    if summarised:
        shown = len(rows) - 3
        console.print(f"{numbers.count(len(rk), 'rank')}: min, median and max of each column"
                      + (f", then the {numbers.count(shown, 'rank')} outside the quartiles "
                         "± 1.5 IQR" if shown else "; no rank lies outside the quartiles "
                         "± 1.5 IQR") + " (--ranks all lists every rank)", highlight=False)


def print_summary(analysis: Analysis, console: Console, top: int = 10,
                  every_rank: bool = False) -> None:
    t = analysis.overview
    n_hosts = t.ranks["host"].nunique()
    console.print(f"[bold]{name(t.meta.program or t.path)}[/bold]  "
                  f"{numbers.count(t.meta.num_ranks, 'rank')} on "
                  f"{numbers.count(n_hosts, 'host')}, {_s(t.meta.duration_ns / 1e9)}, "
                  f"{numbers.count(t.calls, 'MPI call')}  [dim]{name(t.meta.creator)} "
                  f"{name(t.meta.mpi_library)}[/dim]")
    _per_rank(analysis, console, every_rank)
    _threads(analysis, console, every_rank)
    fs = analysis.functions.head(top)
    tc, mc = numbers.Column.of(fs["time_s"]), numbers.Column.of([*fs["mean_s"], *fs["max_s"]])
    ft = _table(f"Top {top} MPI functions", [
        ("function", "name"), ("calls", "right"), (tc.header("time"), "right"),
        (mc.header("mean"), "right"), (mc.header("max"), "right"), ("bytes", "right")])
    for f in fs.itertuples():
        ft.add_row(name(f.name), str(f.calls), tc.cell(f.time_s), mc.cell(f.mean_s),
                   mc.cell(f.max_s), str(f.bytes))
    console.print(ft)
    ws = analysis.wait_states.totals()
    # the contract's four always; RMA's and the rest where they occur
    console.print("Wait states (all ranks): " + ", ".join(
        f"{k.replace('_', ' ')} {_s(v)}" for i, (k, v) in enumerate(ws.items()) if i < 4 or v)
        + (" (wait at N×N includes wait at fence)" if ws.get("wait_at_fence") else ""))
    un = analysis.uninterpreted
    if len(un):
        console.print("Not interpreted (counted as time only): " + ", ".join(
            f"{name(u.name)} ({numbers.count(u.calls, 'call')}, {_s(u.time_s)})"
            for u in un.head(top).itertuples())
            + (f" and {len(un) - top} more" if len(un) > top else ""))
    _callsites(analysis, console, top)
    sites = analysis.wait_states.per_callsite().head(top)
    if len(sites):
        wc = numbers.Column.of(sites["wait_ns"] / 1e9)
        wt = _table("Where ranks wait (top call sites)", [
            ("wait state", "left"), ("function", "name"), ("call site", "name"),
            ("calls", "right"), (wc.header("waiting"), "right")])
        for w in sites.itertuples():
            wt.add_row(str(w.wait_kind).replace("_", " "), name(w.function),
                       _site(analysis, str(w.function), str(w.callsite)),
                       str(w.calls), wc.cell(w.wait_ns / 1e9))
        console.print(wt)
    if analysis.loop:
        console.print(f"Main loop: {analysis.loop.iterations} iterations, marked by "
                      f"{name(findings.where(analysis.loop.function, analysis.loop.callsite))}")
    _messages(analysis, console, int(t.ranks["host"].nunique()))
    if analysis.findings:
        shown = analysis.findings[:top]
        fc = numbers.Column.of([x for f in shown for x in (f.time_s, f.estimated_savings_s)])
        run_s = analysis.noise_floor.run_s
        fd = _table(f"Top {top} findings (by estimated savings)", [
            ("kind", "left"), ("where", "name"), ("calls", "right"),
            (fc.header("time"), "right"), (fc.header("saves"), "right"), ("of run", "right")])
        for f in shown:
            fd.add_row(f.kind, name(findings.where(f.function, f.callsite)), str(f.calls),
                       fc.cell(f.time_s), fc.cell(f.estimated_savings_s),
                       f"{f.estimated_savings_s / run_s:.1%}" if run_s > 0 else "-")
        console.print(fd)
        for f in analysis.findings[:top]:
            site = (findings.RUN_WIDE if findings.run_wide(f.function, f.callsite)
                    else site_text(f.callsite, f.callpath))
            console.print(f"[dim]• {f.kind} {name(site)}: "
                          f"{name(f.message + analysis.oversubscribed_note(f))}[/dim]",
                          highlight=False)
    else:
        console.print("No findings.")
    if analysis.minor_findings:
        minor = analysis.minor_findings
        listed = "; ".join(
            f"{f.kind} {findings.where(f.function, f.callsite)}"
            + (f" (saves {numbers.seconds(f.estimated_savings_s)})"
               if f.evidence.get("saving_replayed", True) else " (no saving stated)")
            for f in minor[:top])
        more = f" and {len(minor) - top} more" if len(minor) > top else ""
        rule = analysis.noise_floor.rule
        console.print(f"[dim]Minor, {numbers.count(len(minor), 'finding')} (each with why "
                      f"under `minor` in the JSON): {name(listed)}{more}. "
                      f"{name(rule[:1].upper() + rule[1:])}[/dim]", highlight=False)
    _critical_path(analysis, console, top)
    fl = analysis.flushes
    if len(fl):
        share = fl["seconds"].sum() / max(analysis.ranks["total_s"].sum(), 1e-12)
        console.print(f"[yellow]Tracing: {int(fl['flushes'].sum())} buffer flushes took "
                      f"{_s(fl['seconds'].sum())} ({100 * share:.1f}% of the ranks' time), "
                      "counted in the run; a larger MPISCOPE_BUFFER_SIZE avoids them[/yellow]")
    mc = analysis.message_counts
    unmatched = mc["unmatched_sends"] + mc["unmatched_receives"]
    if unmatched:
        console.print(f"[yellow]{unmatched} unmatched send/receive events[/yellow]")
    _spawned(analysis, console, top, every_rank)
    for w in analysis.warnings:  # names in them are data: never markup
        console.print(f"[yellow]warning: {name(w)}[/yellow]", highlight=False)


def _spawned(analysis: Analysis, console: Console, top: int, every_rank: bool) -> None:
    """The jobs the run spawned, each its own MPI_COMM_WORLD: where its time went."""
    for job in analysis.spawned or ():
        sub = job.analysis
        if sub is None:  # said in the warnings
            continue
        t = sub.overview
        when = (f"started {_s(job.start_offset_s)} into this run"
                if job.start_offset_s is not None
                else f"start within this run unknown: {job.start_unknown}")
        console.print(f"[bold]Spawned job {name(job.name)}[/bold]  "
                      f"{numbers.count(t.meta.num_ranks, 'rank')}, {name(when)}, "
                      f"{_s(t.meta.duration_ns / 1e9)}, {numbers.count(t.calls, 'MPI call')}"
                      f"  [dim]{name(job.path)}[/dim]", highlight=False)
        _per_rank(sub, console, every_rank, job)
        fs = sub.functions.head(top)
        tc = numbers.Column.of(fs["time_s"])
        ft = _table(f"Top {top} MPI functions of {name(job.name)}", [
            ("function", "name"), ("calls", "right"), (tc.header("time"), "right")])
        for f in fs.itertuples():
            ft.add_row(name(f.name), str(f.calls), tc.cell(f.time_s))
        console.print(ft)
        for f in sub.findings[:top]:
            console.print(f"[dim]• {name(job.name)}: {f.kind} "
                          f"{name(site_text(f.callsite, f.callpath))}: {name(f.message)}[/dim]",
                          highlight=False)
        for w in sub.warnings:
            console.print(f"[yellow]warning: {name(job.name)}: {name(w)}[/yellow]",
                          highlight=False)


def print_comparison(cmp: Comparison, console: Console | None = None) -> None:
    console = console or term.console()
    a, b = cmp.a, cmp.b
    t = Table(title=f"{name(a.label)} → {name(b.label)}")
    for col in ("", name(a.label), name(b.label)):
        t.add_column(col, justify="right" if col else "left")
    fa, fb = cmp.figure("mflops")
    if fa is not None and fb is not None:
        t.add_row("MFLOPS", f"{fa:.1f}", f"{fb:.1f}")
    wc = numbers.Column.of([a.wall_s, b.wall_s])
    t.add_row(wc.header("wall time"), wc.cell(a.wall_s), wc.cell(b.wall_s))
    for part in PARTS:
        t.add_row(f"{PART_LABELS[part]} share", f"{100 * a.share(part):.1f}%",
                  f"{100 * b.share(part):.1f}%")
    for f in cmp.functions[:5]:
        t.add_row(f"{name(f.name)} share", f"{100 * f.share_a:.1f}%", f"{100 * f.share_b:.1f}%")
    console.print(t)
    if cmp.speedup:
        console.print(f"speed-up {cmp.speedup:.3f}× ({cmp.speedup_basis}); predicted gain "
                      f"{_s(cmp.predicted_gain_s)}, measured {_s(cmp.measured_gain_s)}")
