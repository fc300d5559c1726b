"""Terminal rendering (rich): the summary of one trace's analysis, and a comparison's
table. Every name from a trace goes through term.name (data, not markup)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from mpiscope.analysis import callpaths, critical_path, findings, hosts, stats, threads
from mpiscope.analysis.breakdown import PART_LABELS, PARTS
from mpiscope.analysis.comparison import Comparison
from mpiscope.analysis.session import Analysis
from mpiscope.analysis.stats import ProtocolSwitch
from mpiscope.render import term
from mpiscope.render.term import name


def _s(x: float) -> str:
    return f"{x:.4f}" if x >= 0.001 else f"{x * 1e3:.3f} ms"


def _seconds(x: float) -> str:
    return f"{x:.4f} s" if x >= 0.001 else f"{x * 1e3:.3f} ms"


def _us(x: float) -> str:
    v = x * 1e6
    return f"{v:.2f} µs" if v < 100 else f"{v:.0f} µs"


def size_text(n: float) -> str:
    """4096 -> '4 KiB', 1536 -> '1.5 KiB', 100 -> '100 B'."""
    for unit, scale in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def _switch_line(p: ProtocolSwitch, hosts: int) -> str:
    where = f" ({name(p.path)})" if hosts > 1 else ""
    trend = _us(p.alpha_s)
    if p.beta_Bps != float("inf"):
        trend += f", {p.beta_Bps / 1e6:.0f} MB/s"
    size = size_text(p.bytes)
    return (f"Protocol switch near {size}{where}: {size} messages take "
            f"{_us(p.transfer_s)}, {p.jump:.1f}x the {_us(p.predicted_s)} predicted by the "
            f"latency/bandwidth of smaller ones ({trend}): eager up to "
            f"{size_text(p.last_below_bytes)}, rendezvous from {size}")


def _messages(analysis: Analysis, console: Console, hosts: int) -> None:
    """Intra- vs inter-node traffic (when there is more than one host) and the
    eager/rendezvous switch (where the message sizes show one)."""
    split = analysis.host_split
    if hosts > 1 and len(split):
        ht = Table(title=f"Messages within and between the {hosts} hosts")
        for col in ("path", "messages", "bytes", "bandwidth (MB/s)"):
            ht.add_column(col, justify="left" if col == "path" else "right")
        for r in split.itertuples():
            ht.add_row(name(r.path), str(r.messages), str(r.bytes), f"{r.bandwidth_MBps:.1f}")
        console.print(ht)
    for p in analysis.protocol_switches:
        console.print(_switch_line(p, hosts))
    # where the sizes could show a switch and none stands out, say so: a real run may
    # have none (no step between eager and large-message copies); too few sizes say nothing
    named = {p.path for p in analysis.protocol_switches}
    for path, sizes in analysis.switch_evidence.items():
        if path not in named and sizes >= stats.SWITCH_MIN_BELOW + stats.SWITCH_MIN_ABOVE:
            where = f" ({name(path)})" if hosts > 1 else ""
            console.print(f"No protocol switch visible{where}: the transfer times of {sizes} "
                          "message sizes follow one latency/bandwidth trend")


def _critical_path(analysis: Analysis, console: Console, top: int) -> None:
    """What lies on the run's critical path, which rank holds most of it, and which
    findings lie off it (fixing those cannot shorten the run)."""
    path = analysis.critical_path
    length = path.length_ns / 1e9
    ranks = path.per_rank().sort_values("share", ascending=False, kind="stable")
    lead = ranks.iloc[0]
    console.print(f"Critical path: {_seconds(length)} (the run, first rank's start to last "
                  f"rank's end), "
                  f"{path.rank_switches} rank switches; rank {int(lead['rank'])} holds "
                  f"{100 * lead['share']:.0f}% of it")
    ct = Table(title=f"Top {top} on the critical path")
    for col in ("what", "call site", "time (s)", "share"):
        ct.add_column(col, justify="right" if col in ("time (s)", "share") else "left",
                      overflow="fold")
    for r in path.profile().head(top).itertuples():
        what = f"compute before {r.before}" if r.name == critical_path.COMPUTE else r.name
        ct.add_row(name(what), name(r.callsite), _s(r.time_s), f"{100 * r.share:.1f}%")
    console.print(ct)
    off = [f for f in analysis.findings
           if not critical_path.finding_fields(path, f.kind, f.function,
                                               f.group or f.callsite)["on_critical_path"]]
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
    ct = Table(title=f"Top {top} call sites")
    for col in ("function", "call site", "calls", "time (s)", "waiting (s)"):
        ct.add_column(col, justify="right" if col in ("calls", "time (s)", "waiting (s)")
                      else "left", overflow="fold")
    for r in cs.itertuples():
        ct.add_row(name(r.function), name(site_text(str(r.callsite), list(r.callpath))),
                   str(r.calls), _s(r.time_s), _s(r.wait_s))
    console.print(ct)


def _threads(analysis: Analysis, console: Console) -> None:
    """Ranks with several threads calling MPI: the table above is each rank's main thread;
    the other threads' MPI time is stated beside it, thread by thread."""
    th = analysis.threads
    if not threads.multi_threaded(th):
        return
    console.print("Ranks with several threads calling MPI: the parts above are each "
                  "rank's main thread; time in MPI per thread:")
    tt = Table(title="MPI time per thread (s)")
    for col in ("rank", "thread", "location", "MPI calls", "time in MPI"):
        tt.add_column(col, justify="left" if col == "location" else "right")
    for r in th.itertuples():
        tt.add_row(str(r.rank), str(r.thread), name(r.name), str(r.calls), _s(r.mpi_s))
    console.print(tt)


def print_summary(analysis: Analysis, console: Console, top: int = 10) -> None:
    t = analysis.overview
    console.print(f"[bold]{name(t.meta.program or t.path)}[/bold]  {t.meta.num_ranks} ranks "
                  f"on {t.ranks['host'].nunique()} host(s), {t.meta.duration_ns / 1e9:.3f} s, "
                  f"{t.calls} MPI calls  [dim]{name(t.meta.creator)} "
                  f"{name(t.meta.mpi_library)}[/dim]")
    tab = Table(title="Time per rank (s)", show_lines=False)
    for col in ("rank", "host", "total", *(PART_LABELS[p] for p in PARTS)):
        tab.add_column(col, justify="right" if col not in ("host",) else "left")
    for r in analysis.ranks.to_dict("records"):
        tot = r["total_s"] or 1.0
        tab.add_row(str(r["rank"]), name(r["host"]), _s(r["total_s"]),
                    *(f"{_s(r[f'{p}_s'])} ({100 * r[f'{p}_s'] / tot:.0f}%)" for p in PARTS))
    console.print(tab)
    _threads(analysis, console)
    ft = Table(title=f"Top {top} MPI functions")
    for col in ("function", "calls", "time (s)", "mean", "max", "bytes"):
        ft.add_column(col, justify="left" if col == "function" else "right")
    for f in analysis.functions.head(top).itertuples():
        ft.add_row(name(f.name), str(f.calls), _s(f.time_s), _s(f.mean_s), _s(f.max_s),
                   str(f.bytes))
    console.print(ft)
    ws = analysis.wait_states.totals()
    # the contract's four always; RMA's and the rest where they occur
    console.print("Wait states (s, all ranks): " + ", ".join(
        f"{k.replace('_', ' ')} {_s(v)}" for i, (k, v) in enumerate(ws.items()) if i < 4 or v)
        + (" (wait at N×N includes wait at fence)" if ws.get("wait_at_fence") else ""))
    un = analysis.uninterpreted
    if len(un):
        console.print("Not interpreted (counted as time only): " + ", ".join(
            f"{name(u.name)} ({u.calls} call{'s' if u.calls != 1 else ''}, {_s(u.time_s)} s)"
            for u in un.head(top).itertuples())
            + (f" and {len(un) - top} more" if len(un) > top else ""))
    _callsites(analysis, console, top)
    sites = analysis.wait_states.per_callsite().head(top)
    if len(sites):
        wt = Table(title="Where ranks wait (top call sites)")
        for col in ("wait state", "function", "call site", "calls", "waiting (s)"):
            wt.add_column(col, justify="right" if col in ("calls", "waiting (s)") else "left",
                          overflow="fold")
        for w in sites.itertuples():
            wt.add_row(str(w.wait_kind).replace("_", " "), name(w.function),
                       _site(analysis, str(w.function), str(w.callsite)),
                       str(w.calls), _s(w.wait_ns / 1e9))
        console.print(wt)
    if analysis.loop:
        console.print(f"Main loop: {analysis.loop.iterations} iterations, marked by "
                      f"{name(findings.where(analysis.loop.function, analysis.loop.callsite))}")
    _messages(analysis, console, int(t.ranks["host"].nunique()))
    if analysis.findings:
        fd = Table(title=f"Top {top} findings (by estimated savings)")
        for col in ("kind", "function", "call site", "calls", "time (s)", "saves (s)"):
            fd.add_column(col, justify="right" if col in ("calls", "time (s)", "saves (s)")
                          else "left", overflow="fold")
        run_s = analysis.noise_floor.run_s
        fd.add_column("of run", justify="right")
        for f in analysis.findings[:top]:
            fd.add_row(f.kind, name(f.function), name(f.callsite), str(f.calls), _s(f.time_s),
                       _s(f.estimated_savings_s),
                       f"{f.estimated_savings_s / run_s:.1%}" if run_s > 0 else "-")
        console.print(fd)
        over = hosts.note(analysis.oversubscribed) if analysis.oversubscribed else ""
        for f in analysis.findings[:top]:
            mark = over if f.kind != "redundant_collective" else ""
            console.print(f"[dim]• {f.kind} {name(site_text(f.callsite, f.callpath))}: "
                          f"{name(f.message + mark)}[/dim]", highlight=False)
    else:
        console.print("No findings.")
    if analysis.minor_findings:
        console.print(f"[dim]{len(analysis.minor_findings)} more below the noise floor: "
                      f"{name(analysis.noise_floor.rule)} (JSON)[/dim]", highlight=False)
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
    for w in analysis.warnings:  # names in them are data: never markup
        console.print(f"[yellow]warning: {name(w)}[/yellow]", highlight=False)


def print_comparison(cmp: Comparison, console: Console | None = None) -> None:
    console = console or term.console()
    a, b = cmp.a, cmp.b
    t = Table(title=f"{name(a.label)} → {name(b.label)}")
    for col in ("", name(a.label), name(b.label)):
        t.add_column(col, justify="right" if col else "left")
    fa, fb = cmp.figure("mflops")
    if fa is not None and fb is not None:
        t.add_row("MFLOPS", f"{fa:.1f}", f"{fb:.1f}")
    t.add_row("wall time (s)", f"{a.wall_s:.4f}", f"{b.wall_s:.4f}")
    for part in PARTS:
        t.add_row(f"{PART_LABELS[part]} share", f"{100 * a.share(part):.1f}%",
                  f"{100 * b.share(part):.1f}%")
    for f in cmp.functions[:5]:
        t.add_row(f"{name(f.name)} share", f"{100 * f.share_a:.1f}%", f"{100 * f.share_b:.1f}%")
    console.print(t)
    if cmp.speedup:
        console.print(f"speed-up {cmp.speedup:.3f}× ({cmp.speedup_basis}); predicted gain "
                      f"{cmp.predicted_gain_s:.4f} s, measured {cmp.measured_gain_s:.4f} s")
