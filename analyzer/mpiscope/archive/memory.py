"""What reading a trace may take of this machine's memory.

The pandas engine's peak is planned from the definitions' event counts (engines/choose.py)
before anything is read. A trace of polling calls recorded one by one
(`MPISCOPE_POLL=all`, or another tool) keeps far fewer events than it holds: the reader
merges idle polling visits as the tracer does (interposer/README.md, "Polling"). Such a
trace is read with a budget instead: the reader stops, in one line, as soon as the events
it keeps would need more memory than is available — never grows until the kernel's OOM
killer ends it, or others.
"""

from __future__ import annotations

from pathlib import Path

# Peak resident memory of `mpiscope analyze`, measured with mpiscope-synth traces of 2
# ranks (2 x 10^4, 4 x 10^6 and 10^7 events; docs/dask.md, "Planning memory"):
PANDAS_BASE_BYTES = 200 * 2**20  # 174 MiB: the process with a tiny trace
PANDAS_BYTES_PER_EVENT = 190  # 196 B/event at 4 x 10^6 over the base; 174 B in all at 10^7


def available_memory() -> int:
    """Bytes this process may still take: MemAvailable, or less where a cgroup (v2)
    limit leaves less (a batch job's allocation, a container)."""
    import psutil

    avail = int(psutil.virtual_memory().available)
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        current = int(Path("/sys/fs/cgroup/memory.current").read_text())
        if limit != "max":
            avail = min(avail, max(int(limit) - current, 0))
    except (OSError, ValueError):
        pass
    return avail


def pandas_bytes(events: int) -> int:
    """The pandas engine's planned peak for a trace keeping `events` events."""
    return PANDAS_BASE_BYTES + events * PANDAS_BYTES_PER_EVENT


def kept_events_budget(available: int | None = None) -> int:
    """Most events an analysis in this process can keep in the memory available now (at
    least 1: a budget of 0 would mean none)."""
    avail = available_memory() if available is None else available
    return max((avail - PANDAS_BASE_BYTES) // PANDAS_BYTES_PER_EVENT, 1)


def gib(n: int) -> str:
    return f"{n / 2**30:.1f} GiB"
