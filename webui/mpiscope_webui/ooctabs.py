"""The analysis tabs of the out-of-core page (mpiscope_webui.ooc): what the Dask engine
computes rank by rank from the Parquet cache, never holding the trace, shown as the JSON
of `mpiscope analyze --engine dask` has it (one source of truth: that command's JSON).

The page's scope bar (the visible window or the whole run, a rank set) is kept: the
Functions tab follows it (mpiscope_webui.oocwindow: calls and time per function and per
process of the window and ranks, from the timeline pyramid and its detail), and so do,
once the analysis is done, the Breakdown (each rank's measured calls with their waiting
part, written by the profiles' pass below: oocwindow.write_breakdown) and the Messages
tab with the Profiles' messages per communicator and tag (each rank's sent messages by
send time, written by the same pass: oocwindow.MessagesWriter), all equal to the
in-memory window's; the whole run of all ranks stays the Dask engine's JSON, and the
Breakdown of the whole run keeps the ranks chosen. The Profiles of a window or a rank
set (every MPI function profile, wait states, user regions) and the Call tree of any
scope follow it too once that pass is done, for a scope of at most oocprofiles.bound()
calls and user regions (2 M): the scope's rows are read from the files the same pass
writes (oocprofiles.write) and the in-memory Window computes the tables; a larger scope
is said in one line above the whole run's tables. The whole run's user regions (all
ranks; the JSON has none) come from those rows too. The whole run's MPI function
profiles per process, thread, communicator and tag, and the messages per communicator
and tag of the whole run are put together from per-rank parts: after the analysis a
second child process (`python -m mpiscope_webui.ooctabs`) computes them rank by rank from
the Parquet cache and the wait files the analysis left (engines.rankprofile: the
in-memory profile code run on each rank's slice, medians across ranks from the ranks'
sorted values), shown with the in-memory tab's titles, columns and formats; per call
site is the analysis' JSON (its call sites named by their call paths).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
from dash import dcc, html

from mpiscope.analysis.findings import where
from mpiscope.analysis.window import WindowIndex
from mpiscope.errors import UserError
from mpiscope_webui import inputs, oocprofiles, oocwindow, views, windowstats
from mpiscope_webui.analysis import Panels, RunNotes
from mpiscope_webui.pyramid import Pyramid
from mpiscope_webui.timeline import View
from mpiscope_webui.windowstats import RUN, Scope

NICE = 10  # the analysis runs beside the timeline, below it
TABS = (("Breakdown", "breakdown"), ("Functions", "functions"), ("Messages", "messages"),
        ("Profiles", "profiles"), ("Call tree", "calltree"), ("Findings", "findings"))
SCOPE = ("Statistics of the whole run, {ranks} (out of core: the Dask engine's analysis, "
         "as `mpiscope analyze --engine dask` writes it).")
# what a tab cannot follow out of core (a window, or a rank set where it has all ranks)
NOT_IN_WINDOW = {
    "breakdown": "The breakdown of a window is not available: it needs each rank's "
                 "measured calls with their waiting part, which the profiles' pass writes "
                 "(it failed, see Profiles): these are the whole run's.",
    "messages": "The messages of a window or a rank set are not available: they need each "
                "rank's sent messages, which the profiles' pass writes (it failed, see "
                "Profiles): these are the whole run's, all ranks.",
    "profiles": "Profiles of a window or a rank set are not available out of core until "
                "the profiles' pass has written each rank's calls (running, or it failed): "
                "these are the whole run's, all ranks; the window's calls and time per "
                "process are under Functions, its messages per communicator and tag at the "
                "end of this tab.",
    "findings": "Findings are of the whole run.",
}
WindowOf = Callable[[tuple[int, int], "tuple[int, ...] | None"], oocwindow.WindowStats]
# the profiles computed out of core: (title, table name, keys), as windowstats.PROFILES;
# per call site the JSON's (the call sites relabelled by call path, engines.ranktasks)
COMPUTED = tuple(p for p in windowstats.PROFILES if p[1] != "per-callsite")
MESSAGES = "messages-comm-tag"  # the messages per communicator and tag, as in memory
BREAKDOWN = "breakdown"  # the child's directory of oocwindow.write_breakdown's files
SENT = "sent"  # the child's directory of oocwindow.MessagesWriter's files
# said under Profiles where its messages table follows the window (its functions do not)
MESSAGES_FOLLOW = ("Messages per communicator and tag: those of {where}, {ranks} (sent "
                   "inside the window, their sender or receiver among the ranks).")
NOT_HERE = {
    "profiles": "User regions are not available out of core: the profiles' pass wrote no "
                "rows of the ranks' calls (below: why).",
    "calltree": "The call tree is not available out of core until the profiles' pass has "
                "written each rank's calls (running, or it failed: see Profiles); the call "
                "sites with their paths are in Profiles.",
}


class Results:
    """The analysis of the trace as `mpiscope analyze --engine dask --json` writes it, run
    once in a child process (niced: the timeline's callbacks keep the CPU and the GIL,
    and the analysis' memory is not the server's); `json` once done, else `error`."""

    def __init__(self, trace_dir: Path, start: bool = True) -> None:
        self.trace_dir = trace_dir
        self.json: dict[str, Any] | None = None
        self.error: str | None = None
        # table name of COMPUTED -> its profile, once computed, else why not
        self.profiles: dict[str, pd.DataFrame] | None = None
        self.profiles_error: str | None = None
        # the measured calls per rank for a window's breakdown (oocwindow), written by the
        # profiles' child beside them and kept while the server runs (memory-mapped)
        self.breakdown: oocwindow.WindowBreakdown | None = None
        # each rank's sent messages by send time for a window's messages (oocwindow),
        # written beside them likewise
        self.messages: oocwindow.WindowMessages | None = None
        # each rank's calls and user regions for a window's profiles (oocprofiles), likewise
        self.window_rows: oocprofiles.WindowRows | None = None
        self._kept_dir: tempfile.TemporaryDirectory | None = None
        self._done = threading.Event()
        if start:
            threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        try:
            with tempfile.TemporaryDirectory(prefix="mpiscope-ooc-") as tmp:
                out = Path(tmp) / "analysis.json"
                log = Path(tmp) / "log"
                with log.open("w") as err:
                    proc = subprocess.run(
                        ["nice", "-n", str(NICE), sys.executable, "-m", "mpiscope", "analyze",
                         "--engine", "dask", str(self.trace_dir), "--json", str(out)],
                        stdout=subprocess.DEVNULL, stderr=err, check=False)
                if proc.returncode == 0 and out.is_file():
                    self.json = json.loads(out.read_text())
                else:
                    self.error = _failed("mpiscope analyze --engine dask", proc.returncode,
                                         log)
            if self.json is not None:  # after it: its wait files are there to read
                self._run_profiles()
        except (OSError, ValueError) as err:
            self.error = f"{type(err).__name__}: {err}".splitlines()[0]
        finally:
            self._done.set()

    def _run_profiles(self) -> None:
        """The profiles (COMPUTED), in a child process of their own (niced, as the
        analysis): one Parquet file per table."""
        try:
            self._kept_dir = tempfile.TemporaryDirectory(prefix="mpiscope-ooc-profiles-")
            tmp = self._kept_dir.name
            log = Path(tmp) / "log"
            with log.open("w") as err:
                proc = subprocess.run(
                    ["nice", "-n", str(NICE), sys.executable, "-m", "mpiscope_webui.ooctabs",
                     str(self.trace_dir), tmp],
                    stdout=subprocess.DEVNULL, stderr=err, check=False)
            if proc.returncode == 0:
                self.profiles = {name: pd.read_parquet(Path(tmp) / f"{name}.parquet")
                                 for name in [n for _t, n, _b in COMPUTED] + [MESSAGES]}
                self.breakdown = oocwindow.WindowBreakdown.open(Path(tmp) / BREAKDOWN)
                self.messages = oocwindow.WindowMessages.open(Path(tmp) / SENT)
                self.window_rows = oocprofiles.WindowRows.open(Path(tmp) / oocprofiles.DIR,
                                                               self.trace_dir)
            else:
                self.profiles_error = _failed("the profiles", proc.returncode, log)
        except (OSError, ValueError) as err:
            self.profiles_error = f"{type(err).__name__}: {err}".splitlines()[0]

    @property
    def done(self) -> bool:
        return self._done.is_set()


def _failed(what: str, code: int, log: Path) -> str:
    """One line: what exited how, and the last line it wrote."""
    lines = [x for x in log.read_text(errors="replace").splitlines() if x]
    return f"`{what}` exited {code}" + (f": {lines[-1]}" if lines else "")


def _frame(rows: list[dict], drop: tuple[str, ...] = ()) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    return df.drop(columns=[c for c in drop if c in df.columns])


def scope_of(p: Pyramid, view: View | None, scope: object, ranks: object) -> Scope:
    """What the tabs are about, as windowstats.Scope.of in memory: the visible window (the
    whole run when zoomed out all the way or asked for), the ranks chosen (none: the
    ranks the timeline shows, all unless its lanes are chosen)."""
    chosen = None
    if isinstance(ranks, list) and ranks:
        ok = [inputs.integer(r, 0, p.num_ranks) for r in ranks[:windowstats.MAX_RANK_CHOICES]]
        chosen = tuple(sorted({r for r in ok if r is not None})) or None
    if view is None:
        return Scope(None, chosen)
    if chosen is None and view.ranks:
        chosen = tuple(sorted({int(r) for r in view.ranks}))
    a, b = int(round(view.t0 * 1e9)), int(round(view.t1 * 1e9))
    if scope == RUN or (a <= p.origin and b >= p.origin + p.span - 2):
        return Scope(None, chosen)
    return Scope((a, b), chosen)


def follows(name: str, scope: Scope) -> bool:
    """Whether tab `name` shows `scope` itself (else the whole run's JSON)."""
    if scope.window is None and scope.ranks is None:
        return True
    return name == "functions" or (name == "breakdown" and scope.window is None)


def tab_key(name: str, scope: Scope) -> str:
    """What tab `name` shows of `scope`: the same key, the same contents."""
    whole = scope.window is None and scope.ranks is None
    # the breakdown's rows are the ranks chosen, of the window; the profiles (with their
    # messages per communicator and tag) and the call tree those of the window and ranks,
    # as the messages of a window or a rank set
    if name in ("functions", "breakdown", "profiles", "calltree") or (
            name == "messages" and not whole):
        return scope.key()
    return str(whole)  # its note or none


def _where(scope: Scope) -> str:
    if scope.window is None:
        return "the whole run"
    a, b = scope.window
    return f"the window {a / 1e9:.6f} – {b / 1e9:.6f} s ({windowstats._dur((b - a) / 1e9)})"


RUN_NS = (oocwindow.EVER, 2**62)  # a window holding the whole run (a rank set's)


def _ranks_text(ranks: tuple[int, ...] | None) -> str:
    if ranks is None:
        return "all ranks"
    return ("rank " + ", ".join(str(r) for r in ranks[:12])
            + (f" and {len(ranks) - 12} more" if len(ranks) > 12 else ""))


def window_tab(p: Pyramid, scope: Scope, window_of: WindowOf) -> list:
    """The Functions tab of a window and rank set (the whole run for a rank set): calls and
    time per function, then per process, out of core (oocwindow)."""
    a, b = scope.window or (p.origin, p.origin + p.span)
    text = (f"Statistics of {_where(scope)}, {_ranks_text(scope.ranks)}. A call counts if "
            "it overlaps the window; its time is the part inside it (out of core: the "
            "timeline pyramid's whole columns and the detail at the window's two edges). "
            "Min/median/max, waiting and bytes of a window need the trace in memory.")
    try:
        ws = window_of((a, b), scope.ranks)
        return [html.Div(text, className="muted scope-text"),
                windowstats.table(windowstats.functions_frame(ws.profile()),
                                  {"type": "otable", "name": "functions"}),
                html.H4("MPI functions per process"),
                windowstats.table(ws.profile(("rank", "function")),
                                  {"type": "otable", "name": "window-per-rank"})]
    except (OSError, ValueError, KeyError) as err:  # shown to the user, one line
        return [html.Div(text, className="muted scope-text"),
                html.Div(f"window statistics: {type(err).__name__}: {err}".splitlines()[0],
                         className="error")]


def breakdown_tab(results: Results, scope: Scope) -> list:
    """The Breakdown tab of a window and rank set, out of core (oocwindow.WindowBreakdown:
    each rank's measured calls, written by the analysis' per-rank pass)."""
    assert scope.window is not None and results.breakdown is not None
    a, b = scope.window
    text = (f"Statistics of the window {a / 1e9:.6f} – {b / 1e9:.6f} s "
            f"({windowstats._dur((b - a) / 1e9)}), {_ranks_text(scope.ranks)}. Each rank's "
            "measured interval cut to the window, its outermost MPI calls cut likewise; a "
            "call's waiting is at its start, as the timeline shades it (out of core: each "
            "rank's measured calls with their waiting part, found by binary search).")
    try:
        df = results.breakdown.frame(a, b, scope.ranks)
    except (OSError, ValueError) as err:  # shown to the user, one line
        return [html.Div(text, className="muted scope-text"),
                html.Div(f"window breakdown: {type(err).__name__}: {err}".splitlines()[0],
                         className="error")]
    return [html.Div(text, className="muted scope-text"),
            windowstats.table(df, {"type": "otable", "name": "breakdown"})]


def messages_panels(matrix: pd.DataFrame, sizes: pd.DataFrame, num_ranks: int) -> list:
    """The Messages tab's figures (their titles: the tables') and tables, as in memory
    (app.analysis_panel): the sender x receiver matrix, the message sizes (no protocol
    switch: the in-memory window's tab has none)."""
    a = Panels(pd.DataFrame(), pd.DataFrame(), sizes, matrix, [])
    return [dcc.Graph(figure=views.comm_matrix_figure(a, num_ranks)),
            windowstats.table(matrix, {"type": "otable", "name": "matrix"}),
            dcc.Graph(figure=views.message_size_figure(a)),
            windowstats.table(sizes, {"type": "otable", "name": "message-sizes"})]


def messages_tab(results: Results, scope: Scope, num_ranks: int) -> list:
    """The Messages tab of a window and rank set (the whole run for a rank set), out of
    core (oocwindow.WindowMessages: each rank's sent messages, written by the analysis'
    per-rank pass), the in-memory window's tables."""
    assert results.messages is not None
    text = (f"Statistics of {_where(scope)}, {_ranks_text(scope.ranks)}. A message "
            "counts if it is sent inside the window and its sender or receiver is among the "
            "ranks (out of core: each rank's sent messages by send time, one range read "
            "per rank).")
    try:
        got = results.messages.tables(*(scope.window or RUN_NS), scope.ranks, num_ranks)
    except (OSError, ValueError) as err:  # shown to the user, one line
        return [html.Div(text, className="muted scope-text"),
                html.Div(f"window messages: {type(err).__name__}: {err}".splitlines()[0],
                         className="error")]
    return [html.Div(text, className="muted scope-text"),
            *messages_panels(got.matrix, got.sizes, num_ranks)]


def tab(results: Results, name: str, scope: Scope | None = None, p: Pyramid | None = None,
        window_of: WindowOf | None = None) -> list:
    """The contents of one tab (a value of TABS) for `scope` (default: the whole run, all
    ranks); `p` and `window_of` (oocwindow.window_stats of p, kept) for the window's."""
    scope = scope or Scope(None, None)
    whole = scope.window is None and scope.ranks is None
    followed = _followed(results, name, scope)
    if followed is not None and followed.contents is not None:
        return followed.contents
    over = followed.line if followed is not None else ""  # above the rows read at most
    if name in NOT_HERE and name != "profiles":
        return [html.Div(over or NOT_HERE[name], className="muted ooc-note")]
    if name == "functions" and not whole and p is not None and window_of is not None:
        return window_tab(p, scope, window_of)
    if name == "breakdown" and scope.window is not None:
        if results.breakdown is not None:
            return breakdown_tab(results, scope)
        if not results.done:
            return [html.Div("Analysing out of core (Dask engine, rank by rank)… the "
                             "window's breakdown needs the wait states: it fills in when "
                             "the analysis is done.", className="muted ooc-running")]
    if name == "messages" and not whole:
        if results.messages is not None:
            return messages_tab(results, scope, _num_ranks(results, p))
        if not results.done:
            return [html.Div("Analysing out of core (Dask engine, rank by rank)… the "
                             "window's messages need each rank's sent messages: they fill "
                             "in when the analysis is done.", className="muted ooc-running")]
    if not results.done:
        return [html.Div("Analysing out of core (Dask engine, rank by rank)… the tab fills "
                         "in when it is done.", className="muted ooc-running")]
    if results.json is None:
        return [html.Div(f"analysis failed — {results.error}", className="error")]
    j = results.json
    kept = name == "breakdown" and scope.ranks is not None  # its rows: the ranks chosen
    out: list = [html.Div(SCOPE.format(ranks=_ranks_text(scope.ranks) if kept
                                       else "all ranks"), className="muted scope-text")]
    if not whole and not follows(name, scope) and name in NOT_IN_WINDOW:
        out.insert(0, html.Div(over or NOT_IN_WINDOW[name], className="muted ooc-note"))

    def table(rows: list[dict], ident: str, drop: tuple[str, ...] = ()):
        return windowstats.table(_frame(rows, drop), {"type": "otable", "name": ident})

    if name == "breakdown":
        chosen = set(scope.ranks or ())
        out += [table([r for r in j["ranks"] if not kept or r["rank"] in chosen],
                      "breakdown")]
    elif name == "functions":
        out += [table(j["functions"], "functions")]
    elif name == "messages":
        out += messages_panels(_frame(j["comm_matrix"]), _frame(j["message_sizes"]),
                               _num_ranks(results, p))
    elif name == "profiles":
        regions = _run_regions(results) if whole else oocprofiles.Followed([])
        out += [*([html.Div(regions.line, className="muted ooc-note")] if regions.line
                  else []),
                *_profiles(results, table(j["callsites"], "per-callsite", drop=("callpath",)),
                           None if whole else scope),
                html.H4("Wait states per rank"), table(j["wait_states_per_rank"], "waits"),
                html.H4("MPI time per thread"), table(j["threads"], "threads"),
                *(regions.contents or [])]
    elif name == "findings":
        found = j["findings"]
        out += views.run_notes(RunNotes.of_json(j))  # the page's header has no analysis
        out += [html.Ol([html.Li([html.B(f"{f['kind']}: "
                                         f"{where(f['function'], f['callsite'])}"),
                                  *views.oversubscribed_mark(f.get("oversubscribed")),
                                  html.Div(f["message"], className="finding-msg")])
                         for f in found], className="findings")
                if found else html.Div("No findings above the noise floor.",
                                       className="muted no-findings")]
    return out


def _num_ranks(results: Results, p: Pyramid | None) -> int:
    """The ranks of the matrix: the pyramid's, else those of the analysis."""
    if p is not None:
        return p.num_ranks
    return len(results.json["ranks"]) if results.json else 0


def _followed(results: Results, name: str, scope: Scope) -> oocprofiles.Followed | None:
    """The Profiles of a window or a rank set and the Call tree of any scope, from the
    rows the profiles' pass wrote (oocprofiles: the in-memory code on the window's rows),
    or the line why not (too many rows); None where the tab has none of its own."""
    rows = results.window_rows
    if rows is None or results.profiles is None:
        return None
    if name == "calltree":
        return oocprofiles.call_tree(rows, scope)
    if name != "profiles" or (scope.window is None and scope.ranks is None):
        return None
    threaded = bool((results.profiles["per-thread"]["thread"].to_numpy() != 0).any())
    return oocprofiles.profiles(rows, scope, threaded, _messages_profile(results, scope))


def _run_regions(results: Results) -> oocprofiles.Followed:
    """The whole run's user regions (the JSON has none) from each rank's rows, or why
    not in one line."""
    if results.window_rows is None:
        return oocprofiles.Followed(None, NOT_HERE["profiles"])
    return oocprofiles.run_regions(results.window_rows)


def _profiles(results: Results, per_callsite, scope: Scope | None = None) -> list:
    """The profiles in the in-memory tab's order, titles and formats (per thread only
    where a rank has more than one thread calling MPI; per call site: `per_callsite`),
    or why they are missing, in one line; the messages per communicator and tag of
    `scope` where given (a window or a rank set, as in memory), else the whole run's."""
    if results.profiles is None:
        return [html.Div(f"profiles failed — {results.profiles_error}", className="error"),
                html.H4("MPI functions per call site"), per_callsite]
    out: list = []
    for title, name, by in windowstats.PROFILES:
        if name == "per-callsite":
            out += [html.H4(f"MPI functions {title}"), per_callsite]
            continue
        df = results.profiles[name]
        if "thread" in by and not (df["thread"].to_numpy() != 0).any():
            continue  # one thread per rank: the same as per process
        out += [html.H4(f"MPI functions {title}"),
                windowstats.table(df, {"type": "otable", "name": name})]
    return out + [html.H4("Messages per communicator and tag"),
                  *_messages_profile(results, scope)]


def _messages_profile(results: Results, scope: Scope | None) -> list:
    """The messages per communicator and tag of `scope` (None: the whole run's, as the
    profiles' pass computed them; a window's: oocwindow.WindowMessages)."""
    ident = {"type": "otable", "name": MESSAGES}
    if scope is None or results.messages is None:
        assert results.profiles is not None
        return [windowstats.table(results.profiles[MESSAGES], ident)]
    text = MESSAGES_FOLLOW.format(where=_where(scope),
                                  ranks=_ranks_text(scope.ranks))
    try:
        df = results.messages.profile(*(scope.window or RUN_NS), scope.ranks)
    except (OSError, ValueError) as err:  # shown to the user, one line
        return [html.Div(text, className="muted scope-text"),
                html.Div(f"window messages: {type(err).__name__}: {err}".splitlines()[0],
                         className="error")]
    return [html.Div(text, className="muted scope-text"), windowstats.table(df, ident)]


def main(argv: list[str] | None = None) -> int:
    """`python -m mpiscope_webui.ooctabs TRACE_DIR OUT_DIR`: the profiles (COMPUTED and
    MESSAGES) of the trace, OUT_DIR/<table name>.parquet each, each rank's measured
    calls for a window's breakdown, OUT_DIR/breakdown/, each rank's sent messages for a
    window's messages, OUT_DIR/sent/, and each rank's calls and user regions for a
    window's profiles, OUT_DIR/window-rows/ (Results runs it)."""
    from mpiscope.engines import rankprofile

    ap = argparse.ArgumentParser(prog="python -m mpiscope_webui.ooctabs")
    ap.add_argument("trace_dir", type=Path)
    ap.add_argument("out_dir", type=Path)
    args = ap.parse_args(argv)
    bd = args.out_dir / BREAKDOWN
    bd.mkdir()
    (args.out_dir / SENT).mkdir()
    sent = oocwindow.MessagesWriter(args.out_dir / SENT)
    rows = oocprofiles.Writer(args.out_dir / oocprofiles.DIR)
    meta: list[dict] = []

    def each(rank: int, ix: WindowIndex) -> None:  # what a window reads of each rank
        meta.append(oocwindow.write_breakdown(bd, rank, ix))
        sent.rank(rank, ix)
        rows.add(rank, ix)

    try:
        got = rankprofile.from_cache(
            args.trace_dir, [*(by for _t, _n, by in COMPUTED), rankprofile.MESSAGES],
            each=each)
    except UserError as err:
        print(err.one_line(), file=sys.stderr)  # the line the tab shows
        return 1
    (bd / oocwindow.BREAKDOWN_META).write_text(json.dumps(meta))
    sent.close()
    rows.finish()
    for _title, name, by in COMPUTED:
        got[by].to_parquet(args.out_dir / f"{name}.parquet", index=False)
    got[rankprofile.MESSAGES].to_parquet(args.out_dir / f"{MESSAGES}.parquet", index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
