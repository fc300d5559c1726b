"""The eager/rendezvous switch found in a real traced ping-pong (Open MPI, both ranks on
this host, shared memory), where the MPI library's eager limit is known: its default
and a limit forced with an MCA parameter. Shown in `mpiscope analyze` and its JSON."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from mpiscope import reader, stats

PING_PONG = r"""
/* Ping-pong between ranks 0 and 1 over the power-of-two sizes LO..HI bytes,
 * REPS round trips per size after one warm-up. Usage: pingpong LO HI REPS */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long lo = atol(argv[1]), hi = atol(argv[2]);
    int reps = atoi(argv[3]);
    char *buf = malloc(hi);
    memset(buf, rank, hi);
    for (long n = lo; n <= hi; n *= 2)
        for (int i = 0; i <= reps; i++)
            if (rank == 0) {
                MPI_Send(buf, (int)n, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)n, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Recv(buf, (int)n, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, (int)n, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
            }
    free(buf);
    MPI_Finalize();
    return 0;
}
"""
REPS = 40
# a machine shared with other jobs can blur the step on one run (both ranks waiting for
# a core): "no switch" is then the honest answer, and the next run usually shows it
ATTEMPTS = 3


def vader_default(param: str) -> int:
    """An MCA parameter's default as this Open MPI reports it."""
    out = subprocess.run(["ompi_info", "--param", "btl", "vader", "--level", "9",
                          "--parsable"], capture_output=True, text=True, check=True).stdout
    return int(re.search(rf"^mca:btl:vader:param:{param}:value:(\d+)$", out, re.M)[1])


def ping_pong(workdir: Path, eager_limit: int | None) -> Path:
    """Trace the ping-pong sweep of 1 B .. 1 MiB over shared memory; the trace dir."""
    workdir.mkdir()
    (workdir / "pingpong.c").write_text(PING_PONG)
    exe = workdir / "pingpong"
    subprocess.run(["mpicc", "-g", "-O1", "-o", exe, workdir / "pingpong.c"], check=True)
    lib = subprocess.run(["mpiscope", "lib"], check=True, capture_output=True,
                         text=True).stdout.strip()
    env = dict(os.environ, LD_PRELOAD=lib, MPISCOPE_OUT=str(workdir / "trace"),
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl="self,vader")  # on-node shared memory, nothing else
    if eager_limit is not None:
        env["OMPI_MCA_btl_vader_eager_limit"] = str(eager_limit)
    subprocess.run(["mpirun", "-np", "2", exe, "1", str(1 << 20), str(REPS)], check=True,
                   env=env, capture_output=True, timeout=120)
    return workdir / "trace"


def traced_switch(tmp_path: Path, eager_limit: int | None) -> tuple[Path, stats.ProtocolSwitch]:
    for attempt in range(ATTEMPTS):
        trace = ping_pong(tmp_path / f"run{attempt}", eager_limit)
        found = stats.protocol_switches(reader.load(trace))
        if found:
            [switch] = found
            return trace, switch
    pytest.fail(f"no protocol switch found in {ATTEMPTS} ping-pong runs")


@pytest.mark.parametrize("eager_limit", [None, 16384], ids=["default", "forced-16KiB"])
def test_switch_lands_at_the_eager_limit(tmp_path: Path, eager_limit: int | None) -> None:
    limit = eager_limit or vader_default("btl_vader_eager_limit")
    trace, switch = traced_switch(tmp_path, eager_limit)
    assert switch.path == "intra-node"
    assert limit / 2 <= switch.bytes <= 2 * limit
    assert switch.last_below_bytes == switch.bytes // 2  # the sweep's previous size
    assert switch.transfer_s > 1.25 * switch.predicted_s
    # every size of the sweep is a bucket; enough of them on both sides
    assert switch.sizes_below + switch.sizes_above == 21


def test_analyze_shows_the_switch(tmp_path: Path) -> None:
    trace, switch = traced_switch(tmp_path, 16384)
    out = tmp_path / "a.json"
    proc = subprocess.run(["mpiscope", "analyze", trace, "--json", out], capture_output=True,
                          text=True, check=True, env={**os.environ, "COLUMNS": "200"})
    [doc] = json.loads(out.read_text())["protocol_switches"]
    assert doc["bytes"] == switch.bytes and doc["path"] == "intra-node"
    assert doc["jump"] == pytest.approx(doc["transfer_s"] / doc["predicted_s"])
    [line] = [s for s in proc.stdout.splitlines() if s.startswith("Protocol switch near ")]
    size, unit = re.match(r"Protocol switch near (\d+) (B|KiB|MiB):", line).groups()
    assert int(size) * {"B": 1, "KiB": 1024, "MiB": 1 << 20}[unit] == doc["bytes"]
    assert f"rendezvous from {size} {unit}" in line
    # the histogram beside it: one bucket per size, each with its own bandwidth
    sizes = json.loads(out.read_text())["message_sizes"]
    assert [b["bucket_lo"] for b in sizes] == [2 ** k for k in range(21)]
    assert all(b["messages"] == 2 * (REPS + 1) for b in sizes)
    assert all(b["p90_transfer_s"] >= b["median_transfer_s"] > 0 for b in sizes)
