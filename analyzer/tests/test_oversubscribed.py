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
