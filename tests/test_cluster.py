"""The emulated cluster, driven as a user would: `mpiscope cluster up|status|down` and
`mpiscope run --cluster -- mpirun -np 4 ./pingpong`, checked on the OTF2 trace it writes.

Needs root with CAP_NET_ADMIN (network namespaces); skipped with the reason otherwise.
Uses the prefix `mpstest`, so a user's own `mpiscope` cluster state is never touched.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import statistics
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import otf2
import pytest

from mpiscope.errors import UserError
from mpiscope.jobs import cluster
from mpiscope.jobs.cluster import netops
from mpiscope.jobs.cluster import state as cluster_state
from mpiscope.jobs.mpirun import Target, adapt, launcher

ROOT = Path(__file__).resolve().parents[1]
PREFIX = "mpstest"
RATE = "20mbit"          # slow enough that 1 MiB takes ~0.4 s: shaping dominates, runs short
RATE_BPS = 20e6
BIG = 1 << 20            # "large message": 1 MiB
ROUNDS = 3
JOB_TIMEOUT = 180


def _netns_usable() -> str | None:
    """None if we may create namespaces here, else why not."""
    try:
        netops.check_privileges()
    except UserError as err:
        return str(err)
    probe = f"{PREFIX}-probe"
    made = netops.run("ip", "netns", "add", probe, check=False)
    netops.run("ip", "netns", "del", probe, check=False)
    if made.returncode != 0:
        return f"cannot create network namespaces: {made.stderr.strip()}"
    return None


_NO_NETNS = _netns_usable()
needs_netns = pytest.mark.skipif(_NO_NETNS is not None, reason=f"cluster: {_NO_NETNS}")


def mpiscope(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mpiscope", *args], capture_output=True, text=True, timeout=timeout)


def run_job(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run an MPI job bounded in time; on timeout kill its whole process group."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=JOB_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(cmd)} did not finish in {JOB_TIMEOUT}s:\n{out}\n{err}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def leftovers(prefix: str = PREFIX) -> list[str]:
    """Every namespace, link and qdisc on this host that carries the prefix."""
    found = [f"netns {ns}" for ns in netops.netns_list() if ns.startswith(prefix)]
    found += [f"link {link}" for link in netops.links_with_prefix(prefix)]
    qdiscs = netops.run("tc", "qdisc", "show").stdout.splitlines()
    found += [f"qdisc {q}" for q in qdiscs if f"dev {prefix}" in q]
    return found


# --- specs: no privileges needed -------------------------------------------------------

def test_cluster_specs_read_like_the_study_writes_them():
    spec = cluster.parse_spec("4x100mbit")
    assert (spec.nodes, spec.rate_bps, spec.delay_ms) == (4, 100e6, None)
    assert str(spec) == "4x100mbit"
    spec = cluster.parse_spec("2x1gbit+0.1ms")
    assert (spec.nodes, spec.rate_bps, spec.delay_ms) == (2, 1e9, 0.1)
    assert cluster.parse_rate("10mbps") == 80e6  # tc's bps means bytes per second


@pytest.mark.parametrize("bad, says", [("4", "expected NODESxRATE"),
                                       ("0x100mbit", "between 1 and"),
                                       ("4x100furlongs", "rate '100furlongs'")])
def test_bad_cluster_specs_are_one_clear_line(bad, says):
    with pytest.raises(UserError) as err:
        cluster.parse_spec(bad)
    assert says in err.value.one_line()
    assert "\n" not in err.value.one_line()


def test_without_cap_net_admin_up_says_so_and_exits_2():
    drop = ["setpriv", "--bounding-set", "-net_admin", "--inh-caps", "-net_admin"]
    proc = subprocess.run([*drop, "mpiscope", "cluster", "up", "--prefix", PREFIX],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("mpiscope: cluster: needs CAP_NET_ADMIN to create "
                                   "network namespaces (run as root)")
    assert not leftovers()


def test_run_cluster_without_a_cluster_tells_how_to_start_one(tmp_path):
    proc = mpiscope("run", "--cluster", "--cluster-prefix", "mpsnone", "--out",
                    str(tmp_path / "t"), "--", "mpirun", "-np", "2", "true")
    assert proc.returncode == 2
    assert "no emulated cluster is up (run `mpiscope cluster up" in proc.stderr
    proc = mpiscope("run", "--cluster", "--out", str(tmp_path / "t"), "--", "mpiexec.mpich",
                    "-n", "2", "true")
    assert proc.returncode == 2
    assert proc.stderr.startswith("mpiscope: mpiexec.mpich: --cluster needs an Open MPI")


# --- lifecycle -------------------------------------------------------------------------

def _stop_like_ctrl_c(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="module", autouse=True)
def sigterm_tears_down_too() -> Iterator[None]:
    """`timeout` and CI runners stop a run with SIGTERM, which would skip every fixture's
    clean-up and leave the namespaces behind; turned into Ctrl-C, pytest unwinds them."""
    previous = signal.signal(signal.SIGTERM, _stop_like_ctrl_c)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.fixture(scope="module", autouse=True)
def one_test_cluster_at_a_time(sigterm_tears_down_too: None) -> Iterator[None]:
    """Two test sessions on one machine (several developers) would share the prefix."""
    if _NO_NETNS is not None:
        yield
        return
    lock_path = cluster_state.RUN_DIR / f"{PREFIX}.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        deadline = time.monotonic() + 600
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"{lock_path} held by another test session for 10 minutes")
                time.sleep(1)
        yield


@needs_netns
def test_up_clears_stale_leftovers_and_down_removes_everything():
    # leftovers of a crashed run: a namespace and a link with our names, no state file
    try:
        netops.run("ip", "netns", "add", f"{PREFIX}-node0")
        netops.run("ip", "link", "add", f"{PREFIX}-v1", "type", "veth", "peer", "name",
                   f"{PREFIX}-p1")
        up = mpiscope("cluster", "up", "--prefix", PREFIX, "--nodes", "3", "--rate", "50mbit")
        assert up.returncode == 0, up.stderr
        assert "cluster 3x50mbit up" in up.stdout
        again = mpiscope("cluster", "up", "--prefix", PREFIX, "--nodes", "3", "--rate",
                         "50mbit")
        assert "cluster 3x50mbit already up" in again.stdout
        assert sorted(ns for ns in netops.netns_list() if ns.startswith(PREFIX)) == [
            f"{PREFIX}-node0", f"{PREFIX}-node1", f"{PREFIX}-node2"]
        # a damaged cluster (a node's namespace deleted behind our back) is rebuilt
        netops.run("ip", "netns", "del", f"{PREFIX}-node1")
        assert "MISSING" in mpiscope("cluster", "status", "--prefix", PREFIX).stdout
        again = mpiscope("cluster", "up", "--prefix", PREFIX, "--nodes", "3", "--rate",
                         "50mbit")
        assert "cluster 3x50mbit up" in again.stdout
        assert "MISSING" not in again.stdout
        # so is one whose link lost its shaping, or a node its address
        netops.run("tc", "qdisc", "del", "dev", f"{PREFIX}-v2", "root")
        again = mpiscope("cluster", "up", "--prefix", PREFIX, "--nodes", "3", "--rate",
                         "50mbit")
        assert "cluster 3x50mbit up" in again.stdout
        assert again.stdout.count("qdisc tbf 1: root") == 6
        netops.run("ip", "-n", f"{PREFIX}-node0", "addr", "flush", "dev", "eth0")
        again = mpiscope("cluster", "up", "--prefix", PREFIX, "--nodes", "3", "--rate",
                         "50mbit")
        assert "cluster 3x50mbit up" in again.stdout
        assert netops.addresses("eth0", f"{PREFIX}-node0") == ["198.18.0.1"]
    finally:
        down = mpiscope("cluster", "down", "--prefix", PREFIX)
    assert down.returncode == 0, down.stderr
    assert f"netns {PREFIX}-node2" in down.stdout
    assert leftovers() == []
    assert mpiscope("cluster", "status", "--prefix", PREFIX).stdout.strip() == (
        "mpiscope: no emulated cluster is up")


@needs_netns
def test_down_removes_what_an_interrupted_up_left():
    """`up` killed half-way has no state file yet: `down` still finds its pieces by name,
    and a second cluster's route is named in `up`'s refusal."""
    try:
        netops.run("ip", "link", "add", f"{PREFIX}-br0", "type", "bridge")
        netops.run("ip", "addr", "add", "198.18.0.254/24", "dev", f"{PREFIX}-br0")
        netops.run("ip", "link", "set", f"{PREFIX}-br0", "up")
        netops.run("ip", "netns", "add", f"{PREFIX}-node0")
        refused = mpiscope("cluster", "up", "--prefix", "mpsother", "--nodes", "2")
        assert refused.returncode == 2
        assert f"`mpiscope cluster down --prefix {PREFIX}`" in refused.stderr
    finally:
        down = mpiscope("cluster", "down", "--prefix", PREFIX)
    assert down.returncode == 0, down.stderr
    assert f"netns {PREFIX}-node0" in down.stdout and f"link {PREFIX}-br0" in down.stdout
    assert leftovers() == [] and leftovers("mpsother") == []


@pytest.fixture(scope="module")
def two_nodes() -> Iterator[cluster.ClusterState]:
    """node0 and node1 at 20 mbit; torn down after the module even if a test fails."""
    if _NO_NETNS is not None:
        pytest.skip(f"cluster: {_NO_NETNS}")
    spec = cluster.ClusterSpec(nodes=2, rate_bps=RATE_BPS, prefix=PREFIX)
    try:
        yield cluster.ensure_up(spec).state
    finally:
        cluster.down(PREFIX)


def test_status_shows_nodes_addresses_and_shaping_both_ways(two_nodes):
    proc = mpiscope("cluster", "status", "--prefix", PREFIX)
    assert proc.returncode == 0
    lines = proc.stdout.splitlines()
    assert "cluster  2 nodes, 20mbit per link" in lines[0]
    assert re.search(r"^node1\s+198\.18\.0\.2\s+netns mpstest-node1$", proc.stdout, re.M)
    assert proc.stdout.count("qdisc tbf 1: root") == 4  # each node: to it and from it
    assert "rate 20Mbit" in proc.stdout


def test_nodes_have_their_own_address_and_host_name(two_nodes):
    addr = netops.run("ip", "-n", f"{PREFIX}-node1", "-4", "-o", "addr", "show", "eth0")
    assert "198.18.0.2/24" in addr.stdout
    # the launch agent is what Open MPI calls instead of ssh
    agent = subprocess.run([str(two_nodes.agent), "node1", "hostname;", "echo",
                            "$MPISCOPE_HOSTNAME"], capture_output=True, text=True, timeout=30)
    assert agent.stdout.split() == ["node1", "node1"]
    # by address: mpirun must not ask the host's DNS for `node0`
    assert two_nodes.hostfile.read_text() == "198.18.0.1 slots=2\n198.18.0.2 slots=2\n"
    agent = subprocess.run([str(two_nodes.agent), "198.18.0.2", "hostname"],
                           capture_output=True, text=True, timeout=30)
    assert agent.stdout.split() == ["node1"]
    stray = subprocess.run([str(two_nodes.agent), "example.com", "true"],
                           capture_output=True, text=True, timeout=30)
    assert stray.returncode == 255
    assert stray.stderr == "mpiscope cluster agent: unknown node 'example.com'\n"


def test_two_ranks_per_node_through_the_python_api(two_nodes, tmp_path):
    """What the Himeno study does: launcher(...) + program, here untraced."""
    subprocess.run(["mpicc", "-g", "-o", str(tmp_path / "pingpong"),
                    str(ROOT / "tests" / "test_cluster_pingpong.c")], check=True, timeout=120)
    cmd = launcher(4, Target(cluster=PREFIX), ranks_per_node=2)
    job = run_job([*cmd, "./pingpong", "1000", "1"], cwd=tmp_path)
    assert job.returncode == 0, job.stderr
    said = dict(re.findall(r"^host (\d) (\S+)$", job.stdout, re.M))
    assert said == {"0": "node0", "1": "node0", "2": "node1", "3": "node1"}


def test_a_mapping_of_your_own_is_kept(two_nodes):
    cmd = adapt(["mpirun", "-np", "8", "--map-by", "ppr:2:node", "./a"], Target(cluster=PREFIX))
    assert cmd.count("--map-by") == 1 and cmd[-5:] == ["-np", "8", "--map-by",
                                                       "ppr:2:node", "./a"]
    assert cmd[cmd.index("--hostfile") + 1] == str(two_nodes.hostfile)
    with pytest.raises(UserError, match="chooses the hosts itself; drop --host"):
        adapt(["mpirun", "--host", "a,b", "./a"], Target(cluster=PREFIX))


def test_run_cluster_passes_the_exit_code_through(two_nodes, tmp_path):
    job = run_job(["mpiscope", "run", "--cluster", "--cluster-prefix", PREFIX, "--out",
                   str(tmp_path / "t"), "--", "mpirun", "-np", "2", "sh", "-c",
                   # the pause lets both ranks' lines reach mpirun before the first exit 3
                   # makes it end the job (not what this test is about)
                   "hostname; sleep 1; exit 3"], cwd=tmp_path)
    assert job.returncode == 3
    assert sorted(job.stdout.split()) == ["node0", "node1"]


def test_a_trace_the_cluster_cannot_write_is_said_once(two_nodes, tmp_path):
    """Rank 0 on node0 says why there is no trace through `mpiscope run`'s status file
    (forwarded to the nodes like the interposer), so the user reads one line, not the
    rank's line and then `run`'s own "no trace written"."""
    subprocess.run(["mpicc", "-g", "-o", str(tmp_path / "pingpong"),
                    str(ROOT / "tests" / "test_cluster_pingpong.c")], check=True, timeout=120)
    full = tmp_path / "T"  # a 32 KiB file system, far too small for any trace
    full.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32k", "tmpfs", str(full)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs: {mounted.stderr.strip()}")
    try:
        job = run_job(["env", "MPISCOPE_BUFFER_SIZE=16k", "mpiscope", "run", "--cluster",
                       "--cluster-prefix", PREFIX, "--out", str(full / "tr"), "--", "mpirun",
                       "-np", "2", "./pingpong", "1000", "300"], cwd=tmp_path)
    finally:
        subprocess.run(["umount", str(full)], check=True)
    assert job.returncode == 0, job.stderr
    said = [line for line in job.stderr.splitlines() if line.startswith("mpiscope")]
    assert len(said) == 1, job.stderr
    assert said[0].startswith(f"mpiscope: warning: trace not written to {full / 'tr'}: "
                              "No space left on device"), job.stderr


# --- a traced ping-pong across the nodes ------------------------------------------------

@dataclass
class Transfer:
    sender: int
    receiver: int
    bytes: int
    seconds: float  # from the sender's Enter of MPI_Send to its Leave of the matching Recv

    @property
    def mbit_per_s(self) -> float:
        return 2 * self.bytes * 8 / self.seconds / 1e6  # a round trip moves it twice


def trace_hosts(anchor: Path) -> dict[int, str]:
    """World rank -> host name, from the OTF2 system tree."""
    with otf2.reader.open(str(anchor)) as trace:
        return {int(re.search(r"\d+", g.name).group()): g.system_tree_parent.name
                for g in trace.definitions.location_groups}


def trace_round_trips(anchor: Path, min_bytes: int) -> list[Transfer]:
    """Each large MPI_Send of a rank followed by the MPI_Recv of the reply: one round trip,
    timed on the sender's own clock (no cross-rank clock alignment needed)."""
    with otf2.reader.open(str(anchor)) as trace:
        tick = 1 / trace.definitions.clock_properties.timer_resolution
        rank_of = {loc: int(re.search(r"\d+", loc.group.name).group())
                   for loc in trace.definitions.locations}
        last_enter: dict[int, int] = {}
        open_send: dict[int, tuple[int, int, int]] = {}  # rank -> (peer, bytes, start)
        reply_done: dict[int, bool] = {}
        trips = []
        for loc, ev in trace.events:
            rank = rank_of[loc]
            if isinstance(ev, otf2.events.Enter):
                last_enter[rank] = ev.time
            elif isinstance(ev, otf2.events.MpiSend) and ev.msg_length >= min_bytes:
                open_send[rank] = (ev.receiver, ev.msg_length, last_enter[rank])
            elif isinstance(ev, otf2.events.MpiRecv) and rank in open_send:
                reply_done[rank] = ev.sender == open_send[rank][0]
            elif isinstance(ev, otf2.events.Leave) and reply_done.pop(rank, False):
                peer, size, start = open_send.pop(rank)
                trips.append(Transfer(rank, peer, size, (ev.time - start) * tick))
        return trips


@pytest.fixture(scope="module")
def pingpong(two_nodes, tmp_path_factory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """`mpiscope run --cluster -- mpirun -np 4 ./pingpong 1MiB 3`: ranks round-robin, so
    0 and 2 share node0, 1 and 3 share node1; rank 0 ping-pongs with 1, 2, 3 in turn."""
    work = tmp_path_factory.mktemp("cluster-pingpong")
    subprocess.run(["mpicc", "-g", "-O1", "-Wall", "-Wextra", "-o", str(work / "pingpong"),
                    str(ROOT / "tests" / "test_cluster_pingpong.c")], check=True, timeout=120)
    job = run_job(["mpiscope", "run", "--cluster", "--cluster-prefix", PREFIX, "--out",
                   str(work / "trace"), "--", "mpirun", "-np", "4", "./pingpong",
                   str(BIG), str(ROUNDS)], cwd=work)
    assert job.returncode == 0, job.stdout + job.stderr
    return job, work / "trace" / "traces.otf2"


def test_ranks_run_on_distinct_emulated_hosts(pingpong):
    job, anchor = pingpong
    said = dict(re.findall(r"^host (\d) (\S+)$", job.stdout, re.M))
    assert said == {"0": "node0", "1": "node1", "2": "node0", "3": "node1"}
    assert trace_hosts(anchor) == {0: "node0", 1: "node1", 2: "node0", 3: "node1"}


def test_inter_node_bandwidth_is_the_link_rate_and_intra_node_far_higher(pingpong):
    _, anchor = pingpong
    hosts = trace_hosts(anchor)
    trips = [t for t in trace_round_trips(anchor, BIG) if t.sender == 0]  # the initiator
    inter = [t.mbit_per_s for t in trips if hosts[t.sender] != hosts[t.receiver]]
    intra = [t.mbit_per_s for t in trips if hosts[t.sender] == hosts[t.receiver]]
    assert len(inter) == 2 * ROUNDS and len(intra) == ROUNDS
    rate = RATE_BPS / 1e6
    assert abs(statistics.median(inter) - rate) <= 0.3 * rate, inter
    assert statistics.median(intra) > 10 * rate, intra


def test_program_timing_agrees_with_the_trace(pingpong):
    job, _ = pingpong
    for peer, size, rounds, secs in re.findall(r"^pingpong (\d) (\d+) (\d+) (\S+)$",
                                               job.stdout, re.M):
        mbit = 2 * int(size) * int(rounds) * 8 / float(secs) / 1e6
        if peer in ("1", "3"):  # on node1, across the shaped link
            assert abs(mbit - RATE_BPS / 1e6) <= 0.3 * RATE_BPS / 1e6
        else:
            assert mbit > 10 * RATE_BPS / 1e6


def test_analyzer_host_split_agrees(pingpong):
    """What `mpiscope analyze --json` reports as intra- vs inter-node bandwidth."""
    from mpiscope.analysis import stats
    from mpiscope.archive import reader

    _, anchor = pingpong
    split = stats.host_split(reader.load(anchor.parent)).set_index("path")
    inter_mbit = split.loc["inter-node", "bandwidth_MBps"] * 8
    intra_mbit = split.loc["intra-node", "bandwidth_MBps"] * 8
    assert abs(inter_mbit - RATE_BPS / 1e6) <= 0.3 * RATE_BPS / 1e6
    assert intra_mbit > 10 * RATE_BPS / 1e6


HIMENO = ROOT / "workloads" / "himeno" / "himeno"


@pytest.mark.skipif(not HIMENO.is_file(), reason="workloads/himeno/himeno not built")
def test_himeno_xs_runs_across_the_nodes(two_nodes, tmp_path):
    job = run_job(["mpiscope", "run", "--cluster", "--cluster-prefix", PREFIX, "--out",
                   str(tmp_path / "trace"), "--", "mpirun", "-np", "4", str(HIMENO),
                   "--size", "XS", "--iterations", "20"], cwd=tmp_path)
    assert job.returncode == 0, job.stdout + job.stderr
    result = json.loads(job.stdout.strip().splitlines()[-1])
    assert result["ranks"] == 4 and result["iterations"] == 20 and result["mflops"] > 0
    hosts = trace_hosts(tmp_path / "trace" / "traces.otf2")
    assert sorted(set(hosts.values())) == ["node0", "node1"]


def test_teardown_leaves_no_namespace_link_or_qdisc(two_nodes):
    assert leftovers()  # the cluster is up...
    proc = mpiscope("cluster", "down", "--prefix", PREFIX)
    assert proc.returncode == 0
    assert leftovers() == []  # ...and nothing of it remains
    assert not (two_nodes.agent.exists() or two_nodes.hostfile.exists())


@needs_netns
@pytest.mark.skipif(not HIMENO.is_file(), reason="workloads/himeno/himeno not built")
def test_study_on_the_cluster_spends_much_of_4_ranks_in_messaging_and_cleans_up(tmp_path):
    """`mpiscope study himeno --cluster 4x100mbit`: one rank per node, every rank's halo
    crosses a link; the cluster it brought up is gone afterwards. (How large the messaging
    share gets depends on how fast the CPUs compute between exchanges: bench, not test.)"""
    if cluster_state.load("mpiscope") is not None:
        pytest.skip("a cluster of the user's own is up under the default prefix")
    out = tmp_path / "study"
    job = run_job(["mpiscope", "study", "himeno", "--cluster", "4x100mbit", "--size", "XS",
                   "--iterations", "40", "--ranks", "4", "--repeat", "1", "--out", str(out)],
                  cwd=tmp_path)
    assert job.returncode == 0, job.stdout + job.stderr
    assert not [ns for ns in netops.netns_list() if ns.startswith("mpiscope-")]
    assert cluster_state.load("mpiscope") is None
    proc = mpiscope("analyze", str(out / "himeno-4-unpatched"), "--json",
                    str(tmp_path / "a.json"))
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((tmp_path / "a.json").read_text())
    ranks = doc["ranks"]
    assert sorted(r["host"] for r in ranks) == ["node0", "node1", "node2", "node3"]
    assert all(r["communication_s"] + r["synchronization_s"] > 0 for r in ranks)
    # one rank per node: every message crosses a link
    split = {row["path"]: row for row in doc["host_split"]}
    assert set(split) == {"inter-node"}
    assert split["inter-node"]["messages"] == doc["messages"]["matched"] > 0
