"""Terminal summary of an analysis (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from mpiscope.report import AnalysisReport


def _s(x: float) -> str:
    return f"{x:.4f}" if x >= 0.001 else f"{x * 1e3:.3f} ms"


def print_summary(rep: AnalysisReport, console: Console, top: int = 10) -> None:
    t = rep.trace
    console.print(f"[bold]{t.meta.program or t.path}[/bold]  {t.meta.num_ranks} ranks on "
                  f"{t.ranks['host'].nunique()} host(s), {t.meta.duration_ns / 1e9:.3f} s, "
                  f"{len(t.calls)} MPI calls  [dim]{t.meta.creator} {t.meta.mpi_library}[/dim]")
    tab = Table(title="Time per rank (s)", show_lines=False)
    for col in ("rank", "host", "total", "compute", "communication", "synchronization"):
        tab.add_column(col, justify="right" if col not in ("host",) else "left")
    for r in rep.ranks.itertuples():
        tot = r.total_s or 1.0
        tab.add_row(str(r.rank), r.host, _s(r.total_s),
                    f"{_s(r.compute_s)} ({100 * r.compute_s / tot:.0f}%)",
                    f"{_s(r.communication_s)} ({100 * r.communication_s / tot:.0f}%)",
                    f"{_s(r.synchronization_s)} ({100 * r.synchronization_s / tot:.0f}%)")
    console.print(tab)
    ft = Table(title=f"Top {top} MPI functions")
    for col in ("function", "calls", "time (s)", "mean", "max", "bytes"):
        ft.add_column(col, justify="left" if col == "function" else "right")
    for f in rep.functions.head(top).itertuples():
        ft.add_row(f.name, str(f.calls), _s(f.time_s), _s(f.mean_s), _s(f.max_s), str(f.bytes))
    console.print(ft)
    ws = rep.wait_states.totals()
    console.print("Wait states (s, all ranks): " + ", ".join(
        f"{k.replace('_', ' ')} {_s(v)}" for k, v in ws.items()))
    sites = rep.wait_states.per_callsite().head(top)
    if len(sites):
        wt = Table(title="Where ranks wait (top call sites)")
        for col in ("wait state", "function", "call site", "calls", "waiting (s)"):
            wt.add_column(col, justify="right" if col in ("calls", "waiting (s)") else "left",
                          overflow="fold")
        for w in sites.itertuples():
            wt.add_row(str(w.wait_kind).replace("_", " "), str(w.function), str(w.callsite),
                       str(w.calls), _s(w.wait_ns / 1e9))
        console.print(wt)
    if rep.loop:
        console.print(f"Main loop: {rep.loop.iterations} iterations, marked by "
                      f"{rep.loop.function} at {rep.loop.callsite}")
    if rep.findings:
        fd = Table(title=f"Top {top} findings (by estimated savings)")
        for col in ("kind", "function", "call site", "calls", "time (s)", "saves (s)"):
            fd.add_column(col, justify="right" if col in ("calls", "time (s)", "saves (s)")
                          else "left", overflow="fold")
        for f in rep.findings[:top]:
            fd.add_row(f.kind, f.function, f.callsite, str(f.calls), _s(f.time_s),
                       _s(f.estimated_savings_s))
        console.print(fd)
        for f in rep.findings[:top]:
            console.print(f"[dim]• {f.kind} {f.callsite}: {f.message}[/dim]")
    else:
        console.print("No findings.")
    fl = rep.flushes
    if len(fl):
        share = fl["seconds"].sum() / max(rep.ranks["total_s"].sum(), 1e-12)
        console.print(f"[yellow]Tracing: {int(fl['flushes'].sum())} buffer flushes took "
                      f"{_s(fl['seconds'].sum())} ({100 * share:.1f}% of the ranks' time), "
                      "counted in the run; a larger MPISCOPE_BUFFER_SIZE avoids them[/yellow]")
    if t.unmatched is not None and len(t.unmatched):
        console.print(f"[yellow]{len(t.unmatched)} unmatched send/receive events[/yellow]")
