"""The trace of a job that died, read as one trace from the per-rank archives it left.

A job that calls MPI_Abort or ends without MPI_Finalize gets no `DIR/traces.otf2`: nothing
collective is possible any more, so each rank that can still run code writes its own
archive `DIR/rank<N>/traces.otf2` (interposer/README.md). Each defines every rank but
holds the events of rank N only, with its own call sites, its own communicator refs and
its own clock offset. Here they become one `Trace`:

- each rank's calls, regions, point-to-point events and flushes come from its own
  archive (read by the normal reader), concatenated rank by rank with one set of
  categories and call ids renumbered (p2p rows point at calls by id);
- times are put on one base: every archive's timestamps are relative to its own
  `global_offset` (its first event, on rank 0's clock), so each part is shifted by the
  difference of the offsets;
- communicators are identified by the id agreed at their creation, which every member
  keeps; the archives' OTF2 refs differ (each numbers only the communicators its rank
  belongs to), so their local id maps (OTF2_MAPPING_COMM) translate them;
- messages and collective instances are then matched across ranks with the pandas
  matchers (matching.py): the native reader matches within one archive only;
- no rank finalized, so all are `truncated_ranks`; a rank that left no readable archive
  (killed by a signal before it could write one) is an empty row with host "unknown",
  and the `warnings` say so where its archive was unreadable or its crash-safe log could
  not be recovered.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from mpiscope.archive import cache, decode, matching
from mpiscope.archive.schema import SCHEMA
from mpiscope.archive.trace import Trace, TraceMeta
from mpiscope.errors import UserError

_RANK_DIR = re.compile(r"rank(\d+)")
UNKNOWN_HOST = "unknown"  # what the interposer writes for ranks it knows nothing about
LIVE_DIR = ".mpiscope-live"  # crash-safe logs of ranks killed outright (recover.py)
UNRECOVERED = "unrecovered"  # rank<N>.unrecovered beside a log recovery refused: why


def _rank_dirs(trace_dir: Path) -> dict[int, Path]:
    found = {}
    for d in Path(trace_dir).glob("rank*"):
        m = _RANK_DIR.fullmatch(d.name)
        if m and d.is_dir():
            found[int(m.group(1))] = d
    return dict(sorted(found.items()))


def _complete(d: Path, rank: int) -> bool:
    """The interposer moves the rank's event file into its archive as the last step of
    writing it; a rank killed before that left a half-written archive."""
    return (d / "traces.otf2").is_file() and (d / "traces" / f"{rank}.evt").is_file()


def archives(trace_dir: Path) -> dict[int, Path]:
    """World rank -> anchor of each complete per-rank archive in `trace_dir`
    (DIR/rank<N>/traces.otf2), in rank order."""
    return {rank: d / "traces.otf2" for rank, d in _rank_dirs(trace_dir).items()
            if _complete(d, rank)}


def incomplete(trace_dir: Path) -> list[int]:
    """Ranks that began writing their archive but were killed before finishing it."""
    return [rank for rank, d in _rank_dirs(trace_dir).items() if not _complete(d, rank)]


def unrecovered(trace_dir: Path) -> dict[int, str]:
    """Ranks whose crash-safe log is still there after recovery was tried (recover.py):
    rank -> why it could not be recovered. Their events are in no trace."""
    live = Path(trace_dir) / LIVE_DIR
    found = {}
    for note in sorted(live.glob(f"rank*.{UNRECOVERED}")) if live.is_dir() else []:
        m = _RANK_DIR.fullmatch(note.name.removesuffix(f".{UNRECOVERED}"))
        if m and (live / f"rank{m.group(1)}.defs").exists():
            try:
                found[int(m.group(1))] = note.read_text(errors="replace").strip()
            except OSError:
                found[int(m.group(1))] = f"rank {m.group(1)}: not recovered"
    return found


def unrecovered_warnings(trace_dir: Path) -> list[str]:
    """The `warnings` lines for the ranks unrecovered() names."""
    return [f"rank {rank} left a crash-safe log that could not be recovered, so the analysis "
            f"has none of its events ({why})" for rank, why in unrecovered(trace_dir).items()]


def is_salvaged(path: Path) -> bool:
    """A directory without traces.otf2 that holds per-rank archives of a job that died."""
    return path.is_dir() and not (path / "traces.otf2").exists() and bool(archives(path))


def num_ranks(anchor: Path) -> int:
    """How many ranks the job had (every per-rank archive defines them all)."""
    return len(decode.Definitions(anchor).locations)


@dataclass
class _Part:
    """One rank's archive, read on its own."""

    rank: int
    anchor: Path
    trace: Trace
    offset_ns: int  # its global_offset (its first timestamp, on rank 0's clock) in ns
    end_ns: int  # its last timestamp on the same clock
    comm_ids: dict[int, int]  # comm ref in this archive -> id agreed at creation


def _local_comm_ids(anchor: Path, rank: int) -> dict[int, int]:
    """Comm ref of the archive's definitions -> id agreed when the communicator was created,
    from the OTF2 id map in rank `rank`'s local definitions (it maps the other way)."""
    import _otf2  # the otf2 package's low-level binding of libotf2

    ids: dict[int, int] = {}

    def on_mapping(_user: object, kind: object, idmap: object) -> None:
        if kind == _otf2.MAPPING_COMM:
            _otf2.IdMap_Traverse(idmap, lambda agreed, ref, out: out.__setitem__(ref, agreed),
                                 ids)

    rd = _otf2.Reader_Open(str(anchor))
    try:
        _otf2.Reader_SetSerialCollectiveCallbacks(rd)
        _otf2.Reader_OpenDefFiles(rd)
        dr = _otf2.Reader_GetDefReader(rd, rank)
        cbs = _otf2.DefReaderCallbacks_New()
        try:
            _otf2.DefReaderCallbacks_SetMappingTableCallback(cbs, on_mapping)
            _otf2.Reader_RegisterDefCallbacks(rd, dr, cbs, None)
            _otf2.Reader_ReadAllLocalDefinitions(rd, dr)
        finally:
            _otf2.DefReaderCallbacks_Delete(cbs)
        _otf2.Reader_CloseDefReader(rd, dr)
        _otf2.Reader_CloseDefFiles(rd)
    finally:
        _otf2.Reader_Close(rd)
    return ids


def _read_part(rank: int, anchor: Path) -> _Part:
    defs = decode.Definitions(anchor)
    if not 0 <= rank < len(defs.locations):
        raise UserError(str(anchor.parent), f"defines {len(defs.locations)} ranks, not rank "
                                            f"{rank}")
    trace = decode.build_archive(anchor, defs)
    try:
        comm_ids = _local_comm_ids(anchor, int(defs.locations[rank]))
    except Exception as err:  # the otf2 package raises its own error types
        raise UserError(str(anchor.parent), f"corrupt OTF2 local definitions: {err}") from None
    scale = 1e9 / defs.resolution
    offset = int(round(defs.offset * scale))
    return _Part(rank, anchor, trace, offset, offset + int(round(defs.length * scale)),
                 comm_ids)


def _same_run(parts: list[_Part]) -> list[_Part]:
    """The parts written by the newest run. The interposer leaves rank<N>/ directories of
    an earlier job that died in the same DIR; the ranks of one run all pass a barrier in
    MPI_Init, so every one's time span contains that moment, while an earlier run's
    spans ended before the newer run began."""
    newest = max(parts, key=lambda p: p.anchor.stat().st_mtime_ns)
    return [p for p in parts if p.offset_ns <= newest.end_ns and p.end_ns >= newest.offset_ns
            and p.trace.meta.num_ranks == newest.trace.meta.num_ranks]


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Row-wise concatenation keeping every categorical column categorical (the parts'
    category lists differ: each archive names only the functions and call sites it saw)."""
    cols: dict[str, object] = {}
    for name, dtype in frames[0].dtypes.items():
        if isinstance(dtype, pd.CategoricalDtype):
            u = union_categoricals([f[name].array for f in frames])
            # object categories, as the reader makes them (the union infers str)
            cols[name] = pd.Categorical.from_codes(
                u.codes, categories=pd.Index(list(u.categories), dtype=object), validate=False)
        else:
            cols[name] = np.concatenate([f[name].to_numpy() for f in frames])
    return pd.DataFrame(cols, copy=False)


def _with_dtypes(df: pd.DataFrame, table: str) -> pd.DataFrame:
    """The native reader's column types (the pandas matchers widen some)."""
    return df.astype({c.name: c.dtype for c in SCHEMA.tables[table].native
                      if c.name in df and c.dtype != "category"})


def _merge_comms(parts: list[_Part]) -> tuple[pd.DataFrame, list[np.ndarray]]:
    """One communicator table for all parts, and per part its comm ref -> merged ref."""
    found: dict[object, dict] = {}  # agreed id -> definition (world and self: their refs)
    for p in parts:
        for row in p.trace.comms.itertuples(index=False):
            ref = int(row.comm)
            key = ref if ref in (0, 1) else p.comm_ids.get(ref, (p.rank, ref))
            if key in found:
                continue
            parent = int(row.parent)
            parent_key = (parent if parent in (-1, 0, 1)
                          else p.comm_ids.get(parent, (p.rank, parent)))
            named = row.name if row.name != f"comm {ref}" else None  # MPI_Comm_set_name's
            found[key] = {"name": named, "members": list(row.members), "self": row.size == 1
                          and not len(row.members), "parent": parent_key}
    # refs 0 and 1 as before, then the others by agreed id with parents first
    order: list[object] = [k for k in (0, 1) if k in found]

    def place(key: object, seen: set) -> None:
        if key in order or key in seen or key not in found:
            return
        seen.add(key)
        place(found[key]["parent"], seen)
        order.append(key)

    # ids the archives did not map (no id map) sort last, by (rank, ref)
    for key in sorted((k for k in found if k not in (0, 1)),
                      key=lambda k: (1, *k) if isinstance(k, tuple) else (0, k, 0)):
        place(key, set())
    merged = {key: i for i, key in enumerate(order)}
    rows = []
    for key in order:
        c = found[key]
        ref = merged[key]
        rows.append({"comm": ref, "name": c["name"] or f"comm {ref}",
                     "size": 1 if c["self"] else len(c["members"]), "members": c["members"],
                     "parent": merged.get(c["parent"], -1)})
    comms = pd.DataFrame(rows, columns=SCHEMA.tables["comms"].names)
    luts = []
    for p in parts:
        refs = p.trace.comms["comm"].to_numpy()
        lut = np.arange(int(refs.max(initial=1)) + 1, dtype=np.int32)
        for ref in map(int, refs):
            key = ref if ref in (0, 1) else p.comm_ids.get(ref, (p.rank, ref))
            lut[ref] = merged[key]
        luts.append(lut)
    return comms, luts


def _merge_callpaths(parts: list[_Part]) -> tuple[pd.DataFrame, list[np.ndarray]]:
    """One `callpaths` table for all ranks (equal chains of frames are one path, as the
    interposer unifies them at rank 0), and per part its path id -> merged id."""
    paths: list[list[decode.Frame]] = []
    ids: dict[tuple[str, ...], int] = {}
    luts = []
    for p in parts:
        cp = p.trace.callpaths
        lut = np.full(int(cp["callpath"].max()) + 1 if len(cp) else 0, -1, np.int32)
        for pid, g in cp.sort_values(["callpath", "level"]).groupby("callpath"):
            frames = list(zip(g["frame"].astype(str), g["function"].astype(str),
                              g["library"].astype(bool), strict=True))
            key = tuple(f[0] for f in frames)
            if key not in ids:
                ids[key] = len(paths)
                paths.append(frames)
            lut[int(pid)] = ids[key]
        luts.append(lut)
    return decode.callpaths_frame(paths), luts


def _remap(values: np.ndarray, lut: np.ndarray) -> np.ndarray:
    inside = (values >= 0) & (values < len(lut))
    return np.where(inside, lut[np.clip(values, 0, len(lut) - 1)], values).astype(values.dtype)


def _part_tables(p: _Part, shift: int, lut: np.ndarray, first_call: int,
                 first_region: int) -> tuple[pd.DataFrame, ...]:
    """Rank p's calls, p2p events, regions and flushes, on the common time base, with
    merged communicator refs and call ids counted on from `first_call`/`first_region`."""
    t = p.trace
    calls = t.calls[t.calls["rank"] == p.rank].copy()  # the other ranks' are empty anyway
    old_ids = calls["call"].to_numpy()
    calls["call"] = np.arange(first_call, first_call + len(calls), dtype=np.int64)
    calls["comm"] = _remap(calls["comm"].to_numpy(), lut)
    # p2p rows name their enclosing call by row id: old id -> new id
    new_id = np.full(len(t.calls) + 1, -1, np.int64)  # [-1] stays -1 (outside MPI calls)
    new_id[old_ids] = calls["call"].to_numpy()
    p2p = t.p2p[t.p2p["rank"] == p.rank].copy()
    p2p["call"] = new_id[p2p["call"].to_numpy()]
    p2p["comm"] = _remap(p2p["comm"].to_numpy(), lut)
    p2p["time"] += shift
    regions = t.regions[t.regions["rank"] == p.rank].copy()
    regions["call"] = np.arange(first_region, first_region + len(regions), dtype=np.int64)
    flushes = t.flushes[t.flushes["rank"] == p.rank].copy()
    for df in (calls, regions, flushes):
        df["start"] += shift
        df["end"] += shift
    return calls, p2p, regions, flushes


def build(trace_dir: Path, progress: decode.Progress | None = None) -> Trace:
    """Read every DIR/rank<N>/traces.otf2 and merge them into one trace (no cache)."""
    say = progress or (lambda _msg: None)
    found = archives(trace_dir)
    parts: list[_Part] = []
    problems: list[str] = []
    for i, (rank, anchor) in enumerate(found.items()):
        say(f"rank {rank} ({i + 1} of {len(found)} per-rank traces)")
        try:
            parts.append(_read_part(rank, anchor))
        except UserError as err:  # e.g. killed while writing it: read the others
            problems.append(f"{anchor.parent.name}: {err.problem}")
    if not parts:
        raise UserError(str(trace_dir), "the job ended without MPI_Finalize and none of "
                        f"the per-rank traces it left is readable ({'; '.join(problems)})")
    say("merging ranks")
    parts = _same_run(parts)
    nranks = parts[0].trace.meta.num_ranks
    base = min(p.offset_ns for p in parts)
    comms, luts = _merge_comms(parts)

    tables = []
    ncalls = nregions = 0
    callpaths, path_luts = _merge_callpaths(parts)
    for p, lut, path_lut in zip(parts, luts, path_luts, strict=True):
        tables.append(_part_tables(p, p.offset_ns - base, lut, ncalls, nregions))
        part_calls = tables[-1][0]
        ids = part_calls["callpath"].to_numpy()
        known = (ids >= 0) & (ids < len(path_lut))
        merged_ids = np.full(len(ids), -1, np.int32)
        merged_ids[known] = path_lut[ids[known]]
        part_calls["callpath"] = merged_ids
        ncalls += len(tables[-1][0])
        nregions += len(tables[-1][2])
    calls, p2p, regions, flushes = ([t[i] for t in tables] for i in range(4))
    calls_df = _concat(calls).reset_index(drop=True)
    p2p_df = _concat(p2p).reset_index(drop=True)

    say("matching messages")
    messages, unmatched = matching.match_messages(p2p_df, calls_df)
    messages = _with_dtypes(messages.sort_values(["send_rank", "send_time"], kind="stable")
                            .reset_index(drop=True), "messages")
    unmatched = _with_dtypes(unmatched.sort_values(["rank", "call"], kind="stable")
                             .reset_index(drop=True), "unmatched")
    unmatched["event"] = pd.Categorical(unmatched["event"].astype(object),
                                        categories=pd.Index(decode.UNMATCHED_EVENTS,
                                                            dtype=object))
    collectives = matching.collectives(calls_df)[decode.COLLECTIVE_COLUMNS]

    by_rank = {p.rank: p for p in parts}
    hosts, first, last, events = [], [], [], []
    for rank in range(nranks):
        p = by_rank.get(rank)
        row = p.trace.ranks.iloc[rank] if p else None
        hosts.append(str(row["host"]) if p else UNKNOWN_HOST)
        shift = p.offset_ns - base if p else 0
        first.append(int(row["first_ns"]) + shift if p else 0)
        last.append(int(row["last_ns"]) + shift if p else 0)
        events.append(int(row["events"]) if p else 0)
    ranks = pd.DataFrame({
        "rank": np.arange(nranks, dtype=np.int32),
        "host": pd.Categorical(hosts, categories=pd.Index(sorted(set(hosts)), dtype=object)),
        "location": np.arange(nranks, dtype=np.int64),
        "first_ns": np.asarray(first, np.int64),
        "last_ns": np.asarray(last, np.int64),
        "events": np.asarray(events, np.int64),
    })
    metas = [p.trace.meta for p in parts]
    meta = TraceMeta(
        program=metas[0].program, cmdline=metas[0].cmdline, mpi_library=metas[0].mpi_library,
        start_time=min(m.start_time for m in metas), creator=metas[0].creator,
        num_ranks=nranks, duration_ns=max(last, default=0),
        timer_resolution=1_000_000_000,  # every part was converted to ns above
        clock_corrected=all(m.clock_corrected for m in metas),
        truncated_ranks=list(range(nranks)),  # none finalized
        warnings=list(dict.fromkeys([*(w for m in metas for w in m.warnings), *(
            f"{p}: unreadable, so the analysis has none of its events" for p in problems)])),
    )
    return Trace(Path(trace_dir), meta, ranks, comms, calls_df, _concat(regions)
                 .reset_index(drop=True), p2p_df, messages, collectives,
                 _concat(flushes).reset_index(drop=True), unmatched, callpaths=callpaths)


def cache_key(trace_dir: Path) -> str:
    """Cache version key that changes with any per-rank archive: cache.fingerprint(DIR)
    only covers archives directly in DIR, so each rank<N>/ archive's own fingerprint
    goes into the key."""
    parts = [f"{a.parent.name}:{cache.fingerprint(a.parent)}" for a in archives(trace_dir)
             .values()]
    digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]
    return f"{decode.READER_VERSION}:salvaged:{digest}"


def load(trace_dir: Path, *, use_cache: bool = True,
         progress: decode.Progress | None = None) -> Trace:
    """The merged trace, from the Parquet cache in DIR when it is current."""
    key = cache_key(trace_dir) if use_cache else ""
    trace = cache.load_or_build(trace_dir, key, lambda: build(trace_dir, progress),
                                use_cache=use_cache, progress=progress,
                                anchors=list(archives(trace_dir).values()))
    # not cached: whether a log is still unrecovered changes without the archives changing
    trace.meta.warnings = [*trace.meta.warnings, *(
        w for w in unrecovered_warnings(trace_dir) if w not in trace.meta.warnings)]
    return trace
