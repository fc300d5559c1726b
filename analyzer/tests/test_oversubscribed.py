"""More ranks than CPUs on a host (the tracer's MPISCOPE::HOST_CPUS against the ranks'
hosts): one warning in `analyze`'s JSON and summary, and the timing-driven findings
marked; by construction (TraceBuilder), so nothing depends on how a run was scheduled."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from mpiscope_testing.tracegen import TraceBuilder

US = 1000


def imbalanced(hosts: list[str], cpus: str | None) -> TraceBuilder:
    """4 ranks, 10 iterations: rank 3 computes 600 µs longer before each Allreduce (a load
    imbalance by construction)."""
    tb = TraceBuilder(ranks=4, hosts=hosts)
    if cpus is not None:
        tb.properties["MPISCOPE::HOST_CPUS"] = cpus
    for r in range(4):
        tb.call(r, 0, 10 * US, "MPI_Init", callsite="app.c:1")
        tb.call(r, 10_010 * US, 10_020 * US, "MPI_Finalize", callsite="app.c:9")
    for i in range(10):
        b = (10 + 1000 * i) * US
        for r in range(4):
            tb.collective(r, b + (900 if r == 3 else 300) * US, b + 910 * US,
                          "MPI_Allreduce", sent=8, received=8, callsite="app.c:5")
    return tb


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
