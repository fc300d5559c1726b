"""A Cube-like view of MPI time: metric × call path × rank.

The call tree is made of the recorded call paths (OTF2 calling contexts), outermost frame
first, with the MPI function as the leaf under the frame that called it: a node's value
is inclusive (everything called below it). Frames inside the MPI library are left out
(callpaths.in_mpi), as they are for call sites. A call without a recorded path hangs
under its call site (or `(unknown)`). Each node's value per rank is kept, so a view can
show how a path's cost is spread over the ranks (Cube's system pane).

Built from a window's profile by (callpath, callsite, function, rank)
(analysis.window.Window.profile), so the tree follows the zoom and the rank set.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from mpiscope.analysis.callpaths import CallPaths, in_mpi

# the metrics a node has (profile columns), with what the view calls them
METRICS = {"time_s": "time", "wait_s": "waiting", "calls": "calls", "bytes": "bytes"}
BY = ("callpath", "callsite", "function", "rank")  # the profile the tree is built from
UNKNOWN = "(unknown)"


@dataclass
class CallTree:
    """Nodes in creation order (a parent before its children)."""

    label: list[str]
    parent: np.ndarray  # int64, -1 for a root
    leaf: np.ndarray  # bool: an MPI function (not a frame)
    values: pd.DataFrame  # node, rank, and the METRICS columns (inclusive)
    num_ranks: int

    def __len__(self) -> int:
        return len(self.label)

    def total(self, metric: str) -> np.ndarray:
        """Each node's value summed over ranks."""
        v = self.values
        return np.bincount(v["node"].to_numpy(), weights=v[metric].to_numpy(np.float64),
                           minlength=len(self))

    def children(self, node: int) -> np.ndarray:
        """The children of `node` (-1: the roots), in creation order."""
        return np.flatnonzero(self.parent == node)

    def per_rank(self, node: int, metric: str) -> np.ndarray:
        """The node's value on each rank (0 where it has none)."""
        v = self.values[self.values["node"] == node]
        out = np.zeros(self.num_ranks)
        out[v["rank"].to_numpy()] = v[metric].to_numpy(np.float64)
        return out

    def path(self, node: int) -> list[str]:
        """The labels from the root down to `node`."""
        out = []
        while node >= 0:
            out.append(self.label[node])
            node = int(self.parent[node])
        return out[::-1]


def _frame_label(frame: str, function: str) -> str:
    """A frame as Cube names a call site: its function, and where in it."""
    named = frame.startswith(function) and frame[len(function):][:1] in ("+", "(")
    if function and not named:  # `file.c:LINE` or `object+0x..`: say whose it is
        return f"{function} · {frame}"
    return frame or function or UNKNOWN


def _frames(paths: CallPaths, pid: int, callsite: str) -> list[str]:
    """The labels of a call's frames outside MPI, outermost first."""
    frames, functions = paths.frames.get(pid), paths.functions.get(pid)
    if not frames:
        return [callsite or UNKNOWN]
    outside = [(f, fn) for f, fn in zip(frames, functions or [""] * len(frames), strict=True)
               if not in_mpi(f, fn)]
    return [_frame_label(f, fn) for f, fn in reversed(outside)] or [callsite or UNKNOWN]


def build(profile: pd.DataFrame, paths: CallPaths, num_ranks: int) -> CallTree:
    """The tree of a profile by BY (Window.profile)."""
    label: list[str] = []
    parent: list[int] = []
    leaf: list[bool] = []
    index: dict[tuple[int, str, bool], int] = {}

    def node(up: int, text: str, is_leaf: bool) -> int:
        key = (up, text, is_leaf)
        got = index.get(key)
        if got is None:
            got = index[key] = len(label)
            label.append(text)
            parent.append(up)
            leaf.append(is_leaf)
        return got

    # each distinct (path, call site, function): its leaf and every node above it
    sites = profile[["callpath", "callsite", "function"]].drop_duplicates()
    chains: dict[tuple[int, str, str], list[int]] = {}
    for pid, site, fn in sites.itertuples(index=False):
        up, chain = -1, []
        for text in _frames(paths, int(pid), str(site)):
            up = node(up, text, False)
            chain.append(up)
        chain.append(node(up, str(fn), True))
        chains[(int(pid), str(site), str(fn))] = chain
    keys = list(zip(profile["callpath"].astype(int), profile["callsite"].astype(str),
                    profile["function"].astype(str), strict=True))
    lengths = np.array([len(chains[k]) for k in keys], dtype=np.int64)
    nodes = np.fromiter((n for k in keys for n in chains[k]), dtype=np.int64,
                        count=int(lengths.sum()))
    rows = np.repeat(np.arange(len(profile)), lengths)
    expanded = pd.DataFrame({"node": nodes,
                             "rank": profile["rank"].to_numpy(np.int64)[rows],
                             **{m: profile[m].to_numpy()[rows] for m in METRICS}})
    values = expanded.groupby(["node", "rank"], as_index=False, sort=True)[
        list(METRICS)].sum()
    return CallTree(label, np.array(parent, dtype=np.int64), np.array(leaf, dtype=bool),
                    values, num_ranks)
