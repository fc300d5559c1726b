"""The Profiles tab of the visible window and rank set out of core (and its user regions
and call tree): the window's own rows read from disk, then the in-memory code.

Vampir and Cube recompute a window's profiles from its calls; min/median/max, waiting,
bytes, call paths and user regions need every call of the window, which the timeline
pyramid does not keep. So each rank's calls and user regions are written once, by the
profiles' per-rank pass (ooctabs' child: `write`, beside oocwindow.write_breakdown), as
that rank's window index holds them (mpiscope.analysis.window.WindowIndex.of on the
rank's slice with its wait states): sorted by start, one record per call (end, keys,
waiting, bytes, per-call time, ...), the starts in a file of their own. A window's rows
are then found by two binary searches per rank in the memory-mapped starts (calls longer
than the rank's look-back bound are listed aside, as in memory), read as one contiguous
range of records, and put together into a WindowIndex of these rows alone (codes made
common to the ranks, call sites relabelled by their call paths as the session does);
its Window computes every table with the in-memory code: equal by construction.

The count of a window's rows is known before reading any (the binary searches): a window
of more than `bound()` rows (calls and user regions, over the ranks chosen; default
BOUND, the environment's MPISCOPE_OOC_PROFILE_ROWS) is not read; the tab says so in one
line and shows the whole run's profiles. What the rows do not hold: messages (the
window's messages per communicator and tag come from oocwindow.WindowMessages, passed in).
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from dash import ALL, MATCH, Dash, Input, Output, State, html
from dash.exceptions import PreventUpdate

from mpiscope.analysis import callpaths
from mpiscope.analysis.window import (  # its sorting and grouping, reused on the rows read
    Window,
    WindowIndex,
    _atoms_of,
    _Calls,
)
from mpiscope_webui import calltreeview, inputs, windowstats
from mpiscope_webui.windowstats import Scope

ENV = "MPISCOPE_OOC_PROFILE_ROWS"
BOUND = 2_000_000  # rows a window's profiles read at most (~100 B each: 200 MB)
DIR = "window-rows"  # the child's directory of `write`'s files
META = "ranks.json"
FREE_SHARE = 0.1  # the rows are written only while the disk keeps this share of it free:
# they are ~100 B per call, and a full disk would fail the whole profiles' pass
KEPT = 2  # windows kept (Profiles and Call tree ask for the same one): ~BOUND rows each
# one record per call, as the rank's WindowIndex holds it (its start: a file of its own,
# contiguous, for the binary searches)
CALL = np.dtype([("end", np.int64), ("is_long", np.bool_), ("thread", np.int32),
                 ("fcode", np.int32), ("scode", np.int32), ("comm", np.int32),
                 ("tag", np.int32), ("callpath", np.int32), ("n", np.int64),
                 ("per_call", np.float64), ("nbytes", np.int64), ("wait", np.int64),
                 ("wkind", np.int8), ("measured", np.bool_), ("sync", np.int64),
                 ("io", np.bool_), ("mpi_parent", np.int64)])
REGION = np.dtype([("end", np.int64), ("is_long", np.bool_), ("fcode", np.int32),
                   ("parent", np.int64)])


def bound() -> int:
    """The most rows a window's profiles read (MPISCOPE_OOC_PROFILE_ROWS, else BOUND)."""
    try:
        return max(int(os.environ.get(ENV, BOUND)), 0)
    except ValueError:
        return BOUND


def write(out_dir: Path, rank: int, ix: WindowIndex) -> dict:
    """Write one rank's calls and user regions (`out_dir/rank=R.*.npy`) from the rank's
    window index (of its slice: every call and region is the rank's); returns what META
    keeps of the rank."""
    if (ix.rank != rank).any() or (ix.r_rank != rank).any():
        raise ValueError(f"rank {rank}: the window index holds other ranks' calls")
    c = ix.calls
    rec = np.zeros(len(c.start), CALL)
    for name, values in (("end", c.end), ("is_long", c.is_long), ("thread", ix.thread),
                         ("fcode", ix.fcode), ("scode", ix.scode), ("comm", ix.comm),
                         ("tag", ix.tag), ("callpath", ix.callpath), ("n", ix.n),
                         ("per_call", ix.per_call), ("nbytes", ix.nbytes),
                         ("wait", ix.wait), ("wkind", ix.wkind), ("measured", ix.measured),
                         ("sync", ix.sync), ("io", ix.io), ("mpi_parent", ix.mpi_parent)):
        rec[name] = values
    reg = np.zeros(len(ix.regions.start), REGION)
    for name, values in (("end", ix.regions.end), ("is_long", ix.regions.is_long),
                         ("fcode", ix.r_fcode), ("parent", ix.r_parent)):
        reg[name] = values
    for suffix, a in (("start", c.start), ("calls", rec), ("rstart", ix.regions.start),
                      ("regions", reg)):
        np.save(out_dir / f"rank={rank}.{suffix}.npy", np.ascontiguousarray(a))
    used = np.unique(ix.callpath)
    return {"rank": int(rank), "functions": ix.functions, "callsites": ix.callsites,
            "regions": ix.r_names, "lookback": int(c.lookback),
            "r_lookback": int(ix.regions.lookback), "num_ranks": int(ix.num_ranks),
            "span": [int(x) for x in ix.span], "comms": {str(k): v for k, v in
                                                       ix.comm_names.items()},
            "iv": [int(ix.iv_begin[rank]), int(ix.iv_end[rank])],
            "host": ix.hosts.get(rank, "?"), "paths": [int(p) for p in used if p >= 0]}


@dataclass
class Writer:
    """Writes each rank's rows (`write`) into `path` while the disk keeps FREE_SHARE of it
    free; else (or on a write error) none: those written are removed and META says why
    (the tabs then show the whole run's), the rest of the profiles' pass goes on."""

    path: Path
    ranks: list[dict] = field(default_factory=list)
    unavailable: str = ""  # why no rows were written

    def __post_init__(self) -> None:
        self.path.mkdir()

    def add(self, rank: int, ix: WindowIndex) -> None:
        if self.unavailable:
            return
        need = (len(ix.calls.start) * (CALL.itemsize + 8)
                + len(ix.regions.start) * (REGION.itemsize + 8))
        disk = shutil.disk_usage(self.path)
        if disk.free - need < FREE_SHARE * disk.total:
            self._give_up(f"each rank's calls would fill the disk ({disk.free / 1e9:.1f} GB "
                          f"free, rank {rank}'s need {need / 1e9:.2f} GB)")
            return
        try:
            self.ranks.append(write(self.path, rank, ix))
        except OSError as err:
            self._give_up(f"writing each rank's calls failed: {err}".splitlines()[0])

    def _give_up(self, why: str) -> None:
        for f in self.path.glob("rank=*"):
            f.unlink()
        self.ranks, self.unavailable = [], why

    def finish(self) -> None:
        (self.path / META).write_text(json.dumps({"ranks": self.ranks,
                                                  "unavailable": self.unavailable}))


@dataclass
class _Rank:
    """One rank's files, memory-mapped: its calls and regions as _Calls (for the binary
    searches of the in-memory window) beside their records."""

    meta: dict
    calls: _Calls
    rec: np.ndarray
    regions: _Calls
    reg: np.ndarray

    @classmethod
    def open(cls, path: Path, meta: dict) -> _Rank:
        r = meta["rank"]

        def load(suffix: str) -> np.ndarray:
            return np.load(path / f"rank={r}.{suffix}.npy", mmap_mode="r")

        def sorted_calls(start: np.ndarray, rows: np.ndarray, lookback: int) -> _Calls:
            is_long = rows["is_long"]
            return _Calls(start, rows["end"], np.empty(0, np.int64), is_long,
                          np.flatnonzero(is_long), lookback)

        rec, reg = load("calls"), load("regions")
        return cls(meta, sorted_calls(load("start"), rec, meta["lookback"]), rec,
                   sorted_calls(load("rstart"), reg, meta["r_lookback"]), reg)

    def rows(self, t0: int, t1: int) -> int:
        """The calls and regions overlapping [t0, t1), counted without reading them."""
        return _count(self.calls, t0, t1) + _count(self.regions, t0, t1)


def _count(c: _Calls, t0: int, t1: int) -> int:
    """How many of `c` overlap [t0, t1) (as c.overlapping finds them): those starting in
    it (two binary searches), those of the look-back before it still running at t0, and
    the long ones begun earlier still running (few by construction)."""
    a = int(np.searchsorted(c.start, t0 - c.lookback, side="left"))
    a0 = int(np.searchsorted(c.start, t0, side="left"))
    b = max(int(np.searchsorted(c.start, t1, side="left")), a0)
    running = int(((c.end[a:a0] > t0) & ~c.is_long[a:a0]).sum())
    ls, le = c.start[c.long], c.end[c.long]
    return (b - a0) + running + int(((ls < t0) & (le > t0)).sum())


@dataclass
class _Read:
    """One rank's rows of a window: its calls and regions overlapping it (positions
    sorted), their starts and records."""

    rank: int
    meta: dict
    start: np.ndarray
    rec: np.ndarray
    rstart: np.ndarray
    reg: np.ndarray
    rpos: np.ndarray  # the regions' positions in the rank's files (sorted)


@dataclass
class WindowRows:
    """The per-rank files of `write`, opened (memory-mapped on first use)."""

    path: Path
    trace_dir: Path
    ranks: dict[int, dict]
    unavailable: str = ""  # why the pass wrote no rows (Writer)
    _open: dict[int, _Rank] = field(default_factory=dict)
    _paths: callpaths.CallPaths | None = None
    _kept: OrderedDict = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def open(cls, path: Path, trace_dir: Path) -> WindowRows:
        meta = json.loads((path / META).read_text())
        return cls(path, trace_dir, {int(m["rank"]): m for m in meta["ranks"]},
                   meta["unavailable"])

    def _rank(self, r: int) -> _Rank:
        got = self._open.get(r)
        if got is None:
            got = self._open[r] = _Rank.open(self.path, self.ranks[r])
        return got

    def span(self) -> tuple[int, int]:
        """The trace's span as the in-memory index has it (every rank's slice holds every
        rank's first and last event: the same span)."""
        spans = [m["span"] for m in self.ranks.values()]
        return min(s[0] for s in spans), max(s[1] for s in spans)

    def _bounds(self, t0: int | None, t1: int | None) -> tuple[int, int]:
        """[t0, t1) (None: the run's ends), as asked."""
        lo, hi = self.span()
        return (lo if t0 is None else int(t0)), (hi + 1 if t1 is None else int(t1))

    def _read_range(self, t0: int, t1: int) -> tuple[int, int]:
        """What to read for [t0, t1): it, up to the run's start if the window is before
        it (WindowIndex.query moves such a window there)."""
        lo, _hi = self.span()
        a, b = sorted((t0, t1))
        return a, max(b, a + 1, lo + 1)

    def _chosen(self, ranks: Sequence[int] | None) -> list[int]:
        return sorted(self.ranks if ranks is None
                      else {int(r) for r in ranks if int(r) in self.ranks})

    def rows(self, t0: int | None, t1: int | None, ranks: Sequence[int] | None) -> int:
        """The rows a window ([t0, t1), None: the run's ends) of `ranks` (None: all) reads,
        found without reading any."""
        a, b = self._read_range(*self._bounds(t0, t1))
        return sum(self._rank(r).rows(a, b) for r in self._chosen(ranks))

    def paths(self) -> callpaths.CallPaths:
        """The trace's call paths as the session has them (CallPaths.of the whole trace:
        the paths every rank's calls use), from the Parquet cache's small table."""
        if self._paths is None:
            from mpiscope.engines.daskcache import open_cache

            t = open_cache(self.trace_dir)
            if t is None:
                raise ValueError("no current Parquet cache of this trace")
            used = sorted({p for m in self.ranks.values() for p in m["paths"]})
            self._paths = callpaths.CallPaths.of(
                SimpleNamespace(callpaths=t.small("callpaths")),  # type: ignore[arg-type]
                used=used)
        return self._paths

    def window(self, t0: int | None, t1: int | None,
               ranks: Sequence[int] | None = None) -> Window:
        """The in-memory Window of [t0, t1) (trace time; None: the run's ends) and `ranks`
        (None: all), from the index of the window's rows alone."""
        a, b = self._bounds(t0, t1)
        key = (a, b, None if ranks is None else tuple(self._chosen(ranks)))
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
        reads = [self._read(r, *self._read_range(a, b)) for r in self._chosen(ranks)]
        w = _index(reads, self, self.paths()).query(a, b, ranks)
        with self._lock:
            self._kept[key] = w
            while len(self._kept) > KEPT:
                self._kept.popitem(last=False)
        return w

    def _read(self, r: int, t0: int, t1: int) -> _Read:
        k = self._rank(r)
        pos = np.sort(k.calls.overlapping(t0, t1))
        rpos = np.sort(k.regions.overlapping(t0, t1))
        # contiguous ranges but for the long ones: fancy indexing reads those pages
        return _Read(r, k.meta, np.asarray(k.calls.start[pos]), np.asarray(k.rec[pos]),
                     np.asarray(k.regions.start[rpos]), np.asarray(k.reg[rpos]), rpos)


def _common(labels: list[list[str]]) -> tuple[list[str], list[np.ndarray]]:
    """Labels common to the ranks (in order of first use) and each rank's code lookup."""
    index: dict[str, int] = {}
    luts = []
    for ls in labels:
        luts.append(np.array([index.setdefault(x, len(index)) for x in ls] or [0],
                             np.int32))
    return list(index), luts


def _index(reads: list[_Read], rows: WindowRows, paths: callpaths.CallPaths
           ) -> WindowIndex:
    """A WindowIndex of the rows read (sorted and grouped as WindowIndex.of does), on the
    trace's span and ranks: a query of the window gives the in-memory window's tables."""
    metas = list(rows.ranks.values())
    functions, f_luts = _common([x.meta["functions"] for x in reads])
    sites, s_luts = _common([x.meta["callsites"] for x in reads])
    names, r_luts = _common([x.meta["regions"] for x in reads])

    def cat(f: Callable[[int, _Read], np.ndarray], dtype) -> np.ndarray:
        parts = [np.asarray(f(i, x), dtype) for i, x in enumerate(reads)]
        return np.concatenate(parts) if parts else np.empty(0, dtype)

    # regions: their parents (positions in a rank's files) as positions among those read
    r_off = np.cumsum([0] + [len(x.rpos) for x in reads])

    def parents(i: int, x: _Read, of: np.ndarray) -> np.ndarray:
        if not len(x.rpos):  # none read: none is a parent here
            return np.full(len(of), -1, np.int64)
        j = np.searchsorted(x.rpos, of)
        hit = (of >= 0) & (j < len(x.rpos)) & (x.rpos[np.minimum(j, len(x.rpos) - 1)] == of)
        return np.where(hit, j + r_off[i], -1)

    rank = cat(lambda _i, x: np.full(len(x.start), x.rank), np.int32)
    packed = np.concatenate([x.rec for x in reads]) if reads else np.empty(0, CALL)
    start = cat(lambda _i, x: x.start, np.int64)
    lo, hi = rows.span()
    calls, order = _Calls.of(start, packed["end"], hi - lo)
    rank = rank[order]
    # whole records put in order at once, then each field made contiguous
    packed = packed[order]
    rec = {k: np.ascontiguousarray(packed[k]) for k in CALL.names}
    del packed
    fcode = cat(lambda i, x: f_luts[i][x.rec["fcode"]], np.int32)[order]
    scode = cat(lambda i, x: s_luts[i][x.rec["scode"]], np.int32)[order]
    # the session's call sites: relabelled by their call paths
    sites, scode = callpaths.relabelled(sites, scode, rec["callpath"], paths)
    # user regions
    r_start = cat(lambda _i, x: x.rstart, np.int64)
    r_end = cat(lambda _i, x: x.reg["end"], np.int64)
    regions, rorder = _Calls.of(r_start, r_end, hi - lo)
    moved = np.empty(len(rorder), np.int64)  # a region read -> its position once sorted
    moved[rorder] = np.arange(len(rorder))

    def to_sorted(p: np.ndarray) -> np.ndarray:
        return np.where(p >= 0, moved[np.maximum(p, 0)] if len(moved) else -1, -1)

    r_parent = to_sorted(cat(lambda i, x: parents(i, x, x.reg["parent"]), np.int64)[rorder])
    mpi_parent = to_sorted(cat(lambda i, x: parents(i, x, x.rec["mpi_parent"]),
                               np.int64)[order])
    nr = int(max(m["num_ranks"] for m in metas))
    iv_b, iv_e = np.zeros(nr, np.int64), np.zeros(nr, np.int64)
    for m in metas:
        iv_b[m["rank"]], iv_e[m["rank"]] = m["iv"]
    comms = {int(k): v for m in metas for k, v in m["comms"].items()}
    e64, e32 = np.empty(0, np.int64), np.empty(0, np.int32)
    return WindowIndex(
        nr, {m["rank"]: m["host"] for m in metas}, functions, sites, comms, calls, rank,
        rec["thread"], fcode, scode, rec["comm"], rec["tag"], rec["callpath"], rec["n"],
        rec["per_call"], rec["nbytes"], rec["wait"], rec["wkind"], rec["measured"],
        rec["sync"], rec["io"], mpi_parent, iv_b, iv_e, (lo, hi),
        regions, cat(lambda _i, x: np.full(len(x.rstart), x.rank), np.int32)[rorder],
        cat(lambda i, x: r_luts[i][x.reg["fcode"]], np.int32)[rorder], names, r_parent,
        # no messages: the window's messages are not among the rows
        e64, e32, e32, e64, e64, e32, e32,
        *_atoms_of({"rank": rank, "thread": rec["thread"], "function": fcode,
                    "callsite": scode, "comm": rec["comm"], "tag": rec["tag"],
                    "callpath": rec["callpath"]}, rec["per_call"]))


# -- the tabs ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Followed:
    """A tab of the scope (`contents`), or why it shows the whole run's (`line`)."""

    contents: list | None
    line: str = ""


def _window(rows: WindowRows, scope: Scope) -> tuple[Window | None, str]:
    """The scope's window, or None and the line saying why not (above the bound)."""
    if rows.unavailable:
        return None, f"Profiles of a window are not available out of core: {rows.unavailable}."
    window = scope.window or (None, None)
    n, most = rows.rows(*window, scope.ranks), bound()
    if n > most:
        what = "window" if scope.window is not None else "run"
        return None, (f"The {what} holds {n:,} MPI calls and user regions on "
                      f"{_ranks(scope)}, more than the {most:,} whose profiles are "
                      "computed out of core: zoom in (or choose fewer ranks) for its "
                      f"profiles ({ENV}).")
    return rows.window(*window, scope.ranks), ""


def _ranks(scope: Scope) -> str:
    return "all ranks" if scope.ranks is None else f"{len(scope.ranks)} rank(s)"


def _failed(what: str, err: Exception) -> list:
    return [html.Div(f"{what}: {type(err).__name__}: {err}".splitlines()[0],
                     className="error")]


def profiles(rows: WindowRows, scope: Scope, threaded: bool, messages: list) -> Followed:
    """The Profiles tab of the scope as in memory (windowstats.profile_tables of the
    window's rows; `messages`: the scope's messages per communicator and tag, which are
    not among the rows: ooctabs reads them from oocwindow.WindowMessages), or the line
    why not."""
    try:
        w, line = _window(rows, scope)
        if w is None:
            return Followed(None, line)
        text = (f"{scope.text()} Out of core: its {len(w.index.rank):,} calls and "
                f"{len(w.index.r_rank):,} user regions, read from each rank's files.")
        return Followed([html.Div(text, className="muted scope-text"),
                         *windowstats.profile_tables(
                             w, threaded, lambda name: {"type": "otable", "name": name},
                             messages)])
    except (OSError, ValueError, KeyError) as err:  # shown to the user, one line
        return Followed(_failed("window profiles", err))


def run_regions(rows: WindowRows) -> Followed:
    """The whole run's user regions of all ranks (the rest of that Profiles tab is the
    Dask engine's JSON, which has none) from each rank's rows, or the line why not."""
    try:
        w, line = _window(rows, Scope(None, None))
        if w is None:
            return Followed(None, line)
        return Followed(windowstats.region_tables(
            w, lambda name: {"type": "otable", "name": name}))
    except (OSError, ValueError, KeyError) as err:  # shown to the user, one line
        return Followed(_failed("user regions", err))


def call_tree(rows: WindowRows, scope: Scope) -> Followed:
    """The Call tree tab of the scope as in memory (calltreeview's panes; its metric and
    node chosen through `register`'s callback), or the line why not."""
    try:
        w, line = _window(rows, scope)
        if w is None:
            return Followed(None, line)
        paths = rows.paths()
        first = calltreeview.tree_body(w.call_tree(paths), calltreeview.DEFAULT, None, 0)
        return Followed(calltreeview.panes(
            scope, paths, f"{scope.text()} Out of core: its calls read from each rank's "
            "files.", first, 0))
    except (OSError, ValueError, KeyError) as err:  # shown to the user, one line
        return Followed(_failed("call tree", err))


def redrawn_tree(rows: WindowRows, metric: object, clicks: object, state: object
                 ) -> tuple[list, dict]:
    """The call tree's body for a metric or node chosen (calltreeview.choice: checked) and
    the tab's Store with the node kept, the scope from that Store (checked likewise)."""
    metric, selected = calltreeview.choice(metric, clicks, state)
    assert isinstance(state, dict)  # choice() refuses anything else
    scope = Scope(calltreeview.stored_window(state, rows.span()), _stored_ranks(rows, state))
    try:
        w, line = _window(rows, scope)
        if w is None:
            return [html.Div(line, className="muted ooc-note")], state
        tree = w.call_tree(rows.paths())
    except (OSError, ValueError, KeyError) as err:  # shown to the user, one line
        return _failed("call tree", err), state
    return (calltreeview.tree_body(tree, metric, selected, 0), {**state, "node": selected})


def _stored_ranks(rows: WindowRows, state: dict) -> tuple[int, ...] | None:
    ranks = state.get("ranks")
    if not isinstance(ranks, list) or not ranks:
        return None
    nr = max(int(m["num_ranks"]) for m in rows.ranks.values()) if rows.ranks else 0
    ok = [inputs.integer(r, 0, nr) for r in ranks[:windowstats.MAX_RANK_CHOICES]]
    return tuple(sorted({r for r in ok if r is not None})) or None


def register(app: Dash, rows_of: Callable[[], WindowRows | None]) -> None:
    """The out-of-core Call tree's redraw when a metric or a node is chosen (as
    calltreeview.register's in memory); `rows_of()`: the rows, once written."""

    @app.callback(Output({"type": "ct-body", "panel": MATCH}, "children"),
                  Output({"type": "ct-scope", "panel": MATCH}, "data"),
                  Input({"type": "ct-metric", "panel": MATCH}, "value"),
                  Input({"type": "ct-node", "panel": MATCH, "node": ALL}, "n_clicks"),
                  State({"type": "ct-scope", "panel": MATCH}, "data"),
                  prevent_initial_call=True)
    def redraw(metric, clicks, state):
        rows = rows_of()
        if rows is None:
            raise PreventUpdate
        return redrawn_tree(rows, metric, clicks, state)
