"""The Markdown summary of a Comparison, for a pull-request comment (the HTML report has
the same numbers plus the charts and timelines)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mpiscope import output
from mpiscope.analysis import callpaths
from mpiscope.analysis.breakdown import PART_LABELS, PARTS
from mpiscope.analysis.comparison import Comparison, RunSummary
from mpiscope.analysis.explanation import Explanation, explain
from mpiscope.numbers import fmt_pct, fmt_s
from mpiscope.render import explain as explained
from mpiscope.render.mdtext import Markdown, code, md
from mpiscope.render.runwarnings import report_warnings


def md_table(headers: Sequence[str], rows: Sequence[Sequence[object]],
             align: str = "") -> list[str]:
    """A GitHub table; `align` is one letter per column, l or r (default: l then r...).
    Cells are data (mdtext.md) unless they are Markdown already."""
    align = align or "l" + "r" * (len(headers) - 1)
    rule = "|" + "|".join("---" if a == "l" else "---:" for a in align) + "|"
    return ["| " + " | ".join(md(h) for h in headers) + " |", rule,
            *("| " + " | ".join(md(c) for c in row) + " |" for row in rows)]


def md_change(a: float, b: float) -> str:
    return f"{100 * (b - a) / a:+.1f}%" if a else "–"


def md_run_rows(a: RunSummary, b: RunSummary) -> list[list[object]]:
    def meta(run: RunSummary) -> dict:
        return run.report.get("meta", {})

    def hosts(run: RunSummary) -> str:
        return ", ".join(sorted({r["host"] for r in run.report["ranks"]}))

    return [
        ["command", code(meta(a).get("cmdline", "?")), code(meta(b).get("cmdline", "?"))],
        ["ranks", len(a.report["ranks"]), len(b.report["ranks"])],
        ["hosts", hosts(a), hosts(b)],
        ["MPI library", meta(a).get("mpi_library", "?"), meta(b).get("mpi_library", "?")],
        ["date", meta(a).get("start_time", "?"), meta(b).get("start_time", "?")],
        ["trace", code(a.trace_dir), code(b.trace_dir)],
    ]


def md_rank_rows(a: RunSummary, b: RunSummary) -> list[list[object]]:
    """One row per rank: each part as `before → after` seconds."""
    ra = {r["rank"]: r for r in a.report["ranks"]}
    rb = {r["rank"]: r for r in b.report["ranks"]}

    def cell(rank: int, key: str) -> str:
        x, y = ra.get(rank, {}).get(key), rb.get(rank, {}).get(key)
        return f"{'–' if x is None else fmt_s(x)} → {'–' if y is None else fmt_s(y)}"

    return [[rank, ra.get(rank, rb.get(rank, {})).get("host", "?"),
             *(cell(rank, f"{k}_s") for k in ("total", *PARTS))]
            for rank in sorted(set(ra) | set(rb))]


def md_site(finding: dict) -> Markdown:
    """`app.c:10`, and its call path where it has more frames: via `a <- b <- c`."""
    site = finding.get("callsite", "")
    v = callpaths.via(finding.get("callpath") or [], site)
    text = code(site)
    return Markdown(f"{text} via {code(v.removeprefix('via '))}") if v else text


def render_markdown(cmp: Comparison, ex: Explanation | None = None) -> str:
    """A summary for a pull-request comment: the headline, then tables a reviewer can scan
    (the HTML report has the same numbers plus the charts and timelines)."""
    a, b = cmp.a, cmp.b
    lines = [f"### mpiscope: {md(a.label)} vs {md(b.label)}", ""]
    for w in report_warnings(cmp):
        lines += [f"> **warning:** {md(w.run.label)} ({code(w.run.trace_dir)}): {md(w.text)}",
                  ""]

    headline: list[list[object]] = []
    fa, fb = cmp.figure("mflops")
    if fa is not None and fb is not None:
        headline.append(["MFLOPS (program output)", f"{fa:.1f}", f"{fb:.1f}", md_change(fa, fb)])
    headline.append(["wall time (slowest rank)", fmt_s(a.wall_s), fmt_s(b.wall_s),
                     md_change(a.wall_s, b.wall_s)])
    lines += md_table(["", a.label, b.label, "change"], headline)
    lines.append("")
    if cmp.speedup:
        lines.append(f"**speed-up {cmp.speedup:.3f}×** ({cmp.speedup_basis}); predicted gain "
                     f"{fmt_s(cmp.predicted_gain_s)}, measured {fmt_s(cmp.measured_gain_s)}")
    else:
        lines.append(f"predicted gain {fmt_s(cmp.predicted_gain_s)}, "
                     f"measured {fmt_s(cmp.measured_gain_s)}")

    lines += ["", "#### Runs", ""]
    lines += md_table(["", a.label, b.label], md_run_rows(a, b), "lll")

    lines += ["", "#### Time breakdown (share of all ranks' time)", ""]
    lines += md_table(["", a.label, b.label, "change"], [
        [PART_LABELS[p], fmt_pct(a.share(p)), fmt_pct(b.share(p)),
         f"{100 * (b.share(p) - a.share(p)):+.1f} pts"] for p in PARTS])

    rank_rows = md_rank_rows(a, b)
    rank_table = md_table(["rank", "host", "total", *(PART_LABELS[p] for p in PARTS)],
                         rank_rows, "rl" + "r" * (1 + len(PARTS)))
    title = f"Per rank, {a.label} → {b.label}"
    if len(rank_rows) > 16:  # long: folded, so the comment stays short
        lines += ["", f"<details><summary>{md(title)}</summary>", "", *rank_table, "",
                  "</details>"]
    else:
        lines += ["", f"#### {md(title)}", "", *rank_table]

    wa, wb = a.report["wait_states"], b.report["wait_states"]
    lines += ["", "#### Wait states (summed over ranks)", ""]
    lines += md_table(["", a.label, b.label, "Δ"], [
        [k.removesuffix("_s").replace("_", " "), fmt_s(wa[k]), fmt_s(wb.get(k, 0.0)),
         ("+" if wb.get(k, 0.0) > wa[k] else "") + fmt_s(wb.get(k, 0.0) - wa[k])]
        for k in wa])

    lines += ["", f"#### MPI functions, {md(a.label)} → {md(b.label)}", ""]
    lines += md_table(
        ["function", "calls", "time (all ranks)", "share of time", "Δ time"],
        [[f.name, f"{f.calls_a} → {f.calls_b}", f"{fmt_s(f.time_a)} → {fmt_s(f.time_b)}",
          f"{fmt_pct(f.share_a)} → {fmt_pct(f.share_b)}",
          ("+" if f.delta_s > 0 else "") + fmt_s(f.delta_s)] for f in cmp.functions[:10]])

    lines += ["", f"#### Findings of {md(a.label)} and what {md(b.label)} did to them", ""]
    if cmp.outcomes:
        lines += md_table(["finding", "call site", "predicted saving", "outcome"], [
            [f"{o.finding['kind']} {o.finding['function']}", md_site(o.finding),
             fmt_s(o.finding["estimated_savings_s"]),
             "resolved" if o.resolved else "still " + fmt_s(o.time_b_s)]
            for o in cmp.outcomes], "llrl")
    else:
        lines.append(f"No findings in {md(a.label)}.")
    lines += explained.md_lines(cmp, ex or explain(cmp), md_table)
    return "\n".join(lines) + "\n"


def write_markdown(cmp: Comparison, out: Path, ex: Explanation | None = None) -> None:
    output.make_parent(out)
    output.write_text(out, render_markdown(cmp, ex))
