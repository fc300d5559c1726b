"""The out-of-core page's search, call details and partner jump: the in-memory page's
(navsearch: what a search finds, where the view goes, what the details say) on the rows
of the trace's Parquet cache, read one rank's partition at a time, never the whole trace.

- a call's row: call ids are rank-major and each rank's partition holds its calls in id
  order, so call c is row c - first(rank) of its rank's file: one row group read (kept:
  the page asks for the same calls on every redraw of a selection);
- a search: each rank's calls (function, call site, start) or each sender's messages
  (tag, communicator, the calls), a column set at a time; the matches (ids and starts)
  are kept for the last few searches, so n / p after the first are binary searches;
- a call's messages: only the files of the ranks that can have sent them, found in the
  call's own rank's point-to-point events (its sends: that rank; its receives: the
  source of each receive it completes, or of the completions of the requests it
  posted); each of those files' four id columns scanned for the call's id (the cache
  writes no statistics to skip row groups by). Where an event does not name its source,
  every sender's file is scanned.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from mpiscope.archive import cache
from mpiscope.engines.daskcache import CacheTables
from mpiscope_webui import navsearch
from mpiscope_webui.model import comm_label

ROWS_KEPT = 64  # call rows kept (a selection's calls are redrawn on every zoom)
P2P_KEPT = 2  # ranks whose point-to-point events are kept (a click, then its partner's)
RECEIVED = ("recv", "irecv")  # p2p events of a completed receive: `peer` is its source
SEARCHES_KEPT = 4  # searches whose matches are kept
CALL_COLUMNS = ["call", "function", "callsite", "start", "end", "thread", "kind", "peer",
                "tag", "comm", "bytes_sent", "bytes_recv"]


class Kept:
    """The last `size` values computed, by key (least recently used dropped first), for
    the page's callback threads."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._lock = threading.Lock()
        self._items: OrderedDict = OrderedDict()

    def get(self, key):
        with self._lock:
            got = self._items.get(key)
            if got is not None:
                self._items.move_to_end(key)
            return got

    def put(self, key, value):
        with self._lock:
            self._items[key] = value
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value


@dataclass(frozen=True)
class RankP2p:
    """What a call's partner lookup reads of its rank's point-to-point events."""

    call: np.ndarray
    peer: np.ndarray
    request: np.ndarray
    received: np.ndarray  # a completed receive: `peer` is its source
    posted: np.ndarray  # an Irecv's request posted (its source is named at completion)


class OocCalls:
    """The calls and messages of a cached trace, as the timeline's search and details
    need them, read from the cache's per-rank files on demand."""

    def __init__(self, tables: CacheTables) -> None:
        self.tables = tables
        rows = np.zeros(tables.meta.num_ranks, np.int64)
        for v, n in tables.manifest["tables"]["calls"]["partitions"] or []:
            rows[int(v)] = int(n)
        self.first = np.concatenate([[0], np.cumsum(rows)])  # rank r: [first[r], first[r+1])
        self.total = int(self.first[-1])
        self.senders = tables.ranks_of("messages")
        self._comms = tables.small("comms")
        self._lock = threading.Lock()
        self._rows = Kept(ROWS_KEPT)
        self._found = Kept(SEARCHES_KEPT)
        self._p2p = Kept(P2P_KEPT)
        self._options: list[dict] | None = None
        self.functions = [str(f) for f in tables.manifest["tables"]["calls"]["categories"]
                          ["function"]]

    # -- rows ------------------------------------------------------------------------------
    def rank_of(self, call: int) -> int:
        return int(np.searchsorted(self.first, call, side="right")) - 1

    def _file(self, table: str, value: int) -> pq.ParquetFile:
        """One rank's file of a table, its pages' checksums verified as the cache's own
        reads do (a cache is never trusted)."""
        key = cache.PARTITION_BY[table]
        return pq.ParquetFile(cache.partition_path(self.tables.dir, table, key, value),
                              page_checksum_verification=True)

    def row(self, call: int) -> pd.Series:
        """Call `call`'s row (CALL_COLUMNS and its rank)."""
        got = self._rows.get(call)
        if got is not None:
            return got
        r = self.rank_of(call)
        f = self._file("calls", r)
        at = call - int(self.first[r])
        sizes = np.array([f.metadata.row_group(g).num_rows
                          for g in range(f.metadata.num_row_groups)])
        g = int(np.searchsorted(np.cumsum(sizes), at, side="right"))
        t = f.read_row_group(g, columns=CALL_COLUMNS, use_threads=False)
        got = t.slice(at - int(sizes[:g].sum()), 1).to_pandas().iloc[0]
        got["rank"] = r
        return self._rows.put(call, got)

    def span(self, call: int) -> tuple[int, int]:
        """A call's (start, end), ns."""
        c = self.row(call)
        return int(c["start"]), int(c["end"])

    def comm_name(self, comm: int) -> str:
        return comm_label(self._comms, comm)

    # -- search ----------------------------------------------------------------------------
    def _calls_of(self, rank: int, columns: list[str]) -> pd.DataFrame:
        df = self._file("calls", rank).read(columns=columns, use_threads=False).to_pandas()
        df["rank"] = rank
        return df

    def _messages_of(self, sender: int) -> pd.DataFrame:
        cols = [c for c in navsearch.MESSAGE_COLUMNS if c != "send_rank"]
        df = self._file("messages", sender).read(columns=cols, use_threads=False).to_pandas()
        df["send_rank"] = np.full(len(df), sender, np.int64)
        return df

    def options_ready(self) -> bool:
        with self._lock:
            return self._options is not None

    def search_options(self) -> list[dict]:
        """What the search offers (navsearch.search_options), as on the in-memory page:
        the call sites and tags counted rank by rank (once, when first asked)."""
        with self._lock:
            if self._options is not None:
                return self._options
        ranks = [int(r) for r in np.flatnonzero(np.diff(self.first))]
        sites = [navsearch.site_counts(self._calls_of(r, ["function", "callsite"]))
                 for r in ranks]
        site = (pd.concat(sites).groupby(level=[0, 1], observed=True).sum() if sites
                else pd.Series(dtype=np.int64))
        tags, comms = pd.Series(dtype=np.int64), pd.Series(dtype=np.int64)
        for s in self.senders:
            m = self._file("messages", s).read(columns=["tag", "comm"],
                                               use_threads=False).to_pandas()
            tags = tags.add(m["tag"].value_counts(), fill_value=0)
            comms = comms.add(m["comm"].value_counts(), fill_value=0)
        used = set(site.index.get_level_values(0).astype(str)) if len(site) else set()
        out = navsearch.search_options([f for f in self.functions if f in used], site, tags,
                                       comms, self.comm_name)
        with self._lock:
            self._options = out
        return out

    def matches(self, what: str, ranks: Sequence[int] | None) -> tuple[np.ndarray,
                                                                       np.ndarray] | None:
        """(call ids, their starts) a search value stands for on the ranks given (all:
        None), the same calls as the in-memory page's search; None if the value is not
        one the search offers."""
        key = (what, tuple(sorted(ranks)) if ranks else None)
        got = self._found.get(key)
        if got is not None:
            return got
        if navsearch.is_message_search(what):
            if navsearch.message_key(what) is None:
                return None
            parts = [navsearch.message_matches(self._messages_of(s), what, ranks)
                     for s in self.senders]
            ids = np.unique(np.concatenate([x for x in parts if x is not None]
                                           or [np.empty(0, np.int64)]))
            starts = self._starts(ids)
        else:
            if navsearch.function_of(what) not in self.functions:
                return None
            chosen = [int(r) for r in (ranks or range(len(self.first) - 1))
                      if 0 <= int(r) < len(self.first) - 1]
            ids_of, starts_of = [np.empty(0, np.int64)], [np.empty(0, np.int64)]
            for r in chosen:
                f = self._calls_of(r, ["call", "function", "callsite", "start"])
                hit = navsearch.call_matches(f, what)
                ids_of.append(hit)
                # a rank's file holds its calls in id order from first[r]: row = id - first
                starts_of.append(f["start"].to_numpy(np.int64)[hit - self.first[r]])
            ids, starts = np.concatenate(ids_of), np.concatenate(starts_of)
        return self._found.put(key, (ids, starts))

    def _starts(self, ids: np.ndarray) -> np.ndarray:
        """The starts of calls `ids` (ascending), each rank's start column read once."""
        out = np.empty(len(ids), np.int64)
        ranks = np.searchsorted(self.first, ids, side="right") - 1
        for r in np.unique(ranks):
            col = self._file("calls", int(r)).read(columns=["start"], use_threads=False)
            start = col["start"].to_numpy()
            sel = ranks == r
            out[sel] = start[ids[sel] - self.first[r]]
        return out

    # -- details ---------------------------------------------------------------------------
    def _p2p_of(self, rank: int) -> RankP2p:
        """A rank's point-to-point events as the partner lookup reads them, kept for the
        last P2P_KEPT ranks."""
        got = self._p2p.get(rank)
        if got is not None:
            return got
        cols = ["event", "call", "peer", "request"]
        p = (self._file("p2p", rank).read(columns=cols, use_threads=False).to_pandas()
             if rank in self.tables.ranks_of("p2p") else pd.DataFrame(columns=cols))
        ev = p["event"].astype(str).to_numpy()
        return self._p2p.put(rank, RankP2p(
            p["call"].to_numpy(np.int64), p["peer"].to_numpy(np.int64),
            p["request"].to_numpy(np.int64), np.isin(ev, RECEIVED),
            ev == "irecv_request"))

    def senders_of(self, call: int) -> list[int]:
        """The ranks whose messages can name `call` (module doc): its own rank, and the
        sources of the receives it completes or whose requests it posted; every sender
        where an event of it does not name its source."""
        rank = self.rank_of(call)
        p = self._p2p_of(rank)
        mine = p.call == call
        posted = p.request[mine & p.posted]
        got = p.received & (mine | (np.isin(p.request, posted) & (p.request >= 0)))
        peers = p.peer[got]
        if (peers < 0).any():
            return list(self.senders)
        known = set(int(s) for s in self.senders)
        return sorted({rank, *(int(x) for x in peers)} & known)

    def partners(self, call: int) -> pd.DataFrame:
        """The messages this call sent or received, posting or completing them (as the
        in-memory page's navsearch.partner_messages): the four id columns of the files of
        `senders_of(call)` scanned for it, the rows that have it read whole."""
        ids = ["send_call", "recv_call", "send_complete_call", "recv_complete_call"]
        parts = []
        for s in self.senders_of(call):
            t = self._file("messages", s).read(columns=ids, use_threads=False)
            hit = np.zeros(t.num_rows, bool)
            for c in ids:
                hit |= t[c].to_numpy() == call
            if hit.any():
                parts.append(self._messages_of(s)[hit])
        if not parts:
            return pd.DataFrame({c: pd.Series(dtype=np.int64)
                                 for c in navsearch.MESSAGE_COLUMNS})
        return navsearch.partner_messages(pd.concat(parts, ignore_index=True), call)

    def details(self, panel: int, call: int, came_from: int | None = None) -> list:
        """A call's details and its partner jumps, as the in-memory page shows them (its
        call path and waiting are not read out of core: the call site stands for it)."""
        c = self.row(call)
        lines = navsearch.call_lines(c, self.comm_name, str(c["callsite"]), (), None)
        return navsearch.call_details(panel, call, (int(c["rank"]), str(c["function"])),
                                      lines, [], self.partners(call), came_from)

