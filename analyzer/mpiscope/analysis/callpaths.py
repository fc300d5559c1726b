"""Which frame of a call path names a call: the first frame outside the MPI library and
outside any wrapper layer (docs/callpaths.md).

A call's path (`calls.callpath`, frames in `callpaths`, innermost first) starts at the code
that called MPI. Real codes call MPI through their own layer (a `message_passing` module,
`Comm*` classes, PETSc), so the innermost frame names the wrapper, never the place that
matters. The chosen frame skips, innermost first:

- frames in the MPI library or its language bindings (`MPI_*`, `PMPI_*`, `mpi_*`
  functions, `libmpi*`/`libmpich*` objects, mpi4py's extension);
- frames whose function or frame name matches a `skip_frames` glob (`message_passing::*`);
- detected wrappers: a function that, wherever it appears, calls only MPI (or other
  wrappers), and is reached from at least `WRAPPER_MIN_PATHS` distinct call paths (a
  path cut by the recorded depth is the same caller as a longer one it begins);
- library frames (`callpaths.library`: Python's standard library, installed packages,
  system headers), which are not the program's own code: a test's helper called by
  unittest's runner is named at the test's line, not at the runner's.

If every frame is skipped, the outermost of the program's own frames names the call
(where the path holds library frames), else the choice is made as if no frame were
library code, else the outermost recorded frame names it. `relabel` gives
the trace seen through that choice: `calls.callsite` becomes the chosen frame (or the
chosen frame and the full path, to group by path), so every per-call-site result
(statistics, wait states, findings, main loop) groups by it unchanged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase

import numpy as np
import pandas as pd

from mpiscope.archive.trace import Trace

WRAPPER_MIN_PATHS = 3  # distinct call paths (of callers) reaching a detected wrapper
GROUP_BY = ("frame", "path")
VIA = " via "
ARROW = " <- "
# the MPI library and its bindings: functions and objects (frame `object+0xOFF`)
_MPI_FUNCTION = re.compile(r"^(p?mpi_|mpi::|p?mpif_|mpi4py)", re.IGNORECASE)
_MPI_OBJECT = re.compile(r"^(lib(p?mpi|mpich|mpiscope|open-pal|open-rte)[^/]*\.so|"
                         r"MPI\.cpython)", re.IGNORECASE)


def parse_skip_frames(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """`"a::*,B*"` (or a list of such) -> ("a::*", "B*")."""
    if not text:
        return ()
    parts = [text] if isinstance(text, str) else list(text)
    return tuple(g.strip() for p in parts for g in p.split(",") if g.strip())


def in_mpi(frame: str, function: str) -> bool:
    """The frame is inside the MPI library or a binding of it (by its function; by the
    frame's own name only where the function is unknown: a user's `mpi_util.c:40` is
    not MPI's)."""
    if function:
        return bool(_MPI_FUNCTION.match(function) or _MPI_OBJECT.match(function))
    return bool(_MPI_FUNCTION.match(frame) or _MPI_OBJECT.match(frame))


def _matches(globs: Iterable[str], frame: str, function: str) -> bool:
    return any(fnmatchcase(function, g) or fnmatchcase(frame, g) for g in globs)


@dataclass
class CallPaths:
    """The call paths of a trace and the frame chosen to name each."""

    frames: dict[int, list[str]]  # path id -> frames, innermost first
    functions: dict[int, list[str]]  # path id -> function of each frame
    chosen: dict[int, int]  # path id -> index of the chosen frame
    skip_frames: tuple[str, ...] = ()
    wrappers: set[str] = field(default_factory=set)  # detected wrapper functions
    library: dict[int, list[bool]] = field(default_factory=dict)  # path id -> per frame

    @classmethod
    def of(cls, trace: Trace, skip_frames: Sequence[str] = (), detect: bool = True,
           used: Iterable[int] | None = None) -> CallPaths:
        """`used`: the path ids the calls use (`used_paths` of every rank's calls),
        when `trace.calls` is not the whole trace's."""
        cp = trace.callpaths
        frames: dict[int, list[str]] = {}
        functions: dict[int, list[str]] = {}
        library: dict[int, list[bool]] = {}
        if len(cp):
            cp = cp.sort_values(["callpath", "level"], kind="stable")
            has_library = "library" in cp.columns
            for pid, g in cp.groupby("callpath", sort=True):
                frames[int(pid)] = [str(f) for f in g["frame"]]
                functions[int(pid)] = [str(f) for f in g["function"]]
                library[int(pid)] = ([bool(x) for x in g["library"]] if has_library
                                     else [False] * len(g))
        used = sorted(set(used)) if used is not None else used_paths(trace.calls)
        globs = tuple(skip_frames)
        # the trace does not say its depth limit: a path that was cut has exactly that
        # many frames (frames left out, MPI's, are not counted), the longest there is
        depth = max((len(f) for f in frames.values()), default=0)
        wrappers = (_detect_wrappers({p: list(zip(frames[p], functions[p], strict=True))
                                      for p in used if p in frames}, globs, depth)
                    if detect else set())
        chosen = {p: _choose(frames[p], functions[p], globs, wrappers, library[p])
                  for p in frames}
        return cls(frames, functions, chosen, globs, wrappers, library)

    def path(self, pid: int) -> list[str]:
        return self.frames.get(pid, [])

    def frame(self, pid: int) -> str:
        """The chosen frame of path `pid` ("" if unknown)."""
        f = self.frames.get(pid)
        return f[self.chosen[pid]] if f else ""

    def label(self, pid: int, group_by: str) -> str:
        """What a call of path `pid` is grouped by: its chosen frame, or that frame and
        the whole path (`app.c:10 via comm.c:5 <- app.c:10 <- main.c:3`)."""
        if group_by == "path":
            return self.frame(pid) + VIA + ARROW.join(self.path(pid))
        return self.frame(pid)


def used_paths(calls: pd.DataFrame) -> list[int]:
    """The path ids `calls` use (a rank's share: its calls)."""
    if "callpath" not in calls.columns:
        return []
    ids = np.unique(calls["callpath"].to_numpy())
    return [int(i) for i in ids if i >= 0]


def _outside_mpi(frames: list[tuple[str, str]]) -> int:
    """Index of the first frame outside the MPI library (len if none)."""
    i = 0
    while i < len(frames) and in_mpi(*frames[i]):
        i += 1
    return i


def _name(frame: str, function: str) -> str:
    return function or frame


def _distinct_callers(tails: dict[tuple[str, ...], bool]) -> int:
    """How many different callers the caller tails (frames outside a function, innermost
    first; True: the path was cut by the depth limit) name. A cut tail is only the start
    of its real chain: one that begins another tail may be that same caller (a function
    reached through one more inner layer keeps one outer frame fewer), so it is not
    counted. A tail that ended on its own is its whole chain."""
    order = sorted(tails)
    n = 0
    for i, t in enumerate(order):
        # sorted: the tails that begin with t follow it directly
        longer = i + 1 < len(order) and order[i + 1][:len(t)] == t
        if not (tails[t] and longer):
            n += 1
    return n


def _detect_wrappers(paths: dict[int, list[tuple[str, str]]], globs: tuple[str, ...],
                     depth: int = 0) -> set[str]:
    """Functions that call only MPI (or wrappers) wherever they appear, reached from at
    least WRAPPER_MIN_PATHS distinct caller paths (`depth`: the recorded depth limit,
    the paths of that length were cut by it). Inner layers first, then the layers that
    call only them (a two-level wrapper), until nothing changes."""
    wrappers: set[str] = set()
    while True:
        callers: dict[str, dict[tuple[str, ...], bool]] = {}
        disqualified: set[str] = set()
        for frames in paths.values():
            cut = len(frames) >= depth > 0
            start = _outside_mpi(frames)
            for i in range(start, len(frames)):
                frame, function = frames[i]
                name = _name(frame, function)
                if name in wrappers or _matches(globs, frame, function):
                    continue
                inner_ok = all(_name(*f) in wrappers or _matches(globs, *f)
                               for f in frames[start:i])
                if not inner_ok:
                    disqualified.add(name)
                    continue
                outer = tuple(f for f, _fn in frames[i + 1:])
                if outer:  # the outermost recorded frame: its callers are unknown
                    tails = callers.setdefault(name, {})
                    # seen whole once, it is whole: a cut copy is no other caller
                    tails[outer] = tails.get(outer, True) and cut
        new = {n for n, c in callers.items()
               if n not in disqualified and len(c) >= WRAPPER_MIN_PATHS
               and _distinct_callers(c) >= WRAPPER_MIN_PATHS}
        if not new:
            return wrappers
        wrappers |= new


def _choose(frames: list[str], functions: list[str], globs: tuple[str, ...],
            wrappers: set[str], library: list[bool] | None = None) -> int:
    if not frames:
        return 0
    library = library or [False] * len(frames)
    own = [i for i, (frame, function) in enumerate(zip(frames, functions, strict=True))
           if not (in_mpi(frame, function) or _matches(globs, frame, function))]
    for i in own:
        if not library[i] and _name(frames[i], functions[i]) not in wrappers:
            return i
    if any(library):
        # the program's own frames are all wrappers: the outermost of them, never the
        # library code calling it (unittest's runner calling every test)
        mine = [i for i in own if not library[i]]
        if mine:
            return mine[-1]
    for i in own:  # library code only: chosen as if it were the program's
        if _name(frames[i], functions[i]) not in wrappers:
            return i
    return len(frames) - 1


def relabel(trace: Trace, paths: CallPaths, group_by: str = "frame") -> Trace:
    """The trace with each call's `callsite` replaced by what it is grouped by (its chosen
    frame, or that and its path): the same trace when no call has a path."""
    if group_by not in GROUP_BY:
        raise ValueError(f"group_by must be one of {', '.join(GROUP_BY)}")
    calls = trace.calls
    if not paths.frames or "callpath" not in calls.columns:
        return trace
    pid = calls["callpath"].to_numpy()
    if not (pid >= 0).any():
        return trace
    old = calls["callsite"]
    cats, new_codes = relabelled([str(c) for c in old.cat.categories],
                                 old.cat.codes.to_numpy().astype(np.int32), pid, paths,
                                 group_by)
    callsite = pd.Categorical.from_codes(new_codes, categories=pd.Index(cats, dtype=object),
                                         validate=False)
    calls = calls.assign(callsite=callsite)
    return replace(trace, calls=calls)


def relabelled(labels: list[str], codes: np.ndarray, pid: np.ndarray, paths: CallPaths,
               group_by: str = "frame") -> tuple[list[str], np.ndarray]:
    """`relabel` on codes: (labels, int32 code per call) of the call sites `codes` (into
    `labels`) of calls of path `pid` (-1: none) relabelled by their paths (the web UI's
    out-of-core window relabels the rows it reads with it)."""
    ids = sorted(paths.frames)
    if not ids:
        return labels, codes
    path_labels = [paths.label(p, group_by) for p in ids]
    cats = list(dict.fromkeys([*labels, *path_labels]))
    index = {c: i for i, c in enumerate(cats)}
    lut = np.full(max(ids) + 1, -1, np.int32)
    for p, lab in zip(ids, path_labels, strict=True):
        lut[p] = index[lab]
    known = (pid >= 0) & (pid < len(lut))
    new_codes = codes.copy()
    new_codes[known] = lut[pid[known]]
    new_codes[known & (new_codes < 0)] = codes[known & (new_codes < 0)]
    return cats, new_codes


def path_times(trace: Trace) -> pd.DataFrame:
    """function, callsite, callpath, ns: time per path among the calls grouped under
    each (function, callsite) (of a relabelled trace, or one rank's slice of it), for
    the calls that have a path."""
    calls = trace.calls
    empty = pd.DataFrame({"function": pd.Series(dtype=object),
                          "callsite": pd.Series(dtype=object),
                          "callpath": pd.Series(dtype=np.int64),
                          "ns": pd.Series(dtype=np.int64)})
    if "callpath" not in calls.columns:
        return empty
    pid = calls["callpath"].to_numpy()
    has = pid >= 0
    if not has.any():
        return empty
    df = pd.DataFrame({
        "f": calls["function"].cat.codes.to_numpy()[has],
        "c": calls["callsite"].cat.codes.to_numpy()[has],
        "callpath": pid[has],
        "ns": (calls["end"].to_numpy() - calls["start"].to_numpy())[has]})
    per = df.groupby(["f", "c", "callpath"], sort=False)["ns"].sum().reset_index()
    fcats = calls["function"].cat.categories
    ccats = calls["callsite"].cat.categories
    return pd.DataFrame({"function": [str(fcats[f]) for f in per["f"]],
                         "callsite": [str(ccats[c]) for c in per["c"]],
                         "callpath": per["callpath"].to_numpy().astype(np.int64),
                         "ns": per["ns"].to_numpy()})


def best_of(times: pd.DataFrame) -> dict[tuple[str, str], int]:
    """`best_paths` from `path_times` (of every rank, concatenated): per (function,
    callsite) the path of most time, the lowest path id among equals."""
    per = times.groupby(["function", "callsite", "callpath"], sort=False)["ns"].sum()
    per = per.reset_index().sort_values(["ns", "callpath"], ascending=[False, True],
                                        kind="stable")
    best = per.drop_duplicates(["function", "callsite"])
    return {(f, c): int(p) for f, c, p in zip(best["function"], best["callsite"],
                                              best["callpath"], strict=True)}


def best_paths(trace: Trace) -> dict[tuple[str, str], int]:
    """(function, callsite) -> the path id of most time among the calls grouped there
    (in a relabelled trace), for the calls that have a path."""
    return best_of(path_times(trace))


def callpath_of(paths: CallPaths, best: dict[tuple[str, str], int], function: str,
                label: str) -> tuple[str, list[str]]:
    """(chosen frame, frames innermost first) of the calls of `function` grouped under
    `label` (`best` from `best_paths` of the relabelled trace): the path of most time
    among them. Calls without a recorded path: their call site is the path."""
    pid = best.get((function, label))
    if pid is not None:
        return paths.frame(pid), paths.path(pid)
    site = label.split(VIA, 1)[0]
    return site, [site] if site else []


def name_sites(sites: pd.DataFrame, paths: CallPaths,
               best: dict[tuple[str, str], int]) -> pd.DataFrame:
    """Call-site statistics (stats.callsites of a relabelled trace) with each group's
    call site and `callpath` (frames, innermost first, of the path with most time)."""
    df = sites.copy()
    if not paths.frames:
        df["callpath"] = [[str(c)] if str(c) else [] for c in df["callsite"]]
        return df
    named = [callpath_of(paths, best, str(f), str(c))
             for f, c in zip(df["function"], df["callsite"], strict=True)]
    df["callsite"] = [c for c, _p in named]
    df["callpath"] = [p for _c, p in named]
    return df


def via(callpath: Sequence[str], callsite: str) -> str:
    """`via a <- b <- c` for a path deeper than its named frame, else ""."""
    if len(callpath) <= 1 and (not callpath or callpath[0] == callsite):
        return ""
    return "via " + ARROW.join(callpath)
