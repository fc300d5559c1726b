"""System tree: one node per distinct host, each rank's process under its own host."""

from __future__ import annotations

import re

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


def host_cpus() -> int:
    """This machine's CPUs as the tracer counts them: online CPUs, within a cgroup v2
    quota (`cpu.max`)."""
    import math
    import os
    from pathlib import Path

    n = os.sysconf("SC_NPROCESSORS_ONLN")
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max" and int(period) > 0:
            n = min(n, max(math.ceil(int(quota) / int(period)), 1))
    except (OSError, ValueError):
        pass
    return n


def test_host_cpus_recorded_and_oversubscription_warned(programs, tmp_path) -> None:
    """4 ranks on this host (2 CPUs on the CI machine): the archive records the host's
    CPUs as measured here, and `mpiscope analyze` warns exactly when the ranks outnumber
    them — from what is recorded, never from how the run happened to be scheduled."""
    import json
    import subprocess

    out = tmp_path / "trace"
    job = mpijobs.run([str(programs["colls.c"])], np=4, out=out)
    assert job.returncode == 0, job.stderr
    lines = [" ".join(line.split()) for line in otf2_print(out, "-A").splitlines()]
    cpus = host_cpus()
    at = lines.index("Property name MPISCOPE::HOST_CPUS")
    assert lines[at + 1] == f"Property value {cpus}"  # one host: one number
    js = tmp_path / "a.json"
    ana = subprocess.run(["mpiscope", "analyze", str(out), "--json", str(js)],
                         capture_output=True, text=True, timeout=300)
    assert ana.returncode == 0, ana.stderr
    warned = [w for w in json.loads(js.read_text())["warnings"] if "oversubscribed" in w]
    host = tc.read_both(out).hosts[0]
    if cpus < 4:
        # the share of the run the ranks waited for a CPU is measured (how this run was
        # scheduled): its figures are not asserted, only where they stand
        measured = r"( \(ranks were runnable but waiting for a CPU \d+(–\d+)?% of their " \
                   r"run \(measured\)\))?"
        assert len(warned) == 1 and re.fullmatch(
            re.escape(f"oversubscribed: 4 ranks on {host} with {cpus} CPU"
                      f"{'s' if cpus != 1 else ''} — ranks took turns on the CPUs")
            + measured + re.escape(", so waiting, imbalance and the timing-driven findings "
                                   "(marked `oversubscribed`) may be descheduling, not the "
                                   "program"), warned[0]), warned
        assert warned[0] in " ".join(ana.stdout.split())
    else:
        assert warned == []
