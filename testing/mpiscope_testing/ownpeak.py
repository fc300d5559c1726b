"""Run a command whose peak memory is its own, not its launcher's.

Linux hands a process's peak resident size (`getrusage(...).ru_maxrss`, VmHWM) on across
fork and exec: a program started from a pytest process that once held 2.5 GB reports a
peak of 2.5 GB from its first instruction. libFuzzer's `-rss_limit_mb` reads exactly that,
so a fuzzer started late in a full test run declared "out-of-memory" within a second, on
whatever input it held (an empty one), whenever the test process had grown past the
limit; alone, the same test passed. Started from a process whose own image is small (a
shell that forks it), the program's peak starts at the shell's.
"""

from __future__ import annotations


def own_peak(cmd: list[str]) -> list[str]:
    """`cmd` started by a fresh shell that forks it (not `exec`: the shell's peak is its
    own, a forked child starts from it) and exits with its status."""
    return ["/bin/sh", "-c", '"$@"; exit $?', "sh", *cmd]
