"""A run of 4 ranks on hosts with fewer CPUs, by construction (TraceBuilder): the tracer's
MPISCOPE::HOST_CPUS says how many CPUs each host had, so the analysis warns that ranks
took turns on them and marks the findings timing drives — whatever this machine's
scheduler did, which no test depends on.

    tb = imbalanced(["node0"] * 4, "2")   # 4 ranks on node0, which has 2 CPUs
    trace_dir = tb.write(tmp_path / "trace")
"""

from __future__ import annotations

from collections.abc import Sequence

from mpiscope_testing.tracegen import TraceBuilder

US = 1000
ITERATIONS = 10


def imbalanced(hosts: list[str], cpus: str | None,
               init_us: Sequence[int] = (10, 10, 10, 10),
               run_delay_us: Sequence[tuple[int, int]] | None = None) -> TraceBuilder:
    """4 ranks, 10 iterations of 1 ms after the last rank leaves MPI_Init (`init_us`: when
    each rank does): rank 3 computes 600 µs longer before each Allreduce (a load imbalance
    by construction); MPI_Finalize 10 µs long right after. `cpus`: MPISCOPE::HOST_CPUS
    (one count per host, None: not recorded). `run_delay_us`: per rank, how long it was
    runnable but waiting for a CPU in the computation before each Allreduce and in each
    Allreduce, as the tracer samples it (at MPI_Init's Leave, each Allreduce's Enter and
    Leave, MPI_Finalize's Enter; None: not sampled)."""
    tb = TraceBuilder(ranks=4, hosts=hosts)
    if cpus is not None:
        tb.properties["MPISCOPE::HOST_CPUS"] = cpus
    start = max(init_us)
    end = start + ITERATIONS * 1000
    sampled = run_delay_us is not None
    delay = [0] * 4  # each rank's cumulative run-queue delay, ns

    def sample(r: int, add_us: int = 0) -> int | None:
        delay[r] += add_us * US
        return delay[r] if sampled else None

    for r in range(4):
        tb.call(r, 0, init_us[r] * US, "MPI_Init", callsite="app.c:1",
                run_delay=(None, sample(r)))
    for i in range(ITERATIONS):
        b = (start + 1000 * i) * US
        for r in range(4):
            compute, inside = run_delay_us[r] if run_delay_us is not None else (0, 0)
            at_enter = sample(r, compute)
            tb.collective(r, b + (900 if r == 3 else 300) * US, b + 910 * US,
                          "MPI_Allreduce", sent=8, received=8, callsite="app.c:5",
                          run_delay=(at_enter, sample(r, inside)))
    for r in range(4):
        tb.call(r, end * US, (end + 10) * US, "MPI_Finalize", callsite="app.c:9",
                run_delay=(sample(r), None))
    return tb
