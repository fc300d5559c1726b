"""The `mpiscope analyze` terminal summary: the intra- vs inter-node split of messages
appears when the trace spans more than one host, with the same figures as the JSON."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from mpiscope.render.summary import size_text
from mpiscope_testing.tracegen import TraceBuilder


def messages_trace(path: Path, hosts: list[str]) -> Path:
    """Rank 0 sends two 100 kB messages to rank 1 (20 us each) and a 100 kB and an 8 B
    message to rank 2 (1 ms and 5 us)."""
    tb = TraceBuilder(ranks=3, hosts=hosts)
    for rank in range(3):
        tb.call(rank, 0, 10, "MPI_Init")
    t = 100
    for nbytes, peer, took in [(100_000, 1, 20_000), (100_000, 1, 20_000),
                               (100_000, 2, 1_000_000), (8, 2, 5_000)]:
        tb.send_call(0, t, t + took, dest=peer, tag=0, nbytes=nbytes, callsite="m.c:5")
        tb.recv_call(peer, t, t + took, src=0, tag=0, nbytes=nbytes, callsite="m.c:9")
        t += took + 100
    for rank in range(3):
        tb.call(rank, t, t + 10, "MPI_Finalize")
    return tb.write(path)


def analyze(trace: Path, tmp_path: Path) -> tuple[str, dict]:
    out = tmp_path / "a.json"
    proc = subprocess.run(["mpiscope", "analyze", trace, "--json", out], capture_output=True,
                          text=True, check=True, env={**os.environ, "COLUMNS": "200"})
    return proc.stdout, json.loads(out.read_text())


def table_row(text: str, first_cell: str) -> list[str]:
    [line] = [s for s in text.splitlines() if s.strip("│ ").startswith(first_cell + " ")]
    return [c.strip() for c in line.strip().strip("│").split("│")]


def test_two_hosts_show_intra_and_inter_node_traffic(tmp_path: Path) -> None:
    text, doc = analyze(messages_trace(tmp_path / "t", ["a", "a", "b"]), tmp_path)
    assert "Messages within and between the 2 hosts" in text
    split = {r["path"]: r for r in doc["host_split"]}
    assert {p: (r["messages"], r["bytes"]) for p, r in split.items()} == {
        "intra-node": (2, 200_000), "inter-node": (2, 100_008)}
    for path, r in split.items():
        assert table_row(text, path) == [path, str(r["messages"]), str(r["bytes"]),
                                         f"{r['bandwidth_MBps']:.1f}"]
    # shared memory moved its 100 kB 50x faster than the network
    assert split["intra-node"]["bandwidth_MBps"] == pytest.approx(
        50 * split["inter-node"]["bandwidth_MBps"])


def test_one_host_shows_no_split(tmp_path: Path) -> None:
    text, doc = analyze(messages_trace(tmp_path / "t", ["a", "a", "a"]), tmp_path)
    assert [r["path"] for r in doc["host_split"]] == ["intra-node"]
    assert "Messages within and between" not in text


def test_sizes_read_as_a_user_writes_them() -> None:
    assert [size_text(n) for n in (8, 1023, 4096, 1536, 16384, 1 << 20, 3 << 30)] == [
        "8 B", "1023 B", "4 KiB", "1.5 KiB", "16 KiB", "1 MiB", "3 GiB"]
