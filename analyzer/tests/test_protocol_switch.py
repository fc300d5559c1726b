"""The eager/rendezvous switch in `mpiscope analyze` and its JSON: on OTF2 ping-pong traces
whose step is known (written here), and on a real traced ping-pong, where whether a step
shows is up to the machine (bench/protocol/run measures that) and mpiscope must say
either where it is or that none is visible."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from mpiscope_testing.tracegen import TraceBuilder

SIZES = [2 ** k for k in range(21)]  # 1 B .. 1 MiB
REPS = 5  # round trips per size
ALPHA_NS = 250  # the synthetic shared memory: latency
BYTES_PER_NS = 10.0  # and 10 GB/s
UNITS = {"B": 1, "KiB": 1024, "MiB": 1 << 20}


def took_ns(n: int, eager_limit: int | None) -> int:
    """A message of n bytes takes alpha + n / beta; above `eager_limit` (None: never) a
    rendezvous handshake adds 4 latencies."""
    late = 4 * ALPHA_NS if eager_limit is not None and n > eager_limit else 0
    return int(ALPHA_NS + n / BYTES_PER_NS) + late


def ping_pong(directory: Path, eager_limit: int | None, hosts: list[str] | None = None) -> Path:
    """Rank 0 and 1 ping-pong every size REPS times (blocking Send/Recv, the receive
    posted first), each message taking `took_ns`. Returns the trace directory."""
    tb = TraceBuilder(ranks=2, hosts=hosts)
    for r in (0, 1):
        tb.call(r, 0, 100, "MPI_Init", callsite="pingpong.c:8")
    t = 1000
    for n in SIZES:
        took = took_ns(n, eager_limit)
        for _ in range(REPS):
            for src, dst in ((0, 1), (1, 0)):
                tb.recv_call(dst, t - 50, t + took, src=src, tag=0, nbytes=n,
                             callsite="pingpong.c:20")
                tb.send_call(src, t, t + took, dest=dst, tag=0, nbytes=n,
                             callsite="pingpong.c:19")
                t += took + 100
    for r in (0, 1):
        tb.call(r, t, t + 100, "MPI_Finalize", callsite="pingpong.c:30")
    return tb.write(directory)


def analyze(trace: Path, out: Path) -> tuple[list[str], dict]:
    """`mpiscope analyze`: the summary's lines about the protocol switch, and the JSON."""
    proc = subprocess.run(["mpiscope", "analyze", trace, "--json", out], capture_output=True,
                          text=True, check=True, timeout=300,
                          env={**os.environ, "COLUMNS": "250"})
    lines = [s for s in proc.stdout.splitlines() if "protocol switch" in s.lower()]
    return lines, json.loads(out.read_text())


def switch_size(line: str) -> int:
    """The size a "Protocol switch near 8 KiB ..." line names, in bytes."""
    size, unit = re.match(r"Protocol switch near ([\d.]+) (B|KiB|MiB)", line).groups()
    return int(float(size) * UNITS[unit])


@pytest.mark.parametrize("limit", [1024, 4096, 8192])
def test_analyze_names_the_switch_above_the_eager_limit(tmp_path: Path, limit: int) -> None:
    [line], doc = analyze(ping_pong(tmp_path / "trace", limit), tmp_path / "a.json")
    [sw] = doc["protocol_switches"]
    # the first size sent by rendezvous, and the last one still eager
    assert (sw["path"], sw["bytes"], sw["last_below_bytes"]) == ("intra-node", 2 * limit,
                                                                 limit)
    assert sw["transfer_s"] == pytest.approx(took_ns(2 * limit, limit) * 1e-9)
    assert sw["alpha_s"] == pytest.approx(ALPHA_NS * 1e-9, rel=0.05)
    # the trend of the eager sizes predicts what the message would take without the step
    assert sw["predicted_s"] == pytest.approx(took_ns(2 * limit, None) * 1e-9, rel=0.05)
    assert sw["jump"] == pytest.approx(sw["transfer_s"] / sw["predicted_s"])
    assert switch_size(line) == 2 * limit
    size = line.split("near ")[1].split(":")[0]
    assert line.endswith(f"rendezvous from {size}") and "(intra-node)" not in line


def test_analyze_says_no_switch_is_visible_on_a_smooth_sweep(tmp_path: Path) -> None:
    lines, doc = analyze(ping_pong(tmp_path / "trace", None), tmp_path / "a.json")
    assert doc["protocol_switches"] == []
    assert lines == [f"No protocol switch visible: the transfer times of {len(SIZES)} "
                     "message sizes follow one latency/bandwidth trend"]
    assert [b["bucket_lo"] for b in doc["message_sizes"]] == SIZES


def test_each_path_gets_its_own_line(tmp_path: Path) -> None:
    """Two hosts: the ping-pong crosses the network, which has a switch; no message stays
    on a host, so nothing is said about shared memory."""
    [line], doc = analyze(ping_pong(tmp_path / "trace", 8192, hosts=["a", "b"]),
                          tmp_path / "a.json")
    assert [s["path"] for s in doc["protocol_switches"]] == ["inter-node"]
    assert line.startswith("Protocol switch near 16 KiB (inter-node): ")


def test_too_few_sizes_say_nothing(tmp_path: Path) -> None:
    tb = TraceBuilder(ranks=2)
    for i, n in enumerate([8, 8, 8, 4096, 4096, 4096]):  # two sizes: no trend to compare
        tb.recv_call(1, 1000 * i, 1000 * i + 500, src=0, tag=0, nbytes=n)
        tb.send_call(0, 1000 * i + 10, 1000 * i + 500, dest=1, tag=0, nbytes=n)
    lines, doc = analyze(tb.write(tmp_path / "trace"), tmp_path / "a.json")
    assert lines == [] and doc["protocol_switches"] == []


PING_PONG_C = Path(__file__).resolve().parents[2] / "bench" / "protocol" / "pingpong.c"
REAL_REPS = 20


def test_a_real_ping_pong_gets_an_honest_answer(tmp_path: Path) -> None:
    """Open MPI over shared memory, traced. Whether its sizes show a step depends on the
    machine (CMA single copy can make large messages as cheap per byte as eager ones),
    so: every size is there with its messages, and the summary either names a switch
    that agrees with the JSON or says none is visible."""
    exe = tmp_path / "pingpong"
    subprocess.run(["mpicc", "-g", "-O1", "-o", exe, PING_PONG_C], check=True)
    lib = subprocess.run(["mpiscope", "lib"], check=True, capture_output=True,
                         text=True).stdout.strip()
    env = dict(os.environ, LD_PRELOAD=lib, MPISCOPE_OUT=str(tmp_path / "trace"),
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl="self,vader")  # on-node shared memory, nothing else
    subprocess.run(["mpirun", "-np", "2", exe, "1", str(1 << 20), str(REAL_REPS)],
                   check=True, env=env, capture_output=True, timeout=300)
    [line], doc = analyze(tmp_path / "trace", tmp_path / "a.json")
    sizes = doc["message_sizes"]
    assert [b["bucket_lo"] for b in sizes] == SIZES
    assert all(b["messages"] == 2 * (REAL_REPS + 1) for b in sizes)  # + the warm-up
    assert all(b["p90_transfer_s"] >= b["median_transfer_s"] > 0 for b in sizes)
    if doc["protocol_switches"]:
        [sw] = doc["protocol_switches"]
        assert sw["path"] == "intra-node" and sw["bytes"] in SIZES
        assert sw["last_below_bytes"] == sw["bytes"] // 2  # the sweep's previous size
        assert switch_size(line) == sw["bytes"]
    else:
        assert line.startswith("No protocol switch visible: ")
