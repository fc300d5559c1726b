"""A Dask client: the user's cluster (`--scheduler ADDRESS`), else a local one.

A local cluster runs processes with one thread each (the native reader and pandas hold
the GIL for long stretches: threads would not run side by side), `workers` of them with
`memory_limit` each (Dask's own meaning: spill near 60%, pause at 80%, restart at 95%).

Every worker of either kind gets `SystemAllocator`: pyarrow's default pool (jemalloc)
keeps the memory Parquet reads free, so a worker reading rank after rank grew to its
limit and paused for good (10^8 events: 3.0 GB RSS holding 0.09 GB of data; with the
system allocator the same analysis ran in 0.3-0.4 GB).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeVar

from mpiscope.errors import UserError

T = TypeVar("T")

# Dask settings of a local cluster (its nannies hand them to the workers): without a
# dashboard nothing reads the statistical profiler (a stack sample every 10 ms) or a
# 500 ms system monitor, yet they cost every worker ~4% of a core, idle or busy
# (2 idle workers, 30 s: 2.29 CPU s with Dask's defaults, 0.53 with these; the memory
# monitor that enforces --memory-limit keeps its 100 ms)
QUIET = {"distributed.worker.profile.enabled": False,
         "distributed.admin.system-monitor.interval": "2s",
         "distributed.admin.tick.interval": "200ms"}


@dataclass(frozen=True)
class ClusterSpec:
    scheduler: str | None = None  # address of a running scheduler (dask-mpi, dask-jobqueue)
    workers: int = 2
    memory_limit: str = "2GB"  # per worker, Dask's notation ("256MB", "2GB", "auto")


def _plugin():
    from distributed.diagnostics.plugin import WorkerPlugin

    class SystemAllocator(WorkerPlugin):
        name = "mpiscope-system-allocator"

        def setup(self, worker) -> None:  # noqa: ANN001 - a distributed.Worker
            import pyarrow as pa

            pa.set_memory_pool(pa.system_memory_pool())

    return SystemAllocator()


def workers(client) -> dict[str, dict]:
    """The scheduler's workers now (address -> info with "status", "memory_limit"...),
    asked for directly: `client.scheduler_info()` returns a cache that the client's
    periodic refresh may overwrite in between with one that lists no worker."""
    return client.sync(client.scheduler.identity, n_workers=-1).get("workers", {})


def _same(obj: T) -> T:
    return obj


def shared(client, obj: T, retries: int = 3):
    """A future of `obj` for many tasks to take as an argument, sent to the scheduler
    once, that survives its worker's death: a task's result, which the scheduler
    computes again when it is lost. Not `client.scatter(..., broadcast=True)`: Dask's
    memory manager drops all but one replica of scattered data within seconds, and data
    scattered to a worker that dies cannot be recovered (the tasks needing it fail)."""
    return client.submit(_same, obj, pure=False, retries=retries)


@contextlib.contextmanager
def connect(spec: ClusterSpec | None = None) -> Iterator[object]:
    """A `distributed.Client` for the spec's scheduler, or on a LocalCluster started for
    this block and closed after it."""
    import dask
    from distributed import Client, LocalCluster

    spec = spec or ClusterSpec()
    if spec.scheduler:
        try:
            client = Client(spec.scheduler, timeout="20s")
        except (OSError, TimeoutError) as err:
            raise UserError(spec.scheduler, f"cannot reach the Dask scheduler ({err})") from None
        with client:
            client.register_plugin(_plugin())
            yield client
        return
    if spec.workers < 1:
        raise UserError("--workers", f"{spec.workers}: at least 1 worker")
    # a local cluster's start and stop chatter is not the user's business
    logging.getLogger("distributed").setLevel(logging.ERROR)
    with dask.config.set(QUIET), \
            LocalCluster(n_workers=spec.workers, threads_per_worker=1, processes=True,
                         memory_limit=spec.memory_limit, dashboard_address=None) as lc, \
            Client(lc) as client:
        client.register_plugin(_plugin())
        yield client
