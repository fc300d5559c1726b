"""The main job end to end: `mpiscope study himeno` on a tiny size, as a user runs it."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts" / "study"


@pytest.fixture(scope="module")
def study(tmp_path_factory, himeno) -> Path:
    out = tmp_path_factory.mktemp("study")
    proc = subprocess.run(["mpiscope", "study", "himeno", "--size", "XS", "--iterations", "40",
                           "--ranks", "1,2,4", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return out


def analyzer_json(trace: Path, tmp: Path) -> dict:
    out = tmp / f"{trace.name}.json"
    subprocess.run(["mpiscope", "analyze", str(trace), "--json", str(out)], check=True,
                   capture_output=True, timeout=300)
    return json.loads(out.read_text())


def test_study_writes_traces_reports_and_an_index(study):
    for n in (1, 2, 4):
        for v in ("unpatched", "patched"):
            assert (study / f"himeno-{n}-{v}" / "traces.otf2").is_file()
        assert (study / f"compare-{n}.html").is_file()
        assert (study / f"compare-{n}.md").read_text().startswith("### mpiscope")
    index = (study / "index.html").read_text()
    for page in ("compare-1.html", "compare-2.html", "compare-4.html", "scaling.html"):
        assert f"href='{page}'" in index


def test_patched_runs_compute_the_same_answer_with_one_allreduce(study, tmp_path):
    runs = json.loads((study / "study.json").read_text())["runs"]
    for n in (1, 2, 4):
        a, b = (next(r for r in runs if r["ranks"] == n and r["variant"] == v)
                for v in ("unpatched", "patched"))
        assert a["gosa"] == b["gosa"]
        calls = {v: analyzer_json(study / f"himeno-{n}-{v}", tmp_path)["functions"]
                 for v in ("unpatched", "patched")}
        allreduce = {v: next(f["calls"] for f in calls[v] if f["name"] == "MPI_Allreduce")
                     for v in calls}
        assert allreduce == {"unpatched": 40 * n, "patched": 1 * n}


def test_report_numbers_are_the_analyzers(study, tmp_path):
    """The comparison page quotes the analyzer's JSON and the program's own MFLOPS."""
    page = (study / "compare-4.html").read_text()
    runs = json.loads((study / "study.json").read_text())["runs"]
    for variant in ("unpatched", "patched"):
        rep = analyzer_json(study / f"himeno-4-{variant}", tmp_path)
        total = sum(r["total_s"] for r in rep["ranks"])
        share = next(f["time_s"] for f in rep["functions"] if f["name"] == "MPI_Allreduce") / total
        assert f"{100 * share:.1f}%" in page
        sync = sum(r["synchronization_s"] for r in rep["ranks"]) / total
        assert f"{100 * sync:.1f}%" in page
        mflops = next(r["mflops"] for r in runs if r["ranks"] == 4 and r["variant"] == variant)
        assert f"{mflops:.1f}" in page
    # the unpatched run's Allreduce-every-iteration is found, at the right source line
    src = (ROOT / "workloads" / "himeno" / "himeno.c").read_text().splitlines()
    line = next(i for i, s in enumerate(src, 1) if "MPI_Allreduce(&wgosa" in s)
    assert re.search(rf"frequent_collective.*?himeno\.c:{line}", page, re.S)


def test_report_opens_offline_in_a_browser_without_errors(study, chromium):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    chromium.get((study / "compare-4.html").as_uri())
    plots = chromium.execute_script("return document.querySelectorAll('.js-plotly-plot').length")
    assert plots >= 3  # breakdown bars and two timelines drawn by the inlined Plotly
    assert chromium.execute_script(
        "return performance.getEntriesByType('resource').length") == 0  # no network at all
    errors = [e for e in chromium.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
    assert "speed-up" in chromium.find_element("tag name", "body").text
    chromium.save_screenshot(str(ARTIFACTS / "compare-4.png"))
