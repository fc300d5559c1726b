"""The verdicts bandwidth/latency-bound and polling, on traces built by construction:
the path the replay fits is the one the timestamps were made from, so what the calls
lose to transfer, and each saving, can be computed by hand."""

import os
import re
import subprocess

import pytest
from test_dask_engine import differences

from mpiscope.analysis import findings, simulate
from mpiscope.analysis.session import Analysis
from mpiscope.analysis.simulate import Scenario as Scenario_
from mpiscope.archive import reader
from mpiscope.engines import rankfindings, slices
from mpiscope_testing.scenarios import PROGRAMS, Scenario, compile_program, marker_line

LAT = 50_000  # ns: the inter-node path the timestamps follow, latency + n / bandwidth
BW = 1e7  # B/s (80 Mbit/s)
PERIOD = 20_000_000  # ns between iterations (rank 0 paces the run)


def xfer(n: int) -> int:
    return int(n / BW * 1e9)


def by_kind(found, kind):
    return [f for f in found if f.kind == kind]


def _pipeline(iterations: int = 20) -> tuple[Scenario, list[int]]:
    """Rank 0 sends an 8-byte token to rank 1, computes 100 µs and sends a block to rank
    1, which receives it and passes it on to rank 2, which acknowledges it to rank 0 (3
    hosts, eager blocks of 32 and 64 KiB in turn); the next iteration starts when the
    acknowledgement is in. Nobody computes but rank 0: every wait (rank 1 for the token
    and the block, rank 2 for the block, rank 0 for the acknowledgement) is data in
    flight, some of it behind a late sender that was itself receiving."""
    sc = Scenario(hosts={0: "n0", 1: "n1", 2: "n2"})
    sizes = []
    t, free1, free2 = 0, 0, 0  # rank 0's iteration start; when ranks 1 and 2 are free
    for it in range(iterations):
        n = 65536 if it % 2 else 32768
        sizes.append(n)
        tok = sc.call(0, "MPI_Send", t, t + 1_000, callsite="pipe.c:8", bytes_sent=8)
        got = t + LAT + xfer(8)
        r_tok = sc.call(1, "MPI_Recv", free1, got, callsite="pipe.c:19", bytes_recv=8)
        sc.message(tok, r_tok, 8)
        s0 = sc.call(0, "MPI_Send", t + 100_000, t + 110_000, callsite="pipe.c:10",
                     bytes_sent=n)
        a1 = t + 100_000 + LAT + xfer(n)
        r1 = sc.call(1, "MPI_Recv", got, a1, callsite="pipe.c:20", bytes_recv=n)
        sc.message(s0, r1, n)
        s1 = sc.call(1, "MPI_Send", a1, a1 + 10_000, callsite="pipe.c:22", bytes_sent=n)
        free1 = a1 + 10_000
        a2 = a1 + LAT + xfer(n)
        r2 = sc.call(2, "MPI_Recv", free2, a2, callsite="pipe.c:30", bytes_recv=n)
        sc.message(s1, r2, n)
        ack = sc.call(2, "MPI_Send", a2, a2 + 1_000, callsite="pipe.c:31", bytes_sent=8)
        free2 = a2 + 1_000
        a3 = a2 + LAT + xfer(8)
        r3 = sc.call(0, "MPI_Recv", t + 110_000, a3, callsite="pipe.c:12", bytes_recv=8)
        sc.message(ack, r3, 8)
        t = a3
    return sc, sizes


def test_waiting_that_is_data_in_flight_is_bandwidth_bound_not_imbalance():
    sc, sizes = _pipeline()
    a = Analysis(sc.trace())
    found = a.all_findings
    # the late senders' delays are their own receives' transfers: no load imbalance
    # claimed, listed or minor
    assert by_kind(found, "load_imbalance") == []
    bound = {f.callsite: f for f in by_kind(found, "bandwidth_bound")}
    # the token's and the acknowledgement's waits are behind the blocks' transfers too:
    # bandwidth-bound whatever their own size
    assert set(bound) == {"pipe.c:12", "pipe.c:19", "pipe.c:20", "pipe.c:30"}
    f = bound["pipe.c:30"]
    assert (f.function, f.calls) == ("MPI_Recv", 20)
    ev = f.evidence
    assert ev["path"] == "inter-node"
    assert ev["latency_s"] == pytest.approx(LAT / 1e9, rel=1e-6)
    assert ev["bandwidth_Bps"] == pytest.approx(BW, rel=1e-6)
    assert ev["messages"] == 20 and ev["bytes"] == sum(sizes)
    # rank 2 waits from its acknowledgement until rank 1 sends the next block: a late
    # sender as the wait states count it (rank 1 was receiving it meanwhile)
    assert ev["waiting_s"] > 0.5 * f.time_s
    assert ev["transfer_share"] > 0.95
    # twice the bandwidth: each iteration is one block transfer and half the
    # acknowledgement's shorter (the chain has two blocks and one token of transfer)
    saved = sum(xfer(n) + xfer(8) / 2 for n in sizes)
    assert f.estimated_savings_s * 1e9 == pytest.approx(saved, rel=1e-6)
    assert "With twice the bandwidth on the inter-node path (all its messages), the run " \
        f"saves ~{f.estimated_savings_s * 1e3:.3g} ms" in f.message
    assert "data in flight on the inter-node path, not waiting for a late partner" \
        in f.message
    assert "50 µs + n / 10 MB/s (80 Mbit/s)" in f.message
    assert f in a.findings  # far above the noise floor
    # one scenario for the path: every site on it states the same saving
    assert {g.estimated_savings_s for g in bound.values()} == {f.estimated_savings_s}


def test_call_sites_on_the_base_replay_are_read_from_it_not_replayed_again(monkeypatch):
    """The verdict asks the base replay for its call sites' times: the base run keeps each
    call's replayed time, equal to a baseline program built and run again."""
    trace = _pipeline()[0].trace()
    replays = findings.Replays(trace)
    replays.base  # noqa: B018 (the base replay, made before counting)
    builds = []
    build = simulate.program.build
    monkeypatch.setattr(simulate.program, "build", lambda *a: builds.append(a) or build(*a))
    sites = [("MPI_Recv", "pipe.c:12"), ("MPI_Send", "pipe.c:8")]
    kept = replays.site_ns(Scenario_(), sites)
    assert builds == []
    monkeypatch.undo()
    pre = replays._prepared_program()
    prog = simulate.program.build(trace, replays.base.fitted, replays.base.fitted,
                                  Scenario_(), pre)
    tl = simulate.engine.run(prog)
    for f, c in sites:
        mask = simulate.program.site_mask(trace.calls, f, c)[pre.op_call]
        assert mask.any()
        assert kept[(f, c)] == pytest.approx(float((tl.end - tl.start)[mask].sum()),
                                             rel=1e-12)


def _chat() -> Scenario:
    """A ping-pong of 8-byte messages between two hosts, 20 per iteration, then two
    blocks (32 and 64 KiB) each acknowledged, so the fit sees the bandwidth too. Nobody
    computes: each receive waits for the partner, whose send waited for the previous
    message: per-message latency."""
    sc = Scenario(hosts={0: "a", 1: "b"})
    hop = LAT + xfer(8)
    t, free1 = 0, 0  # rank 0's next send; when rank 1 is free
    for _ in range(20):
        for _ in range(20):
            s = sc.call(0, "MPI_Send", t, t + 1_000, callsite="chat.c:4", bytes_sent=8)
            r = sc.call(1, "MPI_Recv", free1, t + hop, callsite="chat.c:9", bytes_recv=8)
            sc.message(s, r, 8)
            ack = sc.call(1, "MPI_Send", t + hop, t + hop + 1_000, callsite="chat.c:10",
                          bytes_sent=8)
            free1 = t + hop + 1_000
            r2 = sc.call(0, "MPI_Recv", t + 1_000, t + 2 * hop, callsite="chat.c:5",
                         bytes_recv=8)
            sc.message(ack, r2, 8)
            t += 2 * hop
        for n in (32768, 65536):
            s = sc.call(0, "MPI_Send", t, t + 1_000, callsite="bulk.c:1", bytes_sent=n)
            a = t + LAT + xfer(n)
            r = sc.call(1, "MPI_Recv", free1, a, callsite="bulk.c:2", bytes_recv=n)
            sc.message(s, r, n)
            ack = sc.call(1, "MPI_Send", a, a + 1_000, callsite="bulk.c:4", bytes_sent=8)
            free1 = a + 1_000
            r2 = sc.call(0, "MPI_Recv", t + 1_000, a + hop, callsite="bulk.c:3",
                         bytes_recv=8)
            sc.message(ack, r2, 8)
            t = a + hop
    return sc


def test_many_small_messages_in_flight_are_latency_bound():
    found = Analysis(_chat().trace()).all_findings
    lat = {f.callsite: f for f in by_kind(found, "latency_bound")}
    assert {"chat.c:5", "chat.c:9"} <= set(lat)
    f = lat["chat.c:9"]
    assert f.evidence["messages"] == 400 and f.evidence["bytes"] == 400 * 8
    assert f.evidence["latency_part_s"] > f.evidence["bandwidth_part_s"]
    assert f.evidence["transfer_share"] > 0.9
    assert "With half the latency on the inter-node path (all its messages), the run " \
        "saves" in f.message
    assert "MPI_Recv at chat.c:9 is latency-bound: " in f.message
    assert not {"chat.c:5", "chat.c:9"} & {g.callsite for g in
                                          by_kind(found, "bandwidth_bound")}
    assert by_kind(found, "load_imbalance") == []


def _polls(sc: Scenario, t: int, site: str, send: int, chunks: int, poll_ns: int,
           work_ns: int) -> int:
    """Rank 0 posts a receive, then computes `chunks` x work_ns with a merged polling
    visit (100 MPI_Test calls, poll_ns) after each chunk, then completes the receive in
    one more MPI_Test (at its arrival at the latest); `send`: rank 1's send call.
    Returns when rank 0 is done."""
    post = sc.call(0, "MPI_Irecv", t, t + 1_000, callsite=site.replace(":7", ":5"),
                   bytes_recv=8)
    now = t + 1_000
    for _ in range(chunks):
        now += work_ns
        sc.call(0, "MPI_Test", now, now + poll_ns, callsite=site, polls=100)
        now += poll_ns
    arrival = sc.calls[send]["start"] + LAT
    done = sc.call(0, "MPI_Test", max(now, arrival), max(now, arrival) + 500, callsite=site)
    sc.message(send, post, 8, recv_complete=done)
    return max(now, arrival) + 500


def _pings(sc: Scenario, n: int = 10) -> int:
    """n 8-byte messages from rank 1 to rank 0 received as they arrive: the fitted
    latency is LAT (with the polled messages, whose receive ends later)."""
    for i in range(n):
        t = i * 100_000
        s = sc.call(1, "MPI_Send", t, t + 1_000, callsite="fit.c:1", bytes_sent=8)
        r = sc.call(0, "MPI_Recv", t, t + LAT, callsite="fit.c:2", bytes_recv=8)
        sc.message(s, r, 8)
    return n * 100_000


def _spin() -> Scenario:
    """The messages are there (rank 1 sent them all first) while rank 0 computes and
    polls between chunks: the polls are pure overhead."""
    sc = Scenario(hosts={0: "a", 1: "b"})
    t = _pings(sc)
    sends = [sc.call(1, "MPI_Send", t + 2_000 * i, t + 2_000 * i + 1_000,
                     callsite="peer.c:3", bytes_sent=8) for i in range(10)]
    for s in sends:
        t = _polls(sc, t, "spin.c:7", s, chunks=10, poll_ns=20_000, work_ns=100_000)
    return sc


def test_polling_in_a_compute_loop_is_overhead():
    a = Analysis(_spin().trace())
    [spin] = by_kind(a.all_findings, "polling")
    assert (spin.function, spin.callsite) == ("MPI_Test", "spin.c:7")
    assert spin.calls == 10 * (10 * 100 + 1)  # merged visits count as their calls
    assert spin.evidence["visits"] == 10 * 11 and spin.evidence["idle_calls"] == 10 * 1000
    # replayed without the idle polls, the computation kept: rank 0 ends sooner by all
    # their time (each message had arrived), rank 1 long done
    assert spin.estimated_savings_s * 1e9 == pytest.approx(10 * 10 * 20_000, rel=1e-6)
    assert spin in a.findings
    assert "MPI_Test at spin.c:7 polls: 10,010 calls (110 recorded visits)" in spin.message
    assert "Replacing the polling by a blocking wait (the calls that complete nothing " \
        "taken out, the computation between them kept; the wait for the message itself " \
        "stays) saves" in spin.message


def test_polling_on_a_late_message_saves_nothing():
    """Rank 0 polls for 2 ms for a message rank 1 sends only then: without the polls it
    would wait as long. Reported, under `minor` (its saving is below the noise floor)."""
    sc = Scenario(hosts={0: "a", 1: "b"})
    t = _pings(sc)
    for _ in range(10):
        s = sc.call(1, "MPI_Send", t + 2_000_000, t + 2_001_000, callsite="peer.c:3",
                    bytes_sent=8)
        t = _polls(sc, t, "late.c:7", s, chunks=10, poll_ns=150_000, work_ns=50_000)
    a = Analysis(sc.trace())
    [late] = by_kind(a.all_findings, "polling")
    assert by_kind(a.findings, "polling") == []
    assert late.callsite == "late.c:7" and late.calls == 10 * 1001
    assert late.estimated_savings_s < 0.01 * late.evidence["idle_s"]
    [minor] = by_kind(a.minor_findings, "polling")
    assert "below the noise floor" in minor.evidence["minor_reason"]


def test_polling_on_a_real_late_message(tmp_path):
    """A real MPI job (programs/pollwait.c): rank 0 polls with MPI_Test for a message rank
    1 sends only once rank 0 has made 1000 polls (it says so in a message of its own) and
    300 ms after that, so at least 1000 polls complete nothing whatever the scheduling.
    The polling finding (listed or minor, as this run's timing puts its saving) names the
    MPI_Test line and counts exactly the calls the program made (the interposer merged
    them into fewer visits)."""
    exe = compile_program("pollwait", tmp_path)
    out = tmp_path / "trace"
    lib = subprocess.run(["mpiscope", "lib"], check=True, capture_output=True,
                         text=True).stdout.strip()
    env = dict(os.environ, LD_PRELOAD=lib, MPISCOPE_OUT=str(out),
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    job = subprocess.run(["mpirun", "--oversubscribe", "-np", "2", str(exe), "300"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert job.returncode == 0, job.stderr[-2000:]
    calls = int(re.search(r"test_calls=(\d+) value=42", job.stdout).group(1))
    a = Analysis(reader.load(out))
    site = f"pollwait.c:{marker_line(PROGRAMS / 'pollwait.c', 'test')}"
    [f] = by_kind(a.all_findings, "polling")
    assert (f.function, f.callsite, f.calls) == ("MPI_Test", site, calls)
    # every call but the one that completed the receive completed nothing
    assert f.evidence["idle_calls"] == calls - 1
    assert f.evidence["visits"] < calls  # merged at the source
    assert f.evidence["saving_replayed"]


def _in_rank_order(sc: Scenario) -> Scenario:
    """The same calls numbered rank by rank, in time order (as a trace read back has
    them, and the rank slices need)."""
    order = sorted(range(len(sc.calls)), key=lambda i: (sc.calls[i]["rank"],
                                                        sc.calls[i]["start"]))
    new = {old: i for i, old in enumerate(order)}
    out = Scenario(hosts=dict(sc.hosts), calls=[sc.calls[i] for i in order])
    for m in sc.messages:
        out.messages.append({**m, **{k: new[m[k]] for k in ("send_call", "recv_call",
                                                            "send_complete", "recv_complete")
                                     if m[k] is not None}})
    return out


@pytest.mark.parametrize("build", [lambda: _pipeline()[0], _chat, _spin],
                         ids=["pipeline", "chat", "spin"])
def test_per_rank_passes_give_the_same_verdicts(build):
    """The Dask engine's per-rank passes (engines/rankfindings.py) find the same."""
    a = Analysis(_in_rank_order(build()).trace())
    parts = slices.all_of_trace(a.trace, a.wait_states)
    got = rankfindings.find(lambda fn: [fn(p) for p in parts], a.wait_states, a.ranks,
                            a.loop, a.critical_path)
    want = findings.find(a.trace, a.wait_states, a.ranks, a.loop, a.critical_path)
    assert {f.kind for f in want} & {"bandwidth_bound", "latency_bound", "polling"}
    assert differences([f.to_dict() for f in want], [f.to_dict() for f in got]) == []
