"""More ranks than CPUs on a host (the tracer's MPISCOPE::HOST_CPUS against the ranks'
hosts): one warning in `analyze`'s JSON and summary and in the comparison reports, and the
timing-driven findings marked; by construction (TraceBuilder), so nothing depends on how a
run was scheduled (the web UI's: webui/tests/test_browser_warnings.py)."""

from __future__ import annotations

import html
import json
import subprocess
from pathlib import Path

from mpiscope.analysis.comparison import compare_traces
from mpiscope.analysis.session import Analysis
from mpiscope.archive import reader
from mpiscope.render.html import render_html
from mpiscope.render.markdown import render_markdown
from mpiscope.render.mdtext import md
from mpiscope_testing.oversubscribed import imbalanced
from mpiscope_testing.tracegen import TraceBuilder

US = 1000


def analyze(tb: TraceBuilder, tmp: Path) -> tuple[dict, str]:
    trace = tb.write(tmp / "trace")
    js = tmp / "a.json"
    p = subprocess.run(["mpiscope", "analyze", str(trace), "--json", str(js)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(js.read_text()), " ".join(p.stdout.split())


def test_four_ranks_on_two_cpus_warn_once_and_mark_the_findings(tmp_path: Path) -> None:
    doc, summary = analyze(imbalanced(["node0"] * 4, "2"), tmp_path)
    over = [w for w in doc["warnings"] if w.startswith("oversubscribed")]
    assert over == ["oversubscribed: 4 ranks on node0 with 2 CPUs — ranks took turns on the "
                    "CPUs, so waiting, imbalance and the timing-driven findings (marked "
                    "`oversubscribed`) may be descheduling, not the program"]
    assert "oversubscribed: 4 ranks on node0 with 2 CPUs" in summary
    imb = [f for f in doc["findings"] if f["kind"] == "load_imbalance"]
    assert imb and all(f["oversubscribed"] for f in imb)
    assert all("Measured oversubscribed (4 ranks on 2 CPUs)" in f["message"] for f in imb)
    assert "Measured oversubscribed (4 ranks on 2 CPUs)" in summary


def test_as_many_cpus_as_ranks_is_not_oversubscribed(tmp_path: Path) -> None:
    doc, summary = analyze(imbalanced(["a", "a", "b", "b"], "2 2"), tmp_path)
    assert not [w for w in doc["warnings"] if "oversubscribed" in w]
    assert "oversubscribed" not in summary
    assert doc["findings"] and not any(f["oversubscribed"] for f in doc["findings"])


def test_no_claim_without_trustworthy_cpu_counts(tmp_path: Path) -> None:
    # not recorded (another tracer, an older trace), damaged, or not one per host
    for i, cpus in enumerate([None, "two", "0", "2 2", "-1"]):
        d = tmp_path / str(i)
        d.mkdir()
        doc, _ = analyze(imbalanced(["node0"] * 4, cpus), d)
        assert not [w for w in doc["warnings"] if "oversubscribed" in w], cpus


def _descheduled(tb: TraceBuilder, delays_us: list[int]) -> TraceBuilder:
    """The tracer's run-delay samples: none waiting at the end of MPI_Init, `delays_us`
    (per rank) at the start of MPI_Finalize, so each rank's main thread was runnable but
    waiting for a CPU that long within its measured interval (10 000 µs)."""
    for r, d in enumerate(delays_us):
        for ev in tb.events[r]:
            if ev.kind == "leave" and ev.args[0] == "MPI_Init":
                ev.attrs["run_delay"] = 0
            if ev.kind == "enter" and ev.args[0] == "MPI_Finalize":
                ev.attrs["run_delay"] = d * US
    return tb


def test_measured_descheduling_in_the_warning_and_the_breakdown(tmp_path: Path) -> None:
    tb = _descheduled(imbalanced(["node0"] * 4, "2"), [4000, 6000, 6000, 5000])
    doc, _ = analyze(tb, tmp_path)
    assert [r["descheduled_s"] for r in doc["ranks"]] == [0.004, 0.006, 0.006, 0.005]
    over = [w for w in doc["warnings"] if w.startswith("oversubscribed")]
    assert over == ["oversubscribed: 4 ranks on node0 with 2 CPUs — ranks took turns on the "
                    "CPUs (ranks were runnable but waiting for a CPU 40–60% of their run "
                    "(measured)), so waiting, imbalance and the timing-driven findings "
                    "(marked `oversubscribed`) may be descheduling, not the program"]


def test_measured_descheduling_warns_without_oversubscription(tmp_path: Path) -> None:
    # as many CPUs as ranks, yet runnable but waiting 10% of the run (another job, say)
    doc, _ = analyze(_descheduled(imbalanced(["a", "a", "b", "b"], "2 2"),
                                  [1000] * 4), tmp_path)
    assert [w for w in doc["warnings"] if w.startswith("descheduled")] == [
        "descheduled: ranks were runnable but waiting for a CPU 10% of their run (measured) "
        "— waiting, imbalance and the timing-driven findings may be descheduling, not the "
        "program"]
    d = tmp_path / "little"
    d.mkdir()
    doc, _ = analyze(_descheduled(imbalanced(["a", "a", "b", "b"], "2 2"), [100] * 4), d)
    assert not [w for w in doc["warnings"] if "descheduled" in w]
    assert [r["descheduled_s"] for r in doc["ranks"]] == [0.0001] * 4
    d = tmp_path / "none"
    d.mkdir()
    doc, _ = analyze(imbalanced(["a", "a", "b", "b"], "2 2"), d)
    assert [r["descheduled_s"] for r in doc["ranks"]] == [None] * 4


def test_the_reports_carry_every_warning_of_the_run_that_has_them(tmp_path: Path) -> None:
    """Run A: 4 ranks on 2 CPUs; run B: on 2 hosts of 2 CPUs. Each report says A's warnings
    (the session's list, word for word) once, naming the run, and none for B."""
    a = imbalanced(["node0"] * 4, "2").write(tmp_path / "a")
    b = imbalanced(["a", "a", "b", "b"], "2 2").write(tmp_path / "b")
    warnings = Analysis(reader.load(a)).warnings
    assert [w[:15] for w in warnings] == ["oversubscribed:"]
    assert Analysis(reader.load(b)).warnings == []
    cmp = compare_traces(a, b)
    page = render_html(cmp)
    md_lines = render_markdown(cmp).splitlines()
    for w in warnings:
        assert page.count(f'<p class="warning"><b>warning:</b> a (<code>{a}</code>): '
                          f"{html.escape(w)}</p>") == 1
        assert md_lines.count(f"> **warning:** a (`{a}`): {md(w)}") == 1
    assert page.count('class="warning') == len(warnings)
    assert sum(line.startswith("> **warning:**") for line in md_lines) == len(warnings)
