"""System tree: one node per distinct host, each rank's process under its own host."""

from __future__ import annotations

from mpiscope_testing import mpijobs
from mpiscope_testing import tracechecks as tc
from mpiscope_testing.traceread import otf2_print


def test_ranks_on_named_hosts(programs, tmp_path) -> None:
    """MPISCOPE_HOSTNAME stands in for real host names (MPMD launch: one per rank)."""
    exe = str(programs["colls.c"])
    hosts = ["node-a", "node-b", "node-a"]
    cmd = []
    for host in hosts:
        cmd += [":"] if cmd else []
        cmd += ["-np", "1", "-x", f"MPISCOPE_HOSTNAME={host}", exe]
    out = tmp_path / "trace"
    job = mpijobs.run([*mpijobs.MPIRUN, *cmd], out=out)
    assert job.returncode == 0, job.stderr
    t = tc.read_both(out)
    tc.check_definitions(t, 3)
    assert t.hosts == {0: "node-a", 1: "node-b", 2: "node-a"}
    nodes = [line for line in otf2_print(out, "-G").splitlines()
             if line.startswith("SYSTEM_TREE_NODE")]
    assert len(nodes) == 3  # machine + two hosts
    assert sum('Class: "node"' in n for n in nodes) == 2
