"""The main job end to end: `mpiscope study himeno` on a tiny size, as a user runs it."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCREENSHOT = ROOT / "docs" / "report.png"  # the README's picture (MPISCOPE_UPDATE_DOCS=1)
ARTIFACTS = ROOT / "test-artifacts"
ITERATIONS = 40
REPEAT = 3  # the default


@pytest.fixture(scope="module")
def study_run(tmp_path_factory, himeno) -> tuple[Path, str]:
    """The study as a user runs it (default --repeat); its output directory and stderr.
    (18 traced Himeno runs and their analyses: 30 min is a hang, not a busy machine.)"""
    out = tmp_path_factory.mktemp("study")
    proc = subprocess.run(["mpiscope", "study", "himeno", "--size", "XS", "--iterations",
                           str(ITERATIONS), "--ranks", "1,2,4", "--out", str(out)],
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr
    return out, proc.stderr


@pytest.fixture(scope="module")
def study(study_run) -> Path:
    return study_run[0]


def study_error(tmp_path: Path, *args: str) -> str:
    """stderr of a study the user got wrong; it must fail with exit code 2."""
    proc = subprocess.run(["mpiscope", "study", "himeno", "--size", "XS", "--iterations", "5",
                           "--ranks", "1", "--repeat", "1", "--out", str(tmp_path / "s"), *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    return proc.stderr


def analyzer_json(trace: Path, tmp: Path) -> dict:
    out = tmp / f"{trace.name}.json"
    subprocess.run(["mpiscope", "analyze", str(trace), "--json", str(out)], check=True,
                   capture_output=True, timeout=300)
    return json.loads(out.read_text())


def assert_printed(text: str, seconds: float) -> None:
    """`text` ("1.46 ms", "0.1234 s") shows `seconds` to the digits it prints: it is the
    ground truth rounded there, so it may differ by half a unit of its last digit."""
    number, unit = text.split()
    scale = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}[unit]
    decimals = len(number.partition(".")[2])  # %g drops trailing zeros: never too strict
    half_unit = 0.5 * 10.0 ** -decimals * scale
    assert abs(float(number) * scale - seconds) <= half_unit * (1 + 1e-9), (text, seconds)


@pytest.mark.parametrize("text, seconds", [("1.46 ms", 0.001455447), ("0.1234 s", 0.12344),
                                           ("12.35 s", 12.3451), ("0.01 s", 0.0100004)])
def test_printed_precision_check_accepts_rounding(text: str, seconds: float) -> None:
    assert_printed(text, seconds)


@pytest.mark.parametrize("text, seconds", [("1.46 ms", 0.001454), ("0.1234 s", 0.1236)])
def test_printed_precision_check_rejects_a_wrong_digit(text: str, seconds: float) -> None:
    with pytest.raises(AssertionError):
        assert_printed(text, seconds)


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
        assert allreduce == {"unpatched": ITERATIONS * n, "patched": 1 * n}


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
    # the unpatched run's findings are listed, each at its source line: the analyzer's
    # (which of them a run has is partly up to its timing: a busy machine's Himeno run may
    # spend too little of its time in the Allreduce for a frequent collective; the
    # barrier after the loop runs once: never claimed redundant, it saves nothing to act on)
    # (a finding of the whole run, descheduled, is the machine's: no change resolves it,
    # so the comparison leaves it out)
    found = [f for f in analyzer_json(study / "himeno-4-unpatched", tmp_path)["findings"]
             if f["function"] or f["callsite"]]
    for f in found:
        assert re.search(rf"{f['kind']}.*?{re.escape(f['callsite'])}", page, re.S), f
    if not found:
        assert "No findings in " in page
    src = (ROOT / "workloads" / "himeno" / "himeno.c").read_text().splitlines()
    line = next(i for i, s in enumerate(src, 1) if "MPI_Allreduce(&wgosa" in s)
    assert all((f["function"], f["callsite"]) == ("MPI_Allreduce", f"himeno.c:{line}")
               for f in found if f["kind"] == "frequent_collective")


# a desktop window and the smallest laptop's (issue 32): the report reads the same at both
WINDOWS = [(1400, 900), (1024, 768)]

# what a reader sees of the page's layout: the document's overflow; the run labels below
# the breakdown bars (the first chart) against the box of that chart's drawing; how
# findings' messages, the explanation and the paragraphs are aligned
LAYOUT_JS = """
const de = document.documentElement;
const chart = document.querySelector('.js-plotly-plot');
const box = r => [r.left, r.top, r.right, r.bottom];
const labels = Array.from(chart.querySelectorAll('text'))
  .filter(e => ['unpatched', 'patched'].includes(e.textContent))
  .map(e => [e.textContent, box(e.getBoundingClientRect())]);
const align = Array.from(document.querySelectorAll(
    'table.findings td:last-child, ul.explanation li, body > p'))
  .map(e => [e.textContent.slice(0, 40), getComputedStyle(e).textAlign]);
return {scroll: de.scrollWidth, client: de.clientWidth, labels: labels,
        messages: document.querySelectorAll('table.findings td:last-child').length,
        svg: box(chart.querySelector('svg.main-svg').getBoundingClientRect()), align: align};"""


@pytest.mark.parametrize("window", WINDOWS, ids=lambda w: f"{w[0]}x{w[1]}")
def test_report_opens_offline_in_a_browser_without_errors(study, browser, window):
    browser.set_window_size(*window)
    browser.get((study / "compare-4.html").as_uri())
    plots = browser.execute_script("return document.querySelectorAll('.js-plotly-plot').length")
    assert plots >= 3  # breakdown bars and two timelines drawn by the inlined Plotly
    assert browser.execute_script(
        "return performance.getEntriesByType('resource').length") == 0  # no network at all
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
    assert "speed-up" in browser.find_element("tag name", "body").text
    seen = browser.execute_script(LAYOUT_JS)
    # nothing to scroll sideways for
    assert seen["scroll"] <= seen["client"], seen
    # each run's label under its bars, whole: inside the chart's drawing, not cut by it
    assert sorted(text for text, _ in seen["labels"]) == ["patched", "unpatched"], seen
    left, top, right, bottom = seen["svg"]
    for text, (x0, y0, x1, y1) in seen["labels"]:
        assert left <= x0 and x1 <= right and top <= y0 and y1 <= bottom, (text, seen["svg"])
    # a finding's message (and the prose around it) reads from the left
    assert seen["messages"] > 0 or "No findings in " in browser.find_element(
        "tag name", "body").text
    assert all(a in ("start", "left") for _, a in seen["align"]), seen["align"]
    ARTIFACTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / f"report-{window[0]}x{window[1]}.png"))
    if window[0] == 1400 and os.environ.get("MPISCOPE_UPDATE_DOCS") == "1":
        # the README's picture, on request, at the size docs/report.png has always had
        browser.set_window_size(1400, 1000)
        browser.get((study / "compare-4.html").as_uri())
        browser.save_screenshot(str(SCREENSHOT))


def test_each_variant_runs_repeat_times_alternating_and_the_best_is_kept(study_run):
    study, stderr = study_run
    doc = json.loads((study / "study.json").read_text())
    assert doc["repeat"] == REPEAT and "best MFLOPS" in doc["selection"]
    # the order the user watched: per rank count U P, P U, U P (neither variant always last)
    order = re.findall(r"(\d) ranks (unpatched|patched)\s+run (\d)/(\d)", stderr)
    assert [(int(n), v, int(r)) for n, v, r, _ in order] == [
        (n, v, r) for n in (1, 2, 4) for r in (1, 2, 3)
        for v in (("unpatched", "patched") if r % 2 else ("patched", "unpatched"))]
    index = (study / "index.html").read_text()
    assert "best MFLOPS" in index and f"ran {REPEAT} times" in index
    for run in doc["runs"]:
        figures = run["mflops_all_runs"]
        assert len(figures) == REPEAT
        assert run["mflops"] == max(figures) == figures[run["kept_run"] - 1]
        # the kept trace is the kept run's: its own output says so
        kept = json.loads((Path(run["trace"]) / "program-output.txt").read_text()
                          .splitlines()[-1])
        assert kept["mflops"] == run["mflops"]
        for m in figures:  # every run's figure is on the index page
            assert f"{m:.1f}" in index
    # the progress lines carry the same figures, run by run
    for n, v, r, _ in order:
        run = next(x for x in doc["runs"] if x["ranks"] == int(n) and x["variant"] == v)
        line = re.search(rf"{n} ranks {v}\s+run {r}/{REPEAT}\s+([\d.]+) MFLOPS", stderr)
        assert float(line[1]) == pytest.approx(run["mflops_all_runs"][int(r) - 1], abs=0.06)
    # only the kept traces stay
    assert sorted(p.name for p in study.iterdir() if p.is_dir()) == sorted(
        f"himeno-{n}-{v}" for n in (1, 2, 4) for v in ("unpatched", "patched"))
    # patched/unpatched ratios are stated, best against best and over all runs
    for n in (1, 2, 4):
        runs = {r["variant"]: r for r in doc["runs"] if r["ranks"] == n}
        best = runs["patched"]["mflops"] / runs["unpatched"]["mflops"]
        assert re.search(rf"<tr><td>{n}</td><td>{best:.3f}×</td>", index)


def test_markdown_summary_has_runs_ranks_wait_states_and_mflops(study, tmp_path):
    md = (study / "compare-4.md").read_text()
    runs = json.loads((study / "study.json").read_text())["runs"]
    u, p = (next(r for r in runs if r["ranks"] == 4 and r["variant"] == v)
            for v in ("unpatched", "patched"))
    assert re.search(rf"\| MFLOPS \(program output\) \| {u['mflops']:.1f} \| "
                     rf"{p['mflops']:.1f} \|", md)
    assert f"**speed-up {p['mflops'] / u['mflops']:.3f}×** (MFLOPS)" in md
    assert "| MPI library | Open MPI" in md and "--variant patched" in md
    reps = {v: analyzer_json(study / f"himeno-4-{v}", tmp_path) for v in ("unpatched", "patched")}
    for rank in range(4):  # per-rank breakdown, before → after
        ra, rb = (next(r for r in reps[v]["ranks"] if r["rank"] == rank)
                  for v in ("unpatched", "patched"))
        row = next(line for line in md.splitlines() if line.startswith(f"| {rank} | "))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 7
        for cell, key in zip(cells[2:], ("total_s", "compute_s", "communication_s",
                                         "synchronization_s", "io_s"), strict=True):
            before, after = cell.split(" → ")
            assert_printed(before, ra[key])
            assert_printed(after, rb[key])
    assert "#### Wait states" in md
    for key in reps["unpatched"]["wait_states"]:
        assert f"| {key.removesuffix('_s').replace('_', ' ')} |" in md
    assert re.search(r"\| MPI_Allreduce \| " + rf"{ITERATIONS * 4} → 4 \|", md)


@pytest.mark.parametrize("args, says", [
    (["--ranks", "0"], "--ranks wants rank counts >= 1 like 1,2,4, not '0'"),
    (["--ranks", "2,-1"], "--ranks wants rank counts >= 1"),
    (["--ranks", "two"], "--ranks wants rank counts >= 1 like 1,2,4, not 'two'"),
    (["--allreduce-every", "0"], "--allreduce-every wants K >= 1, not 0"),
    (["--repeat", "0"], "--repeat wants R >= 1, not 0"),
])
def test_bad_study_arguments_are_one_line_errors(tmp_path, args, says):
    err = study_error(tmp_path, *args)
    assert err.count("\n") == 1 and err.startswith("mpiscope: study: ") and says in err
    assert not (tmp_path / "s").exists()  # refused before anything ran


@pytest.mark.parametrize("args, says", [
    (["--size", "Q"], "himeno: --size is XS, S, M, L or XL"),
    (["--iterations", "0"], "himeno: --iterations wants N >= 1"),
])
def test_arguments_himeno_refuses_show_himenos_reason(tmp_path, himeno, args, says):
    err = study_error(tmp_path, *args)
    assert err.count("\n") == 1 and says in err, err
    assert "---" not in err  # not mpirun's banner
    assert list((tmp_path / "s").iterdir()) == []  # no trace of the refused run left behind
