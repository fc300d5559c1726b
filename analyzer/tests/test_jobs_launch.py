"""The one launch path (mpiscope.jobs): the launcher lines it builds for local Open MPI,
MPICH and the emulated cluster, and the environment a traced job gets. No MPI job runs
here: the cluster's state is made up, and a job is a Python one-liner or not run at all."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mpiscope import paths
from mpiscope.errors import UserError
from mpiscope.jobs import launch, mpirun
from mpiscope.jobs.cluster import placement
from mpiscope.jobs.cluster.state import ClusterState, Node
from mpiscope.jobs.mpirun import Target

CLUSTER = Target(cluster="fake")


@pytest.fixture
def as_root(monkeypatch):
    monkeypatch.setattr(mpirun.os, "geteuid", lambda: 0)


@pytest.fixture
def as_user(monkeypatch):
    monkeypatch.setattr(mpirun.os, "geteuid", lambda: 1000)


@pytest.fixture
def libs(tmp_path, monkeypatch) -> dict[str, Path]:
    """A build directory with an interposer for each MPI flavour (empty files)."""
    monkeypatch.setenv("MPISCOPE_BUILD_DIR", str(tmp_path / "build"))
    monkeypatch.delenv("MPISCOPE_LIB", raising=False)
    found = {}
    for mpi in paths.MPI_FLAVOURS:
        lib = tmp_path / "build" / "interposer" / mpi / "libmpiscope.so"
        lib.parent.mkdir(parents=True)
        lib.touch()
        found[mpi] = lib
    return found


@pytest.fixture
def two_nodes(monkeypatch) -> ClusterState:
    """The state `mpiscope cluster up --prefix fake --nodes 2` would have recorded."""
    state = ClusterState(
        prefix="fake", bridge="fake-br0", subnet="198.18.0.0/24", host_address="198.18.0.254",
        rate_bps=1e8, burst_bytes=50000, delay_ms=None, delay_applied=True, slots=2,
        nodes=[Node(f"node{i}", f"fake-node{i}", f"198.18.0.{i + 1}", f"fake-v{i}")
               for i in range(2)])
    monkeypatch.setattr(placement, "current",
                        lambda prefix: state if prefix == "fake" else pytest.fail(prefix))
    return state


def value_of(cmd: list[str], option: str) -> str:
    return cmd[cmd.index(option) + 1]


def forwarded(cmd: list[str]) -> list[str]:
    return [cmd[i + 1] for i, a in enumerate(cmd) if a == "-x"]


# --- launcher lines -----------------------------------------------------------------------

def test_local_open_mpi_runs_more_ranks_than_cores_unbound(as_user):
    assert mpirun.launcher(4) == ["mpirun", "-np", "4", "--bind-to", "none", "--oversubscribe"]


def test_allow_run_as_root_only_as_root(as_root):
    cmd = mpirun.launcher(2)
    assert cmd[:3] == ["mpirun", "-np", "2"] and cmd.count("--allow-run-as-root") == 1
    assert not forwarded(cmd)  # local ranks inherit the whole environment


def test_mpich_has_its_own_launcher_and_no_open_mpi_options(as_root):
    assert mpirun.launcher(3, Target("mpich")) == ["mpiexec.mpich", "-n", "3"]
    with pytest.raises(UserError, match="Open MPI jobs only"):
        mpirun.launcher(3, Target("mpich", cluster="fake"))


def test_cluster_line_places_ranks_on_the_nodes_and_forwards_the_tracing(two_nodes, as_root):
    cmd = mpirun.launcher(4, CLUSTER, forward=["LD_PRELOAD", "MPISCOPE_OUT",
                                                "MPISCOPE_STATUS_FILE"])
    assert cmd[:3] == ["mpirun", "-np", "4"]
    assert value_of(cmd, "--hostfile") == str(two_nodes.hostfile)
    assert str(two_nodes.agent) in cmd and "plm_rsh_agent" in cmd
    assert value_of(cmd, "btl_tcp_if_include") == "198.18.0.0/24"
    assert value_of(cmd, "--map-by") == "node"  # round-robin across nodes
    assert value_of(cmd, "--bind-to") == "none" and "--allow-run-as-root" in cmd
    assert forwarded(cmd) == ["LD_PRELOAD", "MPISCOPE_OUT", "MPISCOPE_STATUS_FILE"]


def test_cluster_ranks_per_node_packs_them_and_must_fit(two_nodes, as_user):
    cmd = mpirun.launcher(4, CLUSTER, ranks_per_node=2)
    assert value_of(cmd, "--map-by") == "ppr:2:node" and "--allow-run-as-root" not in cmd
    with pytest.raises(UserError, match="5 ranks at 2 per node need more than the 2 nodes"):
        mpirun.launcher(5, CLUSTER, ranks_per_node=2)


def test_a_users_line_is_theirs_locally_and_gets_the_cluster_after_its_launcher(two_nodes):
    user = ["mpirun", "-np", "8", "--map-by", "ppr:2:node", "./a"]
    assert mpirun.adapt(user) == user
    cmd = mpirun.adapt(user, CLUSTER, forward=["MPISCOPE_OUT"])
    assert cmd[0] == "mpirun" and cmd[-5:] == user[1:]
    assert cmd.count("--map-by") == 1  # their mapping, not ours
    assert value_of(cmd, "--hostfile") == str(two_nodes.hostfile)
    assert forwarded(cmd) == ["MPISCOPE_OUT"]


@pytest.mark.parametrize("cmd, says", [
    (["mpiexec.mpich", "-n", "2", "./a"], "mpiexec.mpich: --cluster needs an Open MPI launcher"),
    (["mpirun", "--host", "a,b", "./a"], "mpirun: --cluster chooses the hosts itself; drop --host"),
    (["mpirun", "--hostfile=h", "./a"], "drop --hostfile"),
])
def test_a_users_line_the_cluster_cannot_run_is_one_line(two_nodes, cmd, says):
    with pytest.raises(UserError) as err:
        mpirun.adapt(cmd, CLUSTER)
    assert says in err.value.one_line()


def test_forwarded_is_the_preload_and_every_mpiscope_setting():
    env = {"PATH": "/bin", "LD_PRELOAD": "x.so", "MPISCOPE_OUT": "/t", "MPISCOPE_FILTER": "a",
           "MPISCOPE_STATUS_FILE": "/s", "OMPI_X": "1"}
    assert mpirun.forwarded(env) == ["LD_PRELOAD", "MPISCOPE_FILTER", "MPISCOPE_OUT",
                                     "MPISCOPE_STATUS_FILE"]


def test_the_launcher_flavour_is_guessed_from_its_name():
    assert mpirun.guess_mpi(["/usr/bin/mpiexec.mpich", "-n", "2"]) == "mpich"
    assert mpirun.guess_mpi(["mpiexec.hydra"]) == "mpich"
    assert mpirun.guess_mpi(["mpirun", "-np", "2"]) == "openmpi"


# --- the environment -----------------------------------------------------------------------

@pytest.mark.parametrize("mpi", paths.MPI_FLAVOURS)
def test_traced_env_preloads_the_interposer_of_the_jobs_mpi(libs, mpi, tmp_path):
    env = launch.traced_env(Path("rel/out"), mpi, base={"LD_PRELOAD": "theirs.so"})
    assert env["LD_PRELOAD"] == f"{libs[mpi]}:theirs.so"  # ours first, theirs kept
    assert env["MPISCOPE_OUT"] == str(Path("rel/out").resolve())


PRINT_ENV = [sys.executable, "-c", "import json, os; print(json.dumps(dict(os.environ)))"]


def test_a_captured_job_gets_the_trace_directory_and_a_status_file(libs, tmp_path):
    job = launch.run(PRINT_ENV, tmp_path / "t", Target("mpich"))
    env = json.loads(job.stdout)
    assert env["LD_PRELOAD"].startswith(str(libs["mpich"]))
    assert env["MPISCOPE_OUT"] == str(tmp_path / "t")
    status = Path(env[launch.STATUS_ENV])
    assert not status.exists()  # read and removed when the job ended
    assert "MPISCOPE_JOB_OUTPUT" not in env  # only `mpiscope run` saves the output itself
    assert job.returncode == 0 and job.traced and job.cmd == PRINT_ENV


def test_what_the_interposer_writes_to_the_status_file_is_the_verdict(libs, tmp_path, capfd):
    says = [sys.executable, "-c", "import os; open(os.environ['MPISCOPE_STATUS_FILE'], 'a')"
            ".write('mpiscope: warning: trace not written to X: No space left on device\\n')"]
    job = launch.run(says, tmp_path / "t", stdout="pass")
    assert job.said == ["mpiscope: warning: trace not written to X: No space left on device"]
    assert job.verdict() == job.said[0]  # said once, no "no trace written" after it
    assert (tmp_path / "t" / "program-output.txt").read_text() == ""  # the stdout copy


def test_passing_stdout_moves_an_earlier_run_aside_first(libs, tmp_path):
    out = tmp_path / "t"
    out.mkdir()
    (out / "traces.otf2").write_text("earlier")
    notes = []
    job = launch.run([sys.executable, "-c", "print('hi')"], out, stdout="pass",
                     say=notes.append)
    assert notes == [f"mpiscope: the earlier run in {out} was moved to {tmp_path / 't.1'}"]
    assert (tmp_path / "t.1" / "traces.otf2").read_text() == "earlier"
    assert (out / "program-output.txt").read_text() == "hi\n"
    assert job.verdict() == f"mpiscope: no trace written to {out}"


def test_a_cluster_job_forwards_every_tracing_variable_to_the_nodes(libs, two_nodes, tmp_path,
                                                                     monkeypatch):
    ran = {}

    def fake_run(cmd, env, **kw):
        ran.update(cmd=cmd, env=env)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(launch.subprocess, "run", fake_run)
    launch.run(["./app"], tmp_path / "t", CLUSTER, ranks=2, env={"MPISCOPE_FILTER": "x"})
    sent = forwarded(ran["cmd"])
    assert {"LD_PRELOAD", "MPISCOPE_OUT", "MPISCOPE_STATUS_FILE", "MPISCOPE_FILTER"} <= set(sent)
    assert all(name in ran["env"] for name in sent)
    assert ran["cmd"][-1] == "./app"


def test_a_command_that_does_not_exist_is_one_line(libs, tmp_path):
    with pytest.raises(UserError, match="no-such-launcher: command not found"):
        launch.run(["no-such-launcher", "-np", "2"], tmp_path / "t", stdout="pass")
