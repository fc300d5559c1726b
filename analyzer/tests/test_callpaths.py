"""Call paths: OTF2 calling contexts (as the interposer writes them with
MPISCOPE_CALLPATH_DEPTH > 1) read into `calls.callpath` and `callpaths`, and findings named
by the first frame outside MPI and any wrapper layer (docs/callpaths.md).

The traces are written with the `otf2` writer following the interposer's conventions
(mpiscope_testing.tracegen): frames innermost first, each a SourceCodeLocation named like a
call site with its function's Region, chained by parent.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import otf2
import pandas as pd
import pytest
from otf2.enums import Paradigm, RegionRole

from mpiscope.analysis.session import Analysis
from mpiscope.archive import reader, writer
from mpiscope_testing.tracegen import BASE_TIME, TraceBuilder

# a two-level wrapper: the app's step() calls comm_layer(), which calls comm_inner(),
# which calls MPI_Allreduce
INNER = ("comm_inner.c:5", "comm_inner")
LAYER = ("comm_layer.c:20", "comm_layer")


def through_layer(app_line: str, function: str = "step") -> list[tuple[str, str]]:
    return [INNER, LAYER, (app_line, function)]


def allreduce_run(paths: list[tuple[list, int]], ranks: int = 2) -> TraceBuilder:
    """Init, then for each (path, n): n Allreduces from that path, rank 1 always 400 ns
    late (load imbalance), equal input and result hashes (provably redundant), Finalize."""
    tb = TraceBuilder(ranks=ranks)
    for r in range(ranks):
        tb.call(r, 0, 10, "MPI_Init", callsite="main.c:2")
    t = 1000
    for path, n in paths:
        for _ in range(n):
            for r in range(ranks):
                tb.collective(r, t + 400 * r, t + 1000, "MPI_Allreduce", sent=8, received=8,
                              in_hash=7, out_hash=7, prior_hash=7, callpath=path)
            t += 2000
    for r in range(ranks):
        tb.call(r, t, t + 10, "MPI_Finalize", callpath=[("main.c:40", "main")])
    return tb


def mpiscope(*args: object) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "PYTHONPATH")}
    return subprocess.run(["mpiscope", *map(str, args)], capture_output=True, text=True,
                          env={**env, "COLUMNS": "250"}, timeout=300)


def by_kind(analysis: Analysis, kind: str) -> dict[str, object]:
    return {f.callsite: f for f in analysis.findings if f.kind == kind}


# --------------------------------------------------------------------- reading


def test_callpaths_table_is_exactly_the_written_contexts(tmp_path):
    tb = TraceBuilder(ranks=2)
    for r in (0, 1):
        # no mpiscope:callsite: the call site is the innermost frame of the path
        tb.call(r, 0, 10, "MPI_Init", callpath=[("main.c:3", "main")])
        tb.collective(r, 100, 200, "MPI_Allreduce", sent=8, received=8,
                      callpath=through_layer("app.c:10"))
        # an explicit call site is kept as written
        tb.collective(r, 300, 400, "MPI_Barrier", callsite="barrier.c:1",
                      callpath=[("libx.so+0x1f", "libx.so+0x1f"), ("main.c:30", "main")])
        tb.call(r, 500, 510, "MPI_Finalize", callsite="main.c:40")
    trace = reader.load(tb.write(tmp_path / "t"), use_cache=False)

    cp = trace.callpaths
    assert list(cp.columns) == ["callpath", "level", "frame", "function", "library"]
    assert not cp["library"].any()  # the program's own files
    paths = {pid: list(zip(g["frame"], g["function"], strict=True))
             for pid, g in cp.groupby("callpath")}
    # one path per context: each frame with its callers (the written chains and their tails)
    assert sorted(paths.values()) == sorted([
        [("main.c:3", "main")],
        [("app.c:10", "step")],
        [LAYER, ("app.c:10", "step")],
        [INNER, LAYER, ("app.c:10", "step")],
        [("main.c:30", "main")],
        [("libx.so+0x1f", "libx.so+0x1f"), ("main.c:30", "main")],
    ])
    assert all(list(g["level"]) == list(range(len(g))) for _p, g in cp.groupby("callpath"))

    calls = trace.calls
    got = {(int(r), str(f)): (str(cs), paths.get(int(p)))
           for r, f, cs, p in zip(calls["rank"], calls["function"], calls["callsite"],
                                  calls["callpath"], strict=True)}
    for r in (0, 1):  # equal paths on different ranks: one id
        assert got[(r, "MPI_Init")] == ("main.c:3", [("main.c:3", "main")])
        assert got[(r, "MPI_Allreduce")] == ("comm_inner.c:5", through_layer("app.c:10"))
        assert got[(r, "MPI_Barrier")][0] == "barrier.c:1"
        assert got[(r, "MPI_Finalize")] == ("main.c:40", None)  # no path: -1
    assert (calls.loc[calls["function"] == "MPI_Finalize", "callpath"] == -1).all()

    # the cache gives the same tables back
    reader.load(tmp_path / "t")
    cached = reader.load(tmp_path / "t")
    pd.testing.assert_frame_equal(cached.callpaths, cp, check_dtype=False)
    assert list(cached.calls["callpath"]) == list(calls["callpath"])


def test_otf2_print_shows_the_calling_contexts(tmp_path):
    if not shutil.which("otf2-print"):
        pytest.skip("otf2-print not installed")
    path = allreduce_run([(through_layer("app.c:10"), 2)]).write(tmp_path / "t")
    out = subprocess.run(["otf2-print", "-G", str(path / "traces.otf2")], capture_output=True,
                         text=True, timeout=60).stdout
    contexts = [" ".join(line.split()[2:]) for line in out.splitlines()
                if line.startswith("CALLING_CONTEXT ")]
    assert contexts == [
        'Region: "step" <1>, Source code location: "app.c:10" <1>, Parent: UNDEFINED',
        'Region: "comm_layer" <2>, Source code location: "comm_layer.c:20" <2>, '
        'Parent: "step@app.c:10" <0>',
        'Region: "comm_inner" <3>, Source code location: "comm_inner.c:5" <3>, '
        'Parent: "comm_layer@comm_layer.c:20" <1>',
        'Region: "main" <5>, Source code location: "main.c:40" <4>, Parent: UNDEFINED']
    events = subprocess.run(["otf2-print", "-A", str(path / "traces.otf2")],
                            capture_output=True, text=True, timeout=60).stdout
    assert ('("mpiscope:callpath" <4>; CALLING_CONTEXT; "comm_inner@comm_inner.c:5" <2>)'
            in events)


def test_a_trace_without_contexts_gives_callpath_equal_to_callsite(tmp_path):
    tb = TraceBuilder(ranks=2)
    for r in (0, 1):
        tb.call(r, 0, 10, "MPI_Init", callsite="main.c:2")
        for i in range(5):
            tb.collective(r, 1000 + 2000 * i + 400 * r, 2000 + 2000 * i, "MPI_Allreduce",
                          sent=8, received=8, in_hash=7, out_hash=7, prior_hash=7,
                          callsite="app.c:10")
        tb.call(r, 20000, 20010, "MPI_Finalize", callsite="main.c:40")
    trace = reader.load(tb.write(tmp_path / "t"), use_cache=False)
    assert trace.callpaths.empty and (trace.calls["callpath"] == -1).all()
    a = Analysis(trace)
    js = a.to_dict()
    assert js["findings"]
    for f in js["findings"]:
        assert f["callpath"] == [f["callsite"]] == ["app.c:10"]
    for c in js["callsites"]:
        assert c["callpath"] == [c["callsite"]]


def test_score_p_calling_contexts_do_not_break_reading(tmp_path):
    """Score-P's unwinding writes CallingContext definitions and CallingContextEnter/
    Leave events: not call paths of MPI calls here, and read without error."""
    path = tmp_path / "scorep"
    with otf2.writer.open(str(path), timer_resolution=1_000_000_000) as w:
        w._update_timestamps(BASE_TIME)
        d = w.definitions
        node = d.system_tree_node("node0")
        loc = d.location("rank 0", group=d.location_group("MPI Rank 0",
                                                         system_tree_parent=node))
        main = d.region("main", region_role=RegionRole.FUNCTION, paradigm=Paradigm.USER)
        bar = d.region("MPI_Barrier", region_role=RegionRole.BARRIER, paradigm=Paradigm.MPI)
        outer = d.calling_context(main, d.source_code_location("main.c", 3), None)
        d.calling_context(bar, d.source_code_location("main.c", 7), outer)
        ew = w.event_writer_from_location(loc)
        ew.calling_context_enter(BASE_TIME + 10, outer, 1)
        ew.enter(BASE_TIME + 20, bar)
        ew.leave(BASE_TIME + 30, bar)
        ew.calling_context_leave(BASE_TIME + 40, outer)
    trace = reader.load(path, use_cache=False)
    assert list(trace.calls["function"]) == ["MPI_Barrier"]
    assert list(trace.calls["callpath"]) == [-1]
    assert trace.callpaths.empty  # another tool's contexts are not MPI call paths
    Analysis(trace).to_dict()


def test_replayed_traces_keep_their_call_paths(tmp_path):
    src = reader.load(allreduce_run([(through_layer("app.c:10"), 3)]).write(tmp_path / "a"),
                      use_cache=False)
    out = reader.load(writer.write(src, tmp_path / "b"), use_cache=False)

    def frames(t):
        names = {p: list(g["frame"]) for p, g in t.callpaths.groupby("callpath")}
        return [names.get(int(p), []) for p in t.calls["callpath"]]

    assert frames(out) == frames(src)
    assert frames(out)[1] == [f for f, _fn in through_layer("app.c:10")]
    assert list(out.calls["callsite"].astype(str)) == list(src.calls["callsite"].astype(str))


def test_a_rewritten_trace_keeps_which_frames_are_library_code(tmp_path):
    """An archive mpiscope writes (a replay's prediction, a salvaged job) names frames by
    their labels, the files' names without their paths: unittest's runner must still read
    back as library code, the program's own file as its own."""
    case = "/usr/lib/python3.11/unittest/case.py"
    path = [("/src/suite/test_x.py:12", "TestX.test_sum"), (f"{case}:579", "TestCase.run")]
    src = reader.load(allreduce_run([(path, 2)]).write(tmp_path / "a"), use_cache=False)
    out = reader.load(writer.write(src, tmp_path / "b"), use_cache=False)

    def flags(t):
        return dict(zip(t.callpaths["frame"], t.callpaths["library"], strict=True))

    assert not flags(src)["test_x.py:12"] and flags(src)["case.py:579"]
    assert flags(out) == flags(src)


def test_a_salvaged_jobs_ranks_share_one_set_of_paths(tmp_path):
    """A job that died leaves one archive per rank (DIR/rank<N>/), each numbering its own
    contexts: merged, equal paths are one id again."""
    job = tmp_path / "job"
    job.mkdir()
    orders = {0: [through_layer("app.c:10"), [("main.c:7", "main")]],
              1: [[("main.c:7", "main")], through_layer("app.c:10")]}
    for r, order in orders.items():
        tb = TraceBuilder(ranks=2)
        tb.call(r, 0, 10, "MPI_Init", callsite="main.c:2")
        for i, path in enumerate(order):
            tb.collective(r, 100 + 100 * i, 150 + 100 * i, "MPI_Allreduce", sent=8,
                          received=8, callpath=path)
        tb.write(job / f"rank{r}")
    trace = reader.load(job, use_cache=False)
    names = {p: list(g["frame"]) for p, g in trace.callpaths.groupby("callpath")}
    c = trace.calls[trace.calls["function"] == "MPI_Allreduce"]
    got = {(int(r), names[int(p)][-1]): int(p)
           for r, p in zip(c["rank"], c["callpath"], strict=True)}
    assert got[(0, "app.c:10")] == got[(1, "app.c:10")]
    assert got[(0, "main.c:7")] == got[(1, "main.c:7")] != got[(0, "app.c:10")]
    assert names[got[(0, "app.c:10")]] == [f for f, _fn in through_layer("app.c:10")]


# --------------------------------------------------------------------- naming the call site


def test_two_level_wrapper_names_the_apps_line(tmp_path):
    """app.c:10 -> comm_layer -> comm_inner -> MPI_Allreduce, the layer also reached from
    app.c:30, app.c:50: both wrapper functions are detected; the findings name app.c:10
    with the whole path of depth 3."""
    tb = allreduce_run([(through_layer("app.c:10"), 30), (through_layer("app.c:30"), 1),
                        (through_layer("app.c:50", "init"), 1)])
    trace = reader.load(tb.write(tmp_path / "t"), use_cache=False)
    a = Analysis(trace)
    assert a.paths.wrappers == {"comm_inner", "comm_layer"}
    red = by_kind(a, "redundant_collective")
    assert set(red) == {"app.c:10"}
    f = red["app.c:10"]
    assert f.callpath == ["comm_inner.c:5", "comm_layer.c:20", "app.c:10"]
    assert f.calls == 2 * 29  # every call after the first, on both ranks
    assert "load_imbalance" in {x.kind for x in a.findings}
    js = a.to_dict()
    for f in js["findings"]:
        assert f["callsite"] == f["callpath"][-1] and f["callpath"][:2] == [INNER[0], LAYER[0]]
    sites = {c["callsite"]: c for c in js["callsites"] if c["function"] == "MPI_Allreduce"}
    assert sites["app.c:10"]["calls"] == 60 and sites["app.c:30"]["calls"] == 2
    # the raw tables are unchanged: their call site is the frame that called MPI
    assert set(trace.calls["callsite"].astype(str)) >= {"comm_inner.c:5"}


def test_skip_frames_globs_name_the_first_frame_outside_them(tmp_path):
    """One path only: nothing is detected as a wrapper, the user names the layer."""
    cxx = [("comm_brick.cpp:120", "LAMMPS_NS::CommBrick::reverse_comm()"),
           ("verlet.cpp:300", "LAMMPS_NS::Verlet::run(int)"),
           ("run.cpp:180", "LAMMPS_NS::Run::command(int, char**)")]
    fortran = [("libmpi_mpifh.so.40+0x1234", "pmpi_allreduce_"),
               ("message_passing.F:50", "message_passing::mp_sum_d"),
               ("qs_energy.F:10", "qs_energy::qs_energies")]
    for name, path, globs, named in [
            ("layer", through_layer("app.c:10"), "comm_*", "app.c:10"),
            ("inner", through_layer("app.c:10"), "comm_inner", "comm_layer.c:20"),
            ("cxx", cxx, "LAMMPS_NS::Comm*", "verlet.cpp:300"),
            ("fortran", fortran, "message_passing::*", "qs_energy.F:10"),
            ("frame", through_layer("app.c:10"), "comm_*.c:*", "app.c:10")]:
        trace = reader.load(allreduce_run([(path, 10)]).write(tmp_path / name),
                            use_cache=False)
        default = Analysis(trace)
        assert not default.paths.wrappers
        # the MPI library's own frames are never named
        first = path[1][0] if name == "fortran" else path[0][0]
        assert set(by_kind(default, "redundant_collective")) == {first}, name
        a = Analysis(trace, skip_frames=globs)
        f = by_kind(a, "redundant_collective")[named]
        assert f.callpath == [fr for fr, _fn in path], name
    # every frame skipped: the outermost one recorded names the call
    a = Analysis(trace, skip_frames="*")
    assert set(by_kind(a, "redundant_collective")) == {"app.c:10"}


def test_wrapper_detection_rule(tmp_path):
    """exchange() calls only MPI and is reached from 3 call paths: a wrapper. twice() is
    reached from 2 only; mixed() also calls compute(), a function of the app's own."""
    def at(frame, fn):
        return (frame, fn)

    paths = []
    for line in (11, 12, 13):
        paths.append(([at("exchange.c:5", "exchange"), at(f"main.c:{line}", "main")], 3))
    for line in (21, 22):
        paths.append(([at("twice.c:5", "twice"), at(f"main.c:{line}", "main")], 3))
    for line in (31, 32):
        paths.append(([at("mixed.c:5", "mixed"), at(f"main.c:{line}", "main")], 3))
    paths.append(([at("compute.c:9", "compute"), at("mixed.c:8", "mixed"),
                   at("main.c:33", "main")], 3))
    trace = reader.load(allreduce_run(paths).write(tmp_path / "t"), use_cache=False)
    a = Analysis(trace)
    assert a.paths.wrappers == {"exchange"}
    sites = set(by_kind(a, "redundant_collective"))
    assert {"main.c:11", "main.c:12", "main.c:13"} <= sites
    assert {"twice.c:5", "mixed.c:5", "compute.c:9"} <= sites
    assert not sites & {"exchange.c:5"}
    # no detection when asked by name only
    assert not Analysis(trace, skip_frames="nothing").paths.wrappers - {"exchange"}


def test_group_by_path_splits_one_frame_by_its_paths(tmp_path):
    """Two paths through the same app line (from main.c:5 and main.c:6): grouped by frame
    one call site, by path two, each finding still naming the frame."""
    p1 = [INNER, LAYER, ("app.c:10", "step"), ("main.c:5", "main")]
    p2 = [INNER, LAYER, ("app.c:10", "step"), ("main.c:6", "main")]
    trace = reader.load(allreduce_run([(p1, 10), (p2, 5)]).write(tmp_path / "t"),
                        use_cache=False)
    by_frame = Analysis(trace, skip_frames="comm_*")
    rows = [c for c in by_frame.to_dict()["callsites"] if c["function"] == "MPI_Allreduce"]
    assert [(c["callsite"], c["calls"]) for c in rows] == [("app.c:10", 30)]
    by_path = Analysis(trace, skip_frames="comm_*", group_by="path")
    rows = [c for c in by_path.to_dict()["callsites"] if c["function"] == "MPI_Allreduce"]
    assert sorted((c["callsite"], c["calls"], c["callpath"][-1]) for c in rows) == [
        ("app.c:10", 10, "main.c:6"), ("app.c:10", 20, "main.c:5")]
    red = [f for f in by_path.findings if f.kind == "redundant_collective"]
    assert sorted(f.callpath[-1] for f in red) == ["main.c:5", "main.c:6"]
    assert all(f.callsite == "app.c:10" for f in red)


def test_python_facade_takes_skip_frames(tmp_path):
    import mpiscope

    trace = mpiscope.load(allreduce_run([(through_layer("app.c:10"), 5)]).write(tmp_path / "t"))
    found = mpiscope.analyze(trace, skip_frames=["comm_inner", "comm_layer"]).findings
    assert {f.callsite for f in found} == {"app.c:10"}


# --------------------------------------------------------------------- what users see


def test_summary_and_json_show_the_path(tmp_path):
    path = allreduce_run([(through_layer("app.c:10"), 10)]).write(tmp_path / "t")
    out = tmp_path / "a.json"
    p = mpiscope("analyze", path, "--skip-frames", "comm_*", "--json", out)
    assert p.returncode == 0, p.stderr
    via = "app.c:10 via comm_inner.c:5 <- comm_layer.c:20 <- app.c:10"
    findings = p.stdout[p.stdout.index("findings"):]
    assert f"redundant_collective {via}" in " ".join(findings.split())
    sites = p.stdout[p.stdout.index("Top 10 call sites"):p.stdout.index("Where ranks wait")]
    assert via in " ".join(sites.split())
    doc = json.loads(out.read_text())
    red = [f for f in doc["findings"] if f["kind"] == "redundant_collective"]
    assert red[0]["callsite"] == "app.c:10"
    assert red[0]["callpath"] == ["comm_inner.c:5", "comm_layer.c:20", "app.c:10"]
    # without the globs the wrapper's line names it (one path: nothing to detect)
    p = mpiscope("analyze", path, "--json", out)
    assert p.returncode == 0, p.stderr
    assert {f["callsite"] for f in json.loads(out.read_text())["findings"]} == \
        {"comm_inner.c:5"}


def test_compare_reports_show_the_path(tmp_path):
    a = allreduce_run([(through_layer("app.c:10"), 10)]).write(tmp_path / "a")
    b = allreduce_run([(through_layer("app.c:10"), 3)]).write(tmp_path / "b")
    html, md = tmp_path / "r.html", tmp_path / "r.md"
    p = mpiscope("compare", a, b, "--skip-frames", "comm_*", "--html", html, "--md", md)
    assert p.returncode == 0, p.stderr
    text = md.read_text()
    assert "`app.c:10` via `comm_inner.c:5 <- comm_layer.c:20 <- app.c:10`" in text
    page = html.read_text()
    assert "<code>app.c:10</code><br>" in page
    assert "via comm_inner.c:5 &lt;- comm_layer.c:20 &lt;- app.c:10" in page
    # the timeline's hover data: HTML-escaped text, which Plotly shows as "<-"
    # (render.plottext: a name is never read as markup)
    assert '"via comm_inner.c:5 &lt;- comm_layer.c:20 &lt;- app.c:10"]' in page


def test_whatif_accepts_the_call_site_a_finding_names(tmp_path):
    path = allreduce_run([(through_layer("app.c:10"), 10)]).write(tmp_path / "t")
    out = tmp_path / "w.json"
    p = mpiscope("whatif", path, "--remove", "MPI_Allreduce@app.c:10", "--json", out)
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert doc["predicted_s"] < doc["replayed_s"]


def test_frames_of_the_mpi_library_are_known_by_function_or_object():
    from mpiscope.analysis.callpaths import in_mpi

    assert in_mpi("x.c:1", "PMPI_Allreduce") and in_mpi("y+0x1", "mpi_allreduce_")
    assert in_mpi("libmpi.so.40+0x10", "libmpi.so.40+0x10")  # no symbol: the object's
    assert in_mpi("libmpich.so.12+0x9", "")
    assert in_mpi("MPI.cpython-311-x86_64-linux-gnu.so+0x99", "")  # mpi4py
    # the user's own code, whatever its file is called
    assert not in_mpi("mpi_util.c:40", "exchange_halo")
    assert not in_mpi("app.c:10", "main")


CASE = "/usr/lib/python3.11/unittest/case.py"


def test_a_test_helper_is_named_at_the_tests_line_not_at_unittests_runner(tmp_path):
    """mpi4py's suite: a helper `check()` that only calls MPI (a detected wrapper) is
    called from test methods that unittest's runner calls. The runner's frames are library
    code (Python's standard library), so the call is named at the helper's line in the
    program's own file: the outermost of its own frames, never `case.py:579`."""
    helper = ("/src/suite/test_types.py:666", "TestTypes.check")
    paths = [  # the helper reached from three caller chains, each cut by a depth of 3:
        # from setUp, the test method and tearDown
        [helper, (f"{CASE}:576", "TestCase._callSetUp"), (f"{CASE}:619", "TestCase.run")],
        [helper, (f"{CASE}:579", "TestCase._callTestMethod"), (f"{CASE}:623", "TestCase.run")],
        [helper, (f"{CASE}:584", "TestCase._callTearDown"), (f"{CASE}:626", "TestCase.run")],
    ]
    trace = reader.load(allreduce_run([(p, 2) for p in paths]).write(tmp_path / "t"),
                        use_cache=False)
    cp = trace.callpaths
    lib = dict(zip(cp["frame"], cp["library"], strict=True))
    assert not lib["test_types.py:666"]
    assert lib["case.py:579"] and lib["case.py:576"]

    a = Analysis(trace)
    assert "TestTypes.check" in a.paths.wrappers
    calls = a.trace.calls
    sites = set(calls.loc[calls["function"] == "MPI_Allreduce", "callsite"].astype(str))
    assert sites == {"test_types.py:666"}
    assert all(f.callsite != "case.py:579" for f in a.all_findings)


def test_a_function_called_from_one_place_is_no_wrapper_under_a_depth_limit(tmp_path):
    """solve() is the program's own step, called from one place (step <- run <- main). It
    calls MPI directly, through exchange() (a wrapper, one layer) and through comm_layer()
    (two layers), so at a depth of 4 its one caller chain is cut after 3, 2 and 1 outer
    frames: three different tails of the same chain, not three callers. solve is no
    wrapper, and its calls are named at its own lines; the real wrappers, reached from
    setup() too, are still detected, the cut tails of their calls from solve included."""
    chain = [("driver.c:30", "step"), ("driver.c:50", "run"), ("main.c:7", "main")]
    exchange = ("exchange.c:5", "exchange")
    paths = [
        ([("solve.c:10", "solve"), *chain], 10),
        ([exchange, ("solve.c:11", "solve"), *chain][:4], 10),
        ([*through_layer("solve.c:12", "solve"), *chain][:4], 10),
        # the wrappers' other callers: set-up code called by main (whole paths, < 4)
        ([exchange, ("setup.c:5", "setup"), ("main.c:4", "main")], 1),
        ([exchange, ("setup.c:6", "setup"), ("main.c:4", "main")], 1),
        ([*through_layer("setup.c:7", "setup"), ("main.c:4", "main")], 1),
        ([*through_layer("setup.c:8", "setup"), ("main.c:4", "main")], 1),
    ]
    assert max(len(p) for p, _n in paths) == 4
    trace = reader.load(allreduce_run(paths).write(tmp_path / "t"), use_cache=False)
    a = Analysis(trace)
    assert a.paths.wrappers == {"exchange", "comm_inner", "comm_layer"}
    sites = {c["callsite"]: c for c in a.to_dict()["callsites"]
             if c["function"] == "MPI_Allreduce"}
    assert {s: c["calls"] for s, c in sites.items()} == {
        "solve.c:10": 20, "solve.c:11": 20, "solve.c:12": 20,
        "setup.c:5": 2, "setup.c:6": 2, "setup.c:7": 2, "setup.c:8": 2}
    assert sites["solve.c:12"]["callpath"] == [
        "comm_inner.c:5", "comm_layer.c:20", "solve.c:12", "driver.c:30"]
    assert all(f.callsite != "driver.c:30" for f in a.all_findings)


def test_a_cut_tail_that_begins_no_other_is_a_caller_of_its_own(tmp_path):
    """Only a cut tail that begins a longer one is merged into it: a whole (uncut) tail is
    its caller's whole chain, a caller of its own even where a cut tail begins with it,
    and cut tails that differ in a frame they both kept are different callers."""
    bcast = ("bcast.c:3", "bcast_all")
    paths = [
        ([bcast, ("a.c:1", "f1"), ("b.c:1", "g1"), ("c.c:1", "h1")], 3),  # cut
        ([bcast, ("a.c:2", "f2"), ("b.c:2", "g2")], 3),  # whole
        ([bcast, ("a.c:2", "f2"), ("b.c:2", "g2"), ("c.c:2", "h2")], 3),  # cut, begun by it
        ([INNER, LAYER, ("d.c:1", "f3"), ("e.c:1", "g3")], 3),  # cut
        ([INNER, ("f.c:1", "f4"), ("g.c:1", "g4"), ("h.c:1", "h4")], 3),  # cut
        ([INNER, LAYER, ("x.c:1", "f5")], 3),  # whole
    ]
    trace = reader.load(allreduce_run(paths).write(tmp_path / "t"), use_cache=False)
    # bcast_all: (a.c:1, b.c:1, c.c:1), (a.c:2, b.c:2) and (a.c:2, b.c:2, c.c:2): 3 callers;
    # comm_inner: (comm_layer.c:20, d.c:1, e.c:1), (f.c:1, ..), (comm_layer.c:20, x.c:1):
    # 3; comm_layer: (d.c:1, e.c:1) and (x.c:1): 2, no wrapper
    assert Analysis(trace).paths.wrappers == {"bcast_all", "comm_inner"}


DEEP_CALLER = '''\
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
x, y = np.ones(2), np.empty(2)


def exchange():  # a wrapper: only MPI, from three places
    comm.Allreduce(x, y)


def inner():
    comm.Allreduce(x, y)


def layer():  # a two-level wrapper with inner
    inner()


def solve():  # the program's own step: called from one place only
    comm.Allreduce(x, y)  # SOLVE:direct
    exchange()  # SOLVE:exchange
    layer()  # SOLVE:layer


def step():
    solve()


def run(n):
    for _ in range(n):
        step()


def setup():
    exchange()
    exchange()
    layer()
    layer()


setup()
run(5)
'''


def test_a_traced_function_called_from_one_place_is_named_at_its_lines(tmp_path):
    """The case above, traced: an mpi4py program at the default depth (4) whose solve()
    is reached through one chain (run -> step -> solve) and calls MPI directly and through
    one- and two-level wrappers. Its calls are named at its own lines, not at step's."""
    pytest.importorskip("mpi4py")
    from mpiscope_testing import mpijobs
    from mpiscope_testing.scenarios import analyze_json

    prog = tmp_path / "deep.py"
    prog.write_text(DEEP_CALLER)
    job = mpijobs.run(["python3", str(prog)], np=2, out=tmp_path / "trace")
    assert job.returncode == 0, job.stderr
    _, doc = analyze_json(tmp_path / "trace", tmp_path)
    lines = DEEP_CALLER.splitlines()

    def at(text: str) -> str:
        return f"deep.py:{next(i + 1 for i, t in enumerate(lines) if text in t)}"

    sites = {c["callsite"]: c["calls"] for c in doc["callsites"]
             if c["function"] == "MPI_Allreduce"}
    solve = {at(f"# SOLVE:{k}") for k in ("direct", "exchange", "layer")}
    assert solve <= set(sites), sites
    assert all(sites[s] == 2 * 5 for s in solve), sites
    assert at("    solve()") not in sites, sites  # step's line: solve taken for a wrapper
    paths = {tuple(c["callpath"]) for c in doc["callsites"] if c["callsite"] in solve}
    assert (at("comm.Allreduce(x, y)  # SOLVE"), at("    solve()"), at("        step()"),
            at("run(5)")) in paths, paths
