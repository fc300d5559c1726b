"""Statistics of the visible window out of core, never loading the trace: the MPI
function profile (calls, time per function, in all and per rank) of a window and a rank
set, from the timeline pyramid and its detail (mpiscope_webui.pyramid); its per-rank
breakdown, from each rank's measured calls (WindowBreakdown, below); and its messages,
from each rank's sent messages (WindowMessages, below).

What a window counts is what the in-memory window counts (mpiscope.analysis.window): a
call is in the window [t0, t1) if it overlaps it (a call of no length: if it starts in
it); its `calls` are its MPI calls (a merged polling visit: its `polls`); its time is the
part inside the window. The two agree by construction:
- the window is cut at the edges of the columns of one pyramid level: the whole columns
  [E0, E1) inside it are read from the pyramid (per cell: ns inside the column, from the
  same prefix sums as the in-memory level of detail, and the calls starting in it);
- the two partial pieces [t0, E0) and [E1, t1) come from the detail (a range read of the
  row groups that can hold them), clipped as the in-memory window clips calls: the left
  piece counts every call that starts before E0 and overlaps the window (those that
  started before the window included), the right one the calls that start in it;
- the level is the finest at which the window spans at most COLUMNS columns: a wide
  window costs O(COLUMNS) cells per rank and function, its edge pieces are each less than
  a column (1/COLUMNS of the window: few calls); a window narrower than a column of the
  finest level, or whose detail row groups are on every rank those its edge pieces read
  anyway, is read from the detail alone (a few row groups per rank, no cells).

The breakdown of a window is the in-memory window's (Window.breakdown): each rank's
measured interval cut to the window, its outermost main-thread MPI calls (not Init or
Finalize) cut likewise, their synchronization the waiting part at their start (a
barrier: all of it), their I/O the MPI-IO calls. The rank's calls do not overlap, so the
time of each kind inside [lo, hi) is F(hi) - F(lo), F(x) the time before x: a running sum
beside each call, sorted by start, in a memory-mapped file per rank (write_breakdown,
from the rank's window index with its wait states: the analysis' per-rank pass), found
by binary search — a few pages per rank and window, whatever its width.

The messages of a window are the in-memory window's (Window.message_rows): those sent
inside it (send time in [t0, t1)) whose sender or receiver is in the rank set. The same
per-rank pass writes each rank's sent messages sorted by send time (MessagesWriter: a
(7, messages) int64 file per rank, then a meta file by rename); a window is one range per
sender, found by two binary searches in its memory-mapped file, filtered by the rank set,
and its tables are mpiscope.analysis.window's own (comm_matrix, message_sizes,
message_groups) of those rows: equal by construction. Their medians and p90 need every
message of the window, so a window costs its messages (as in memory), MAX_MESSAGES at most.

What it cannot give (the pyramid has no per-call values): min/median/max, waiting and
bytes of a window's calls. The page says so beside the tables.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from mpiscope.analysis import breakdown, window
from mpiscope.analysis.window import MessageRows, WindowIndex, sort_profile
from mpiscope_webui.pyramid import Pyramid

COLUMNS = 256  # whole columns of a window at most (the level chosen to fit): an edge
# piece (under 1/COLUMNS of the window) stays within a row group or two of detail up to
# millions of calls per rank, and a row group is the unit read: finer columns would only
# add cells to read
PROFILE_COLUMNS = ["calls", "time_s", "mean_s"]  # of mpiscope.analysis.window's
EVER = -(2**62)  # count calls starting from then on: all


@dataclass(frozen=True)
class WindowStats:
    """The MPI calls of a window and rank set, per (rank, function): calls, ns inside the
    window; and how they were read."""

    t0: int  # ns, absolute (trace time)
    t1: int
    ranks: tuple[int, ...] | None  # None: all
    rank: np.ndarray
    fcode: np.ndarray
    calls: np.ndarray
    ns: np.ndarray
    functions: list[str]
    level: int | None  # the pyramid level of the whole columns (None: detail alone)
    columns: int  # whole columns read from the pyramid
    calls_read: int  # detail rows read for the edge pieces (whole row groups)
    edge_calls: int  # of which in the edge pieces

    def profile(self, by: Sequence[str] = ("function",)) -> pd.DataFrame:
        """As mpiscope.analysis.window.Window.profile for `("function",)` (the column
        `name`) or `("rank", "function")`, with the columns PROFILE_COLUMNS; largest time
        first."""
        by = tuple(by)
        if by == ("function",):
            key = self.fcode.astype(np.int64)
        elif by == ("rank", "function"):
            key = self.rank.astype(np.int64) * len(self.functions) + self.fcode
        else:
            raise ValueError("out of core a window's profile is by function or by "
                             "(rank, function)")
        uniq, inv = np.unique(key, return_inverse=True)
        ng = len(uniq)
        calls = np.bincount(inv, weights=self.calls, minlength=ng).astype(np.int64)
        ns = np.bincount(inv, weights=self.ns, minlength=ng)
        out: dict[str, object] = {}
        if by == ("function",):
            out["name"] = [self.functions[int(i)] for i in uniq]
        else:
            out["rank"] = uniq // len(self.functions)
            out["function"] = [self.functions[int(i)] for i in uniq % len(self.functions)]
        df = pd.DataFrame({**out, "calls": calls, "time_s": ns / 1e9,
                           "mean_s": ns / np.maximum(calls, 1) / 1e9})
        # the in-memory window's rows: a group holds a call (none of no call)
        return sort_profile(df[df["calls"] > 0].reset_index(drop=True), by)


def _level(p: Pyramid, t0: int, t1: int) -> int:
    """The finest level at which [t0, t1) (relative ns) spans at most COLUMNS columns."""
    for k in range(p.levels - 1, -1, -1):
        if p.cols(k) * (t1 - t0) <= COLUMNS * p.span:
            return k
    return 0


def _pieces(p: Pyramid, rank: int, t0: int, t1: int, pieces: list[tuple[int, int, int]]
            ) -> tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray]], int]:
    """Per piece (a, b, count_from): (fcode, calls, ns) of one rank's calls overlapping
    [a, b) (absolute ns; a call of no length: starting in it) clipped to it, calls counted
    where they start at or after `count_from` and overlap the window [t0, t1); and the
    detail rows read (the row groups that can hold a piece, each read once)."""
    lo, hi = p._groups[rank]
    # a call of no length at `a` ends at `a`: >= (Pyramid.row_groups_of asks > a)
    groups = sorted({int(g) for a, b, _f in pieces
                     for g in np.flatnonzero((lo < b) & (hi >= a))})
    if not groups:
        e = np.empty(0, np.int64)
        return [(e, e, e) for _ in pieces], 0
    t = pa.concat_tables(p._detail_groups(rank, groups))
    s, e = t["start"].to_numpy(), t["end"].to_numpy()  # end >= start (pyramid.build)
    fcode = t["fcode"].to_numpy().astype(np.int64)
    polls = (t["polls"].to_numpy().astype(np.int64) if "polls" in t.column_names
             else np.ones(len(s), np.int64))
    out = []
    for a, b, count_from in pieces:
        here = (s < b) & ((e > a) | (s >= a))
        sh, eh = s[here], e[here]
        ns = np.maximum(np.minimum(eh, b) - np.maximum(sh, a), 0)
        counted = (sh >= count_from) & (sh < t1) & ((eh > t0) | (sh >= t0))
        out.append((fcode[here], np.where(counted, polls[here], 0), ns))
    return out, t.num_rows


def _edges_hold_it(p: Pyramid, ranks: list[int], t0: int, t1: int, e0: int, e1: int
                   ) -> bool:
    """Whether, on every rank, the detail row groups that can hold [t0, t1) are those its
    edge pieces [t0, e0) and [e1, t1) read anyway: then the detail alone answers, reading
    no more (a narrow window: no pyramid cells read)."""
    for r in ranks:
        lo, hi = p._groups[r]
        window = (lo < t1) & (hi >= t0)
        edges = ((lo < e0) & (hi >= t0)) | ((lo < t1) & (hi >= e1) & (t1 > e1))
        if (window & ~edges).any():
            return False
    return True


def window_stats(p: Pyramid, t0: int, t1: int,
                 ranks: Sequence[int] | None = None) -> WindowStats:
    """The MPI calls of [t0, t1) (absolute ns) on `ranks` (None: all)."""
    t0, t1 = sorted((int(t0), int(t1)))
    t1 = max(t1, t0 + 1)
    chosen = None if ranks is None else tuple(sorted({int(r) for r in ranks}))
    wanted = [r for r in p.ranks if chosen is None or r in chosen]
    rel0, rel1 = t0 - p.origin, t1 - p.origin
    level = _level(p, rel0, rel1)
    edges = p.edges(level)
    c0 = int(np.searchsorted(edges, rel0, side="left"))  # first column starting in it
    c1 = int(np.searchsorted(edges, rel1, side="right")) - 1  # last edge inside it
    parts_r: list[np.ndarray] = []
    parts_f: list[np.ndarray] = []
    parts_c: list[np.ndarray] = []
    parts_n: list[np.ndarray] = []
    e0, e1 = int(edges[min(c0, len(edges) - 1)]) + p.origin, int(edges[max(c1, 0)]) + p.origin
    if c1 > c0 and not _edges_hold_it(p, wanted, t0, t1, e0, e1):
        # whole columns [E0, E1): the pyramid
        stream, _col, fcode, ns, calls = p.cells(level, c0, c1)
        rank = p.streams.rank[stream.astype(np.int64)]
        keep = np.isin(rank, wanted)
        parts_r.append(rank[keep])
        parts_f.append(fcode[keep].astype(np.int64))
        parts_c.append(calls[keep].astype(np.int64))
        parts_n.append(ns[keep].astype(np.int64))
        # the left piece also when empty (the window on a column edge): the calls that
        # started before the window and overlap it are counted there
        pieces = [(t0, e0, EVER)] + ([(e1, t1, e1)] if t1 > e1 else [])
        columns = c1 - c0
    else:  # narrower than a column, or no more to read than its edges: the detail alone
        level, columns = None, 0
        pieces = [(t0, t1, EVER)]

    def one(r: int):
        return r, *_pieces(p, r, t0, t1, pieces)

    read = edge = 0
    with ThreadPoolExecutor(min(len(wanted), os.cpu_count() or 1) or 1) as pool:
        for r, got, rows in pool.map(one, wanted):
            read += rows
            for fcode, calls, ns in got:
                parts_r.append(np.full(len(fcode), r, np.int64))
                parts_f.append(fcode)
                parts_c.append(calls)
                parts_n.append(ns)
                edge += len(fcode)
    if not parts_r:
        parts_r = parts_f = parts_c = parts_n = [np.empty(0, np.int64)]
    return WindowStats(t0, t1, chosen, np.concatenate(parts_r), np.concatenate(parts_f),
                       np.concatenate(parts_c), np.concatenate(parts_n), list(p.functions),
                       level, columns, read, edge)


# -- the breakdown of a window ----------------------------------------------------------
# One rank's measured calls (breakdown.intervals' interval, outermost, main thread, not
# Init/Finalize: window.WindowIndex.measured), sorted by start, with running sums: a
# window's MPI, synchronization and I/O time on the rank is F(hi) - F(lo) of each, F(x)
# the time of those intervals before x, found by a binary search in the memory-mapped
# file (a few pages read per rank and window, whatever its width).
# the rows of a rank's (7, calls) int64 array: each contiguous, so that a binary search
# in `start` touches a few pages of the file, not the whole column
START, END, SYNC_END, IO, CUM_MPI, CUM_SYNC, CUM_IO = range(7)
BREAKDOWN_META = "ranks.json"


def write_breakdown(out_dir: Path, rank: int, ix: WindowIndex) -> dict:
    """Write one rank's measured calls (`out_dir/rank=R.npy`, rows START...) from the rank's
    window index (computed from its slice with its wait states: rankprofile); returns
    what BREAKDOWN_META keeps of the rank."""
    m = np.flatnonzero(ix.measured & (ix.rank == rank))
    s, e = ix.calls.start[m], ix.calls.end[m]
    sync_end = s + ix.sync[m]  # the waiting part at the call's start (a barrier: all)
    io = ix.io[m].astype(np.int64)
    a = np.zeros((7, len(m)), np.int64)
    a[START], a[END], a[SYNC_END], a[IO] = s, e, sync_end, io
    for row, length in ((CUM_MPI, e - s), (CUM_SYNC, sync_end - s), (CUM_IO, (e - s) * io)):
        a[row, 1:] = np.cumsum(length)[:-1]
    np.save(out_dir / f"rank={rank}.npy", a)
    # F needs intervals that do not overlap (a thread's outermost calls); a damaged
    # trace's may: its windows' breakdown is then not offered for that rank
    ok = bool((s[1:] >= np.maximum(e, sync_end)[:-1]).all())
    return {"rank": int(rank), "begin": int(ix.iv_begin[rank]), "end": int(ix.iv_end[rank]),
            "host": ix.hosts.get(rank, "?"), "ok": ok}


@dataclass
class RankFiles:
    """A directory's per-rank arrays (`rank=N.npy`), memory-mapped on first use: a window
    touches a few pages of each."""

    path: Path
    _arrays: dict[int, np.ndarray] = field(default_factory=dict)

    def __call__(self, rank: int) -> np.ndarray:
        a = self._arrays.get(rank)
        if a is None:
            a = np.load(self.path / f"rank={rank}.npy", mmap_mode="r")
            self._arrays[rank] = a
        return a


@dataclass
class WindowBreakdown:
    """The per-rank files of write_breakdown, opened (memory-mapped on first use)."""

    path: Path
    ranks: dict[int, dict]
    _array: RankFiles

    @classmethod
    def open(cls, path: Path) -> WindowBreakdown:
        meta = json.loads((path / BREAKDOWN_META).read_text())
        return cls(path, {int(m["rank"]): m for m in meta}, RankFiles(path))

    def frame(self, t0: int, t1: int, ranks: Sequence[int] | None = None) -> pd.DataFrame:
        """The breakdown of [t0, t1) (absolute ns) per rank (breakdown.ranks_frame's
        columns; mpiscope.analysis.window.Window.breakdown's values), for `ranks` (None:
        all); ValueError naming a rank whose calls overlap (no window breakdown)."""
        t0, t1 = sorted((int(t0), int(t1)))
        chosen = sorted(self.ranks if ranks is None
                        else {int(r) for r in ranks if int(r) in self.ranks})
        bad = [r for r in chosen if not self.ranks[r]["ok"]]
        if bad:
            raise ValueError(f"rank {bad[0]}'s outermost MPI calls overlap (a damaged "
                             "trace): its window breakdown needs the trace in memory")
        rows = []
        for r in chosen:
            m = self.ranks[r]
            lo = max(m["begin"], t0)
            hi = max(min(m["end"], t1), lo)
            a = self._array(r)
            upto_hi, upto_lo = _upto(a, hi), _upto(a, lo)
            rows.append((r, lo, hi, *(x - y for x, y in zip(upto_hi, upto_lo, strict=True))))
        sums = pd.DataFrame(rows, columns=["rank", "begin", "end", "mpi", "sync", "io"]
                            ).set_index("rank")
        return breakdown.ranks_frame(sums, {r: self.ranks[r]["host"] for r in chosen})


def _upto(a: np.ndarray, x: int) -> tuple[int, int, int]:
    """The rank's MPI ([start, end)), synchronization ([start, sync_end)) and I/O ([start,
    end) of I/O calls) time before x: the intervals starting earlier are all before the
    last of them (they do not overlap)."""
    i = int(np.searchsorted(a[START], x, side="left")) - 1
    if i < 0:
        return 0, 0, 0
    s, e, se, io = (int(a[k, i]) for k in (START, END, SYNC_END, IO))
    part = max(min(e, x) - s, 0)
    return (int(a[CUM_MPI, i]) + part, int(a[CUM_SYNC, i]) + max(min(se, x) - s, 0),
            int(a[CUM_IO, i]) + (part if io else 0))


# -- the messages of a window -----------------------------------------------------------
# One rank's sent messages by send time (the rank's window index: WindowIndex.of sorts
# them), a (7, messages) int64 array per rank: a window's messages on the rank are one
# range [searchsorted(t0), searchsorted(t1)) of it, read from the memory-mapped file.
TIME, SEND, RECV, BYTES, TRANSFER, COMM, TAG = range(7)
MESSAGES_META = "messages.json"
# messages read for one window at most (7 x 8 B each, then the tables' own copies): a
# window holding more says so (the whole run of all ranks is the analysis' JSON)
MAX_MESSAGES = 1 << 23


def write_messages(out_dir: Path, rank: int, m: MessageRows) -> int:
    """Write one rank's sent messages `m`, by send time (`out_dir/rank=R.npy`, rows
    TIME...); returns how many."""
    a = np.stack([m.time, m.send, m.recv, m.nbytes, m.transfer, m.comm, m.tag]
                 ).astype(np.int64) if len(m) else np.zeros((7, 0), np.int64)
    np.save(out_dir / f"rank={rank}.npy", a)
    return len(m)


@dataclass
class MessagesWriter:
    """The per-rank pass' side of WindowMessages: each rank's file, then the meta file
    (written last, by rename: a reader finds every rank's file or no meta)."""

    out_dir: Path
    counts: dict[int, int] = field(default_factory=dict)
    comm_names: dict[int, str] = field(default_factory=dict)

    def rank(self, rank: int, ix: WindowIndex) -> None:
        """From the rank's window index: its slice's messages, those it sent."""
        self.add(rank, ix.message_rows(), ix.comm_names)

    def add(self, rank: int, sent: MessageRows, comm_names: dict[int, str]) -> None:
        self.counts[int(rank)] = write_messages(self.out_dir, rank, sent)
        self.comm_names = comm_names  # the whole comms table, in every rank's slice

    def close(self) -> None:
        tmp = self.out_dir / (MESSAGES_META + ".tmp")
        tmp.write_text(json.dumps({
            "ranks": {str(r): n for r, n in sorted(self.counts.items())},
            "comm_names": {str(k): v for k, v in self.comm_names.items()}}))
        os.replace(tmp, self.out_dir / MESSAGES_META)


@dataclass(frozen=True)
class MessageTables:
    """A window's Messages tab (mpiscope.analysis.window's tables of its messages)."""

    matrix: pd.DataFrame  # Window.comm_matrix
    sizes: pd.DataFrame  # Window.message_sizes
    messages: int


@dataclass
class WindowMessages:
    """The per-rank files of MessagesWriter, opened (memory-mapped on first use)."""

    path: Path
    counts: dict[int, int]
    comm_names: dict[int, str]
    _array: RankFiles

    @classmethod
    def open(cls, path: Path) -> WindowMessages:
        meta = json.loads((path / MESSAGES_META).read_text())
        return cls(path, {int(r): int(n) for r, n in meta["ranks"].items()},
                   {int(k): str(v) for k, v in meta["comm_names"].items()}, RankFiles(path))

    def rows(self, t0: int, t1: int, ranks: Sequence[int] | None = None) -> MessageRows:
        """The messages of [t0, t1) (absolute ns) as the in-memory window has them
        (Window.message_rows): sent inside it, their sender or receiver in `ranks` (None:
        all). Every sender's range is read: a receiver's messages are on its senders'
        files. ValueError where the window holds more than MAX_MESSAGES."""
        t0, t1 = sorted((int(t0), int(t1)))
        t1 = max(t1, t0 + 1)
        found = []
        for r in sorted(self.counts):
            if not self.counts[r]:
                continue
            a = self._array(r)
            i0, i1 = np.searchsorted(a[TIME], (t0, t1), side="left")
            if i1 > i0:
                found.append((a, int(i0), int(i1)))
        total = sum(i1 - i0 for _a, i0, i1 in found)
        if total > MAX_MESSAGES:
            raise ValueError(f"the window holds {total:,} messages, more than the "
                             f"{MAX_MESSAGES:,} read at once out of core: zoom in")
        chosen = None if ranks is None else np.asarray(sorted({int(r) for r in ranks}))
        parts = [np.zeros((7, 0), np.int64)]
        for a, i0, i1 in found:
            part = np.asarray(a[:, i0:i1])  # seven contiguous ranges of the file
            if chosen is not None:
                part = part[:, np.isin(part[SEND], chosen) | np.isin(part[RECV], chosen)]
            parts.append(part)
        m = np.concatenate(parts, axis=1)
        return MessageRows(m[TIME], m[SEND], m[RECV], m[BYTES], m[TRANSFER], m[COMM], m[TAG])

    def tables(self, t0: int, t1: int, ranks: Sequence[int] | None, num_ranks: int
               ) -> MessageTables:
        """The window's communication matrix and message sizes, as in memory."""
        m = self.rows(t0, t1, ranks)
        return MessageTables(window.comm_matrix(m, num_ranks), window.message_sizes(m),
                             len(m))

    def profile(self, t0: int, t1: int, ranks: Sequence[int] | None,
                by: Sequence[str] = window.MESSAGE_KEYS) -> pd.DataFrame:
        """The window's messages per communicator and/or tag (Window.message_profile)."""
        m = self.rows(t0, t1, ranks)
        return window.sort_message_profile(
            window.message_groups(m, window.message_keys(by), self.comm_names)[0])
