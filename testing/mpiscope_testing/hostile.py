"""A trace whose names are hostile: Rich markup, terminal escapes (OSC window title, CSI
colours, C1 controls), HTML (scripts, event handlers, the tags Plotly renders) and
Markdown, in the places a trace names something (hosts, MPI and user functions, call
sites' files, communicators, the program and its command line). Every report must show
them as the text they are.

`hostile_example(HOSTILE)` and `hostile_example(PLAIN)` write the same run under hostile
and plain names: a report that treats names as data has the same structure for both.
"""

from __future__ import annotations

from dataclasses import dataclass

from mpiscope_testing.tracegen import TraceBuilder

MARKUP = "[/i]"
MARKUP_LINK = "[link=https://evil.example]x[/link][bold red]"
TITLE = "\x1b]0;pwn\x07"  # OSC: sets the terminal's window title
COLOUR = "\x1b[31mred\x1b[0m"
C1 = "\x9b31m"  # C1 CSI: a colour on terminals that honour 8-bit controls
SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(2)>"
LINK = '<a href="https://evil.example">click</a><b>bold</b>'  # tags Plotly would render
PIPE = "a|b`c`"  # a Markdown table's cell separator and code span
# the characters no terminal output may pass on raw
CONTROLS = ("\x1b", "\x07", "\x9b")


@dataclass(frozen=True)
class Names:
    hosts: tuple[str, str, str]
    user_function: str
    mpi_function: str  # an MPI region the analysis does not know
    callsite_file: str
    program: str
    comm: str


HOSTILE = Names(
    hosts=(f"node{MARKUP}{LINK}", f"host{TITLE}{C1}{COLOUR}", f"h{SCRIPT}{IMG}"),
    user_function=f"compute{MARKUP_LINK}{COLOUR}{SCRIPT}",
    mpi_function=f"MPI_{SCRIPT}{TITLE}{LINK}",
    callsite_file=f"{IMG}{MARKUP}{TITLE}{PIPE}.c",
    program=f"/tmp/{SCRIPT}{TITLE}",
    comm=f"comm{MARKUP}{SCRIPT}{TITLE}")
PLAIN = Names(hosts=("node0", "node1", "node2"), user_function="compute",
              mpi_function="MPI_Unknown", callsite_file="app.c", program="/tmp/app",
              comm="comm")


def hostile_example(names: Names = HOSTILE) -> TraceBuilder:
    """Three ranks on three hosts exchanging messages, in named calls and regions."""
    n = len(names.hosts)
    tb = TraceBuilder(ranks=n, hosts=list(names.hosts), program=names.program,
                      cmdline=f"mpirun -np {{n}} {names.program}")
    comm = tb.comm(range(n), name=names.comm)
    site = f"{names.callsite_file}:7"
    for r in range(n):
        tb.call(r, 0, 10, "MPI_Init", callsite=site)
    t = 20
    for it in range(6):
        for r in range(n):
            tb.enter(r, t, names.user_function)
            tb.leave(r, t + 50 + 10 * r, names.user_function)
            tb.call(r, t + 60 + 10 * r, t + 70 + 10 * r, names.mpi_function, callsite=site)
        for r in range(n):
            tb.send_call(r, t + 100, t + 110, dest=(r + 1) % n, tag=it, nbytes=64, comm=comm,
                         callsite=f"{names.callsite_file}:{20 + r}")
        for r in range(n):
            tb.recv_call(r, t + 105, t + 130 + 5 * r, src=(r - 1) % n, tag=it, nbytes=64,
                         comm=comm, callsite=site)
        for r in range(n):
            tb.collective(r, t + 140 + 7 * r, t + 200, "MPI_Allreduce", comm=comm, sent=8,
                          received=8, in_hash=r + 1, out_hash=99, callsite=site)
        t += 220
    for r in range(n):
        tb.call(r, t, t + 10, "MPI_Finalize", callsite=site)
    return tb
