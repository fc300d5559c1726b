"""OTF2 -> the partitioned Parquet cache on a Dask cluster, one task per group of ranks.

The cache written is the one `mpiscope.load` writes (archive/cache.py), file for file, so
either engine reads it. How:

1. The client reads the definitions once (small) and broadcasts them to the workers.
2. `decode`: per group of consecutive ranks, a worker runs the native reader on the
   group's locations only (every thread of its ranks). Call ids then count from 0 within
   the group; the task keeps its tables in the worker's memory and returns a summary
   (rows per rank, the highest collective sequence number per communicator, per-location
   event counts and times).
3. `place`: once the groups before it are summarized, a group's ids become global (call,
   region and p2p row offsets), its rank-partitioned tables are written, its sends and
   receives are cut into pieces by (sender, receiver) pair bucket and, with its
   collectives, written to scratch files (`_match/`, removed before the cache is put in
   place).
4. `match`: per bucket, the pieces of every group are matched as reader.c's `match` does
   (FIFO per sender, receiver, comm, tag; receives in posting order), giving messages
   (ordered as C orders them: by the send's p2p row), written per sender group, and
   unmatched operations.
5. `finish`: per group, its senders' messages and its collectives (instance ids need
   every rank's sequence numbers) are written.

No process holds the whole trace, and what a worker holds does not grow with it: the
groups it decodes until they are placed (at most `IN_FLIGHT` per worker are submitted
ahead, each about `events_per_group` events), one match bucket (the number of buckets
grows with the trace: about `EVENTS_PER_BUCKET` events' worth of sends and receives
each) or one group's messages and collectives; results between the steps go through
files, not worker memory. The client holds only the definitions, the summaries and the
RMA/MPI-IO/unmatched rows (written as single files, as in the serial cache: they are few
where the p2p traffic is many). Everything is written into a
temporary directory put in place when complete (manifest last; `output.publish_dir`): a
worker killed mid-way makes Dask rerun its task (`retries`), and a job that still fails
removes the temporary directory and raises one `UserError` line; a half cache is never
seen.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from mpiscope import output
from mpiscope.archive import cache, decode, memory, reader
from mpiscope.archive import native as _native
from mpiscope.archive.schema import SCHEMA
from mpiscope.archive.trace import empty_table
from mpiscope.engines import choose, cluster
from mpiscope.engines.daskcache import version_of
from mpiscope.errors import UserError

MIN_BUCKETS = 16  # pieces of the send/receive rows, matched side by side ...
EVENTS_PER_BUCKET = 2_000_000  # ... more for a bigger trace: this many events per piece
SCRATCH = "_match"  # between place, match and finish; removed before publishing
IN_FLIGHT = 2  # groups decoded ahead per worker (each held until placed)
RETRIES = 2  # a task whose worker died is run again this many times
RANKED = ("calls", "regions", "p2p", "flushes")  # written by `place`, rank-partitioned
SINGLE = ("rma", "rma_sync", "io")  # gathered by the client, written as one file each


@dataclass
class Summary:
    """What the client needs of a decoded group (small)."""

    index: int
    ranks: list[int]
    calls: int
    regions: int
    p2p: int
    coll_max: dict[int, int]  # comm index -> highest coll_seq + 1 in this group
    loc_events: np.ndarray
    loc_first: np.ndarray
    loc_last: np.ndarray
    loc_truncated: np.ndarray
    clock_offsets: int
    finalized: list[int]
    unreadable: str  # why none of the group's locations could be read, "" if one could
    damage: _native.Damage  # per location, what the reader changed of damaged files


@dataclass
class Group:
    """A decoded group's tables, held by the worker that decoded it until placed."""

    summary: Summary
    tables: dict[str, pd.DataFrame]
    link: np.ndarray = field(repr=False)


def _locations(defs: decode.Definitions, ranks: list[int]) -> np.ndarray:
    """Indices into defs.threads of every location of these ranks, in reader order."""
    want = set(ranks)
    return np.asarray([i for i, (r, _t, _l, _n) in enumerate(defs.threads) if r in want],
                      np.int64)


def _task_budget() -> int:
    """Events one decoding task may keep: what its worker's memory limit holds at the
    planned bytes per event (engines/choose.py), else what this machine has free. A rank
    of polling calls recorded one by one is let through the plan on the hope that they
    merge; this stops it in one line, not with KilledWorker, when they do not."""
    limit = 0
    try:
        from distributed import get_worker

        limit = int(get_worker().memory_manager.memory_limit or 0)
    except (ImportError, ValueError, AttributeError):
        pass  # not on a worker (a test's executor): this process's memory
    if limit <= 0:
        return memory.kept_events_budget()
    return max((limit - choose.DASK_WORKER_BASE_BYTES) // choose.DASK_WORKER_BYTES_PER_EVENT, 1)


def decode_group(anchor: str, defs: decode.Definitions, index: int, ranks: list[int]) -> Group:
    """Run the native reader on one group's locations; its tables with local ids."""
    lk = defs.lookup()
    sel = _locations(defs, ranks)
    lk = dataclasses.replace(lk, locations=lk.locations[sel], loc_rank=lk.loc_rank[sel],
                             loc_thread=lk.loc_thread[sel],
                             loc_max_events=lk.loc_max_events[sel],
                             expected_events=0)  # only a hint for the progress line
    # a group none of whose locations is readable is not an error yet: the serial reader
    # fails only when no location of the whole archive is (its ranks are then cut short)
    ev = _native.read_events(Path(anchor), lk, subset=True, max_kept_events=_task_budget())
    t = ev.tables
    calls = decode._calls_frame(t["calls"], defs.mpi_functions, defs.callsites)
    regions = decode._calls_frame(t["regions"], defs.other_functions, defs.callsites)
    regions["kind"] = decode._category(np.full(len(regions), decode.CALL_KINDS.index("other"),
                                                np.int8), decode.CALL_KINDS)
    p = t["p2p"]
    p["event"] = decode._category(p["event"], decode.UNMATCHED_EVENTS)
    p2p = decode._frame(p)
    flushes = decode._frame(t["flushes"])
    rows = t["collectives"]["call"]
    coll = {name: (calls[name].to_numpy()[rows] if name != "function"
                   else calls["function"].array.take(rows))
            for name in decode.COLLECTIVE_COLUMNS if name != "instance"}
    coll["call"] = rows
    coll["instance"] = np.full(len(rows), -1, np.int64)  # set in `finish`
    collectives = decode._frame({name: coll[name] for name in decode.COLLECTIVE_COLUMNS})
    rma, rma_sync, io_ops, _windows, _files = decode._rma_io_frames(t, defs)
    seq = collectives["coll_seq"].to_numpy()
    cidx = defs.comm_positions(collectives["comm"].to_numpy())
    coll_max: dict[int, int] = {}
    if len(seq):
        top = pd.Series(seq + 1).groupby(cidx).max()
        coll_max = {int(k): int(v) for k, v in top.items()}
    finalized: list[int] = []
    if "MPI_Finalize" in defs.mpi_functions:
        fin = defs.mpi_functions.index("MPI_Finalize")
        finalized = np.unique(t["calls"]["rank"][t["calls"]["function"] == fin]).tolist()
    summary = Summary(index, ranks, len(calls), len(regions), len(p2p), coll_max,
                      ev.loc_events, ev.loc_first, ev.loc_last, ev.loc_truncated,
                      ev.clock_offsets, [int(r) for r in finalized], ev.error, ev.damage)
    return Group(summary, {"calls": calls, "regions": regions, "p2p": p2p, "flushes": flushes,
                           "collectives": collectives, "rma": rma, "rma_sync": rma_sync,
                           "io": io_ops}, ev.link)


def summary_of(group: Group) -> Summary:
    return group.summary


def _shift(a: np.ndarray, by: int) -> np.ndarray:
    """Row ids moved by `by`, -1 (none) kept."""
    return np.where(a >= 0, a + by, a)


@dataclass
class Placed:
    """What `place` returns to the client (small: the rest went to files)."""

    single: dict[str, pd.DataFrame]  # rma, rma_sync, io with global ids
    infos: dict[str, dict]  # manifest entries of the tables written


def buckets_for(expected_events: int) -> int:
    return max(MIN_BUCKETS, -(-expected_events // EVENTS_PER_BUCKET))


def _bucket(send_rank: np.ndarray, recv_rank: np.ndarray, nbuckets: int) -> np.ndarray:
    return (send_rank.astype(np.int64) * 1_000_003 + recv_rank) % nbuckets


def _scratch(tmp: str, name: str) -> Path:
    return Path(tmp) / SCRATCH / f"{name}.pkl"


def _dump(df: pd.DataFrame, path: Path) -> None:
    """Whole or not at all (a rerun task writes the same file again)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
    df.to_pickle(part)  # exact dtypes (categories), and fast: it only lives minutes
    part.replace(path)


def _load(path: Path) -> pd.DataFrame | None:
    return pd.read_pickle(path) if path.exists() else None


def place(group: Group, tmp: str, call_off: int, region_off: int, p2p_off: int,
          nbuckets: int) -> Placed:
    """Global ids, the rank-partitioned tables written, sends/receives cut by pair into
    `nbuckets` scratch files and the collectives into one, for `match` and `finish`."""
    t = group.tables
    calls, p2p = t["calls"], t["p2p"]
    calls["call"] = calls["call"].to_numpy() + call_off
    t["regions"]["call"] = t["regions"]["call"].to_numpy() + region_off
    p2p["call"] = _shift(p2p["call"].to_numpy(), call_off)
    t["collectives"]["call"] = t["collectives"]["call"].to_numpy() + call_off
    for name, cols in (("rma", ("call", "complete_call")), ("rma_sync", ("call",)),
                       ("io", ("call", "complete_call"))):
        for col in cols:
            t[name][col] = _shift(t[name][col].to_numpy(), call_off)
    link = _shift(group.link, call_off)
    infos = {}
    for name in RANKED:
        infos[name] = cache._write_table(t[name], Path(tmp), name, _Inline())
    g = group.summary.index
    for k, piece in enumerate(_match_rows(p2p, link, calls, call_off, p2p_off, nbuckets)):
        if len(piece):
            _dump(piece, _scratch(tmp, f"pairs-b{k}-g{g}"))
    _dump(t["collectives"], _scratch(tmp, f"collectives-g{g}"))
    return Placed({n: t[n] for n in SINGLE}, infos)


class _Inline:
    """An Executor's `map` run in this thread: a Dask task is one thread already."""

    def map(self, fn: Callable, *its):  # noqa: ANN201 - as Executor.map
        return map(fn, *its)


def _match_rows(p2p: pd.DataFrame, link: np.ndarray, calls: pd.DataFrame, call_off: int,
                p2p_off: int, nbuckets: int) -> list[pd.DataFrame]:
    """Per send and receive of the group: what reader.c's `match` sorts and emits."""
    ev = p2p["event"].astype(str).to_numpy()
    is_send = (ev == "send") | (ev == "isend")
    is_recv = (ev == "recv") | (ev == "irecv")
    keep = is_send | is_recv
    rank = p2p["rank"].to_numpy()[keep]
    peer = p2p["peer"].to_numpy()[keep]
    snd = is_send[keep]
    call = p2p["call"].to_numpy()[keep]
    lk = link[keep]
    time = p2p["time"].to_numpy()[keep]
    starts = calls["start"].to_numpy()
    ends = calls["end"].to_numpy()

    def at(arr: np.ndarray, ids: np.ndarray) -> np.ndarray:  # global ids of this group
        return np.where(ids >= 0, arr[np.clip(ids - call_off, 0, max(len(arr) - 1, 0))], -1) \
            if len(arr) else np.full(len(ids), -1, np.int64)

    row = np.flatnonzero(keep).astype(np.int64) + p2p_off
    post = np.where(snd, row, lk)
    when = np.where(~snd & (lk >= 0), at(starts, lk), time)
    df = pd.DataFrame({
        "send_rank": np.where(snd, rank, peer).astype(np.int32),
        "recv_rank": np.where(snd, peer, rank).astype(np.int32),
        "comm": p2p["comm"].to_numpy()[keep], "tag": p2p["tag"].to_numpy()[keep],
        "is_recv": ~snd, "when": when, "post": post, "row": row,
        "event": p2p["event"].to_numpy()[keep], "rank": rank, "peer": peer,
        "bytes": p2p["bytes"].to_numpy()[keep], "time": time, "call": call, "link": lk,
        # the send's side: its posting and completing call, Enter of the posting call
        "enter_call": at(starts, np.where(snd, call, lk)),
        "leave_call": at(ends, call),
    })
    b = _bucket(df["send_rank"].to_numpy(), df["recv_rank"].to_numpy(), nbuckets)
    order = np.argsort(b, kind="stable")
    cuts = np.searchsorted(b[order], np.arange(nbuckets + 1))
    return [df.iloc[order[cuts[k]:cuts[k + 1]]].reset_index(drop=True)
            for k in range(nbuckets)]


KEY = ["send_rank", "recv_rank", "comm", "tag"]


def match_bucket(tmp: str, k: int, ngroups: int, group_of_rank: np.ndarray,
                 *_placed: Placed) -> pd.DataFrame:
    """Bucket k's sends and receives from every group matched; its messages written per
    sender group for `finish`; its unmatched rows returned (few). `_placed`: the `place`
    results this waits for."""
    pieces = [p for g in range(ngroups)
              if (p := _load(_scratch(tmp, f"pairs-b{k}-g{g}"))) is not None]
    if not pieces:  # no pair of this bucket talks
        return pd.DataFrame({"rank": np.zeros(0, np.int32), "event": np.zeros(0, object),
                             **{c: np.zeros(0, np.int32) for c in ("peer", "comm", "tag")},
                             **{c: np.zeros(0, np.int64) for c in ("bytes", "call", "order")}})
    messages, unmatched = match(*pieces)
    sender = group_of_rank[messages["send_rank"].to_numpy()]
    for g in np.unique(sender):
        _dump(messages[sender == g], _scratch(tmp, f"messages-b{k}-g{int(g)}"))
    return unmatched


def match(*pieces: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Messages (with the send's p2p row as `order`) and unmatched rows (with `order`)."""
    df = pd.concat(pieces, ignore_index=True)
    df = df.sort_values(KEY + ["is_recv", "when", "post", "row"], kind="stable")
    df["seq"] = df.groupby(KEY + ["is_recv"], sort=False).cumcount()
    s = df[~df["is_recv"]]
    r = df[df["is_recv"]]
    m = s.merge(r, on=KEY + ["seq"], how="outer", suffixes=("_s", "_r"), indicator=True)
    both = m[m["_merge"] == "both"]
    sccall = both["link_s"].to_numpy()
    messages = pd.DataFrame({
        "send_rank": both["send_rank"].astype(np.int32),
        "recv_rank": both["recv_rank"].astype(np.int32),
        "comm": both["comm"].astype(np.int32), "tag": both["tag"].astype(np.int32),
        "bytes": both["bytes_s"].astype(np.int64),
        "send_call": both["call_s"].astype(np.int64),
        "recv_call": both["link_r"].astype(np.int64),
        "send_complete_call": np.where(sccall >= 0, sccall, both["call_s"]).astype(np.int64),
        "recv_complete_call": both["call_r"].astype(np.int64),
        "send_time": both["time_s"].astype(np.int64),
        "recv_time": both["time_r"].astype(np.int64),
        "send_enter": both["enter_call_s"].astype(np.int64),
        "recv_enter": both["enter_call_r"].astype(np.int64),
        "recv_leave": both["leave_call_r"].astype(np.int64),
        "order": both["row_s"].astype(np.int64),
    })
    left = m[m["_merge"] != "both"]
    sent = (left["_merge"] == "left_only").to_numpy()

    def side(col: str) -> np.ndarray:
        return np.where(sent, left[f"{col}_s"], left[f"{col}_r"])

    link = side("link")
    unmatched = pd.DataFrame({
        "rank": side("rank").astype(np.int32),
        "event": side("event"),
        "peer": side("peer").astype(np.int32),
        "comm": left["comm"].to_numpy().astype(np.int32),
        "tag": left["tag"].to_numpy().astype(np.int32),
        "bytes": side("bytes").astype(np.int64),
        "call": np.where(~sent & (link >= 0), link, side("call")).astype(np.int64),
        "order": side("row").astype(np.int64),
    })
    return messages.reset_index(drop=True), unmatched


def finish(g: int, tmp: str, nbuckets: int, base: np.ndarray, comm_refs: np.ndarray,
           *_matched: pd.DataFrame) -> dict[str, dict]:
    """Group g's messages (by sender, in the senders' p2p order) and collectives (with
    instance ids: comm's base + sequence number, as reader.c numbers them). `_matched`:
    the `match_bucket` results this waits for."""
    c = _load(_scratch(tmp, f"collectives-g{g}"))
    assert c is not None, "place writes every group's collectives"
    messages = [m for k in range(nbuckets)
                if (m := _load(_scratch(tmp, f"messages-b{k}-g{g}"))) is not None]
    if len(c):
        # a comm's index is its place among the comms' refs (sorted), as reader.c's
        c["instance"] = base[np.searchsorted(comm_refs, c["comm"].to_numpy())] + \
            c["coll_seq"].to_numpy()
    m = pd.concat(messages, ignore_index=True) if messages else empty_table(
        "messages").assign(order=np.zeros(0, np.int64))
    m = m.sort_values("order", kind="stable").drop(columns="order").reset_index(drop=True)
    m = m.reindex(columns=SCHEMA.tables["messages"].names)
    return {"collectives": cache._write_table(c, Path(tmp), "collectives", _Inline()),
            "messages": cache._write_table(m, Path(tmp), "messages", _Inline())}


def groups_of(defs: decode.Definitions, events_per_group: int, min_groups: int
              ) -> list[list[int]]:
    """Consecutive ranks, about `events_per_group` events each (by the definitions'
    per-location counts), at least `min_groups` groups when there are that many ranks."""
    nranks = len(defs.locations)
    wanted = -(-max(defs.expected_events, 1) // max(events_per_group, 1))
    n = min(nranks, max(min_groups, wanted))
    return [list(map(int, g)) for g in np.array_split(np.arange(nranks), n)]


def _merge_infos(infos: list[dict]) -> dict:
    """One manifest entry from the groups' entries of a rank-partitioned table."""
    out = dict(infos[0])
    out["partitions"] = [p for i in infos for p in (i["partitions"] or [])]
    return out


def convert(trace_dir: Path | str, client, *, events_per_group: int = 2_000_000,
            progress: Callable[[str], None] | None = None) -> Path:
    """Write the trace's Parquet cache with the cluster of `client`; its directory.

    A current cache is kept as it is. Raises UserError (one line) when the conversion
    fails after retries; then no cache, not even a partial one, is left."""
    from mpiscope.archive import salvaged
    from mpiscope.engines.daskcache import find

    say = progress or (lambda _m: None)
    if salvaged.is_salvaged(Path(trace_dir)):
        raise UserError(str(trace_dir), "a job that died (per-rank archives): the Dask "
                        "engine reads complete archives only, use --engine pandas")
    anchor = reader.anchor_of(Path(trace_dir))
    found = find(trace_dir)
    if found is not None:
        return found[0]
    defs = decode.Definitions(anchor)
    if not defs.locations:
        raise UserError(str(anchor.parent), "OTF2 archive without locations")
    workers = max(1, len(cluster.workers(client)))
    groups = groups_of(defs, events_per_group, 2 * workers)
    local, fallback = cache.candidates(anchor.parent)
    target = local if cache._writable(anchor.parent) else fallback
    srcs = cache.sources(anchor.parent)  # as read: a file changed meanwhile is read again
    with output.publish_dir(target) as tmp:
        _run(client, anchor, defs, groups, tmp, workers, say, srcs)
    return target


STALL_S = 120  # every worker paused (at its memory limit) this long: give up, one line


class _Stalled(Exception):
    pass


def _gather(client, futures: list) -> list:
    """`client.gather`, except that a cluster whose every worker is paused (Dask pauses a
    worker past 80% of its memory limit and never runs its tasks again until memory
    falls) fails after STALL_S instead of waiting forever."""
    from distributed import wait

    paused_since = None
    while True:
        try:
            wait(futures, timeout=5, return_when="ALL_COMPLETED")
            return client.gather(futures)
        except TimeoutError:
            workers = cluster.workers(client).values()
            paused = bool(workers) and all(w.get("status") == "paused" for w in workers)
            if not paused:
                paused_since = None
            elif paused_since is None:
                paused_since = time.monotonic()
            elif time.monotonic() - paused_since > STALL_S:
                raise _Stalled() from None


def _failed(err: BaseException, anchor: Path) -> UserError:
    from concurrent.futures import CancelledError

    from distributed.scheduler import KilledWorker

    if isinstance(err, _Stalled):
        why = f"every Dask worker paused at its memory limit for {STALL_S} s " \
              "(raise --memory-limit)"
    elif isinstance(err, KilledWorker):
        why = f"a Dask worker died {RETRIES + 1} times running {err.task} " \
              "(out of memory? raise --memory-limit or use more, smaller groups)"
    elif isinstance(err, CancelledError):  # the scheduler dropped it with its dead worker
        why = "a task was cancelled after its Dask worker died (out of memory? raise " \
              "--memory-limit)"
    else:
        why = f"{type(err).__name__}: {err}"
    why = " ".join(why.split())  # one line, whatever the exception's text
    return UserError(str(anchor.parent), f"parallel conversion failed, no cache written: {why}")


def _run(client, anchor: Path, defs: decode.Definitions, groups: list[list[int]], tmp: Path,
         workers: int, say: Callable[[str], None], srcs: list[dict]) -> None:
    from distributed import as_completed

    # keys unique per conversion: a key the scheduler still knows would return that
    # (other) conversion's result
    run_id = uuid.uuid4().hex
    defs_f = cluster.shared(client, defs, RETRIES)
    submit = client.submit
    n = len(groups)
    decoded: dict[int, object] = {}
    summaries: dict[int, Summary] = {}
    placed: dict[int, object] = {}
    offsets = [0, 0, 0]  # calls, regions, p2p rows of the groups placed so far
    ahead = IN_FLIGHT * workers
    nbuckets = buckets_for(defs.expected_events)
    pending = as_completed()
    nxt = 0

    def launch() -> None:
        nonlocal nxt
        while nxt < n and nxt - len(placed) < ahead:
            g = submit(decode_group, str(anchor), defs_f, nxt, groups[nxt], pure=False,
                       retries=RETRIES, key=f"mpiscope-decode-{nxt}-{run_id}")
            decoded[nxt] = g
            pending.add(submit(summary_of, g, pure=False, retries=RETRIES))
            nxt += 1

    try:
        launch()
        for fut in pending:
            s: Summary = _gather(client, [fut])[0]
            summaries[s.index] = s
            # place groups in order: each needs the row counts of those before it
            while len(placed) in summaries:
                i = len(placed)
                si = summaries[i]
                placed[i] = submit(place, decoded.pop(i), str(tmp), *offsets, nbuckets,
                                   pure=False, retries=RETRIES)
                offsets = [offsets[0] + si.calls, offsets[1] + si.regions,
                           offsets[2] + si.p2p]
                say(f"decoded {len(placed)} of {n} rank groups")
            launch()
        if all(s.unreadable for s in summaries.values()):  # as the serial reader says
            raise UserError(str(anchor.parent), summaries[0].unreadable)
        order = [placed[i] for i in range(n)]
        group_of_rank = np.zeros(len(defs.locations), np.int64)
        for i, g in enumerate(groups):
            group_of_rank[g] = i
        matched = [submit(match_bucket, str(tmp), k, n, group_of_rank, *order, pure=False,
                          retries=RETRIES) for k in range(nbuckets)]
        ncomms = len(defs.comms)
        top = np.zeros(ncomms + 1, np.int64)
        for s in summaries.values():
            for ci, v in s.coll_max.items():
                top[ci + 1] = max(top[ci + 1], v)
        base = np.cumsum(top)
        comm_refs = np.asarray([c["comm"] for c in defs.comms], np.int64)
        finished = [submit(finish, i, str(tmp), nbuckets, base, comm_refs, *matched,
                           pure=False, retries=RETRIES) for i in range(n)]
        infos_ranked = _gather(client, [submit(lambda p: p.infos, p, pure=False)
                                        for p in order])
        infos_last = _gather(client, finished)
        singles = _gather(client, [submit(lambda p: p.single, p, pure=False) for p in order])
        unmatched = _gather(client, matched)
    except UserError:
        raise
    except Exception as err:  # noqa: BLE001 - one line for the user, no half cache
        raise _failed(err, anchor) from None
    shutil.rmtree(tmp / SCRATCH, ignore_errors=True)
    say("writing cache")
    _write_rest(anchor, defs, groups, tmp, summaries, infos_ranked, infos_last, singles,
                unmatched, srcs)


def _write_rest(anchor: Path, defs: decode.Definitions, groups: list[list[int]], tmp: Path,
                summaries: dict[int, Summary], infos_ranked: list[dict],
                infos_last: list[dict], singles: list[dict], unmatched: list[pd.DataFrame],
                srcs: list[dict]) -> None:
    """The small tables, the single-file ones, and the manifest (last)."""
    n = len(groups)
    s = [summaries[i] for i in range(n)]
    loc_events = np.concatenate([x.loc_events for x in s])
    loc_first = np.concatenate([x.loc_first for x in s])
    loc_last = np.concatenate([x.loc_last for x in s])
    loc_trunc = np.concatenate([x.loc_truncated for x in s])
    # the groups' locations, concatenated, are defs.threads in order (rank-major)
    nranks = len(defs.locations)
    threads = decode._frame({
        "rank": np.asarray([r for r, _t, _l, _n in defs.threads], np.int32),
        "thread": np.asarray([t for _r, t, _l, _n in defs.threads], np.int16),
        "location": np.asarray([loc for _r, _t, loc, _n in defs.threads], np.int64),
        "name": [nm for _r, _t, _l, nm in defs.threads],
        "first_ns": loc_first, "last_ns": loc_last, "events": loc_events.astype(np.int64)})
    ranks = decode.ranks_frame(defs, threads)
    comms = decode.comms_frame(defs)
    windows = decode._records_frame(defs.windows, "windows")
    files = decode._records_frame(defs.files, "files")
    um = pd.concat(unmatched, ignore_index=True).sort_values("order", kind="stable")
    um = um.drop(columns="order").reset_index(drop=True)
    um["event"] = pd.Categorical(um["event"].astype(object),
                                 categories=pd.Index(decode.UNMATCHED_EVENTS, dtype=object))
    um = um[SCHEMA.tables["unmatched"].names]
    tables = {"ranks": ranks, "comms": comms, "unmatched": um, "windows": windows,
              "files": files, "threads": threads,
              "callpaths": decode.callpaths_frame(defs.callpaths)}
    for name in SINGLE:
        tables[name] = pd.concat([x[name] for x in singles], ignore_index=True)
    infos: dict[str, dict] = {}
    for name, df in tables.items():
        infos[name] = cache._write_table(df, tmp, name, _Inline())
    for name in RANKED:
        infos[name] = _merge_infos([i[name] for i in infos_ranked])
    for name in ("collectives", "messages"):
        infos[name] = _merge_infos([i[name] for i in infos_last])

    props = _native.archive_properties(anchor)
    loc_rank = threads["rank"].to_numpy()
    meta = decode.trace_meta(defs, props, nranks, set(loc_rank[loc_trunc].tolist()),
                             {r for x in s for r in x.finalized}, int(loc_last.max(initial=0)),
                             sum(x.clock_offsets for x in s) > 0,
                             _native.Damage.concat([x.damage for x in s]))
    cache.write_manifest(tmp, {
        "sources": srcs, "version": version_of(anchor),
        "layout": cache.LAYOUT, "meta": dataclasses.asdict(meta),
        "tables": {name: infos[name] for name in cache.TABLES}})
