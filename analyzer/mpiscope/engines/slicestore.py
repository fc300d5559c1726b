"""Rank slices a Dask worker keeps between the passes of one analysis.

An analysis maps a function over every rank's slice some twenty times (wait states,
statistics, loops, critical path, findings: each pass needs the previous pass's combined
result). Building a slice from the Parquet cache costs more than most passes' work, so a
worker keeps the slices it built, as long as they fit in a share of its memory limit:

    slice = slicestore.get(session, (rank, "base"), build)   # built once per worker
    slicestore.clear()                                      # at the end of the analysis

The runner sends a rank to the same worker in every pass (`RankTasks`), so what a worker
keeps is what it is asked for again. Slices are admitted until the budget is full and then
kept, never evicted for another: every pass visits the ranks in the same order, so an
evicting cache would miss on every rank once the slices outgrow it, while this one keeps
serving the ranks it holds. A slice larger than the budget is built for each pass, as
before; when the worker's memory nears its limit (a pass needing more room than the
budget left) the kept slices are dropped: memory stays bounded by the worker's limit, the
store only saves time.
Another session's slices are dropped when a new session asks.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import TypeVar

import pandas as pd

T = TypeVar("T")

# share of the worker's memory limit the kept slices may take: the rest is left to the
# task at hand (a pass holds a slice and its intermediate arrays, a few times its size)
SHARE = 0.25
# without a limit (a plain process, a worker started without one)
DEFAULT_BUDGET = 512 * 2**20
# above this share of the limit (process memory, as Dask measures it) the kept slices are
# dropped before the next one is built: a pass that needs more room than the budget left
# gets it, and Dask never pauses the worker (at 80%) for memory only this store holds
SHED = 0.6

_lock = threading.Lock()
_session: str | None = None
_items: dict[Hashable, object] = {}
_bytes = 0


def nbytes(value: object) -> int:
    """Memory a kept value holds: its DataFrames' columns (shallow: object columns are
    only in the small whole-trace tables), recursively through dataclass-like values."""
    seen: set[int] = set()

    def size(v: object) -> int:
        if id(v) in seen:
            return 0
        seen.add(id(v))
        if isinstance(v, pd.DataFrame):
            return int(v.memory_usage(index=False, deep=False).sum())
        if hasattr(v, "__dict__"):
            return sum(size(x) for x in vars(v).values())
        if hasattr(v, "__dataclass_fields__"):
            return sum(size(getattr(v, f)) for f in v.__dataclass_fields__)
        return 0

    return size(value)


def _limit() -> int | None:
    """The memory limit of the Dask worker this runs on (None: not on one, or no limit)."""
    try:
        from distributed import get_worker

        return get_worker().memory_manager.memory_limit or None
    except (ImportError, ValueError, AttributeError):
        return None


def budget() -> int:
    """Bytes this process may keep: `SHARE` of its Dask worker's memory limit."""
    limit = _limit()
    return int(limit * SHARE) if limit else DEFAULT_BUDGET


def _crowded() -> bool:
    """Whether this worker's process memory is above `SHED` of its limit."""
    limit = _limit()
    if not limit:
        return False
    import psutil

    return psutil.Process().memory_info().rss > SHED * limit


def get(session: str, key: Hashable, build: Callable[[], T]) -> T:
    """The value kept for `key` in `session`, else `build()` (kept if it fits)."""
    global _session, _bytes
    with _lock:
        if session != _session:
            _items.clear()
            _session, _bytes = session, 0
        if key in _items:
            return _items[key]  # type: ignore[return-value]
        if _items and _crowded():
            _items.clear()
            _bytes = 0
    value = build()
    size = nbytes(value)
    with _lock:
        if (session == _session and key not in _items and _bytes + size <= budget()
                and not _crowded()):
            _items[key] = value
            _bytes += size
    return value


def clear() -> int:
    """Drop every kept value; the bytes freed."""
    global _session, _bytes
    with _lock:
        freed = _bytes
        _items.clear()
        _session, _bytes = None, 0
    return freed


def held() -> tuple[str | None, int, int]:
    """(session, values kept, bytes kept) of this process."""
    with _lock:
        return _session, len(_items), _bytes
