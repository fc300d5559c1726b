"""mpiscope-recover on a real crash-safe log: MiB/s and events/s, with `cat` of the same
log (read once, page cache warm) measured in the same run as the reference (bench/recover/run)."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import tempfile
import time
from pathlib import Path

from mpiscope.archive import recover
from mpiscope_testing.killing import KILLED, run_and_kill
from mpiscope_testing.scenarios import compile_program


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    iterations = int(os.environ.get("BENCH_RECOVER_ITERATIONS", "300000"))
    repeat = int(os.environ.get("BENCH_RECOVER_REPEAT", "3"))
    with tempfile.TemporaryDirectory(prefix="bench-recover-") as tmp_s:
        tmp = Path(tmp_s)
        exe = compile_program("killed", tmp)
        job = run_and_kill(exe, tmp / "job", after=iterations, args=("1000000000", "0"),
                           env={"MPISCOPE_BUFFER_SIZE": "1M"})
        live = job.out / recover.LIVE_DIR
        log = [live / f"rank{KILLED}.defs", live / f"rank{KILLED}.events"]
        mib = sum(p.stat().st_size for p in log) / (1 << 20)
        summaries: list[str] = []

        def run_tool() -> float:
            """The tool on a fresh copy of the log (it deletes the log it recovers)."""
            work = tmp / "work"
            shutil.rmtree(work, ignore_errors=True)
            (work / recover.LIVE_DIR).mkdir(parents=True)
            for p in log:
                shutil.copyfile(p, work / recover.LIVE_DIR / p.name)
            t0 = time.perf_counter()
            proc = subprocess.run([str(recover.tool()), str(work), str(KILLED)],
                                  capture_output=True, text=True, check=True)
            summaries.append(proc.stdout.strip())
            return time.perf_counter() - t0

        tool_s = min(run_tool() for _ in range(repeat))
        cat_s = best(lambda: subprocess.run(["cat", *map(str, log)], check=True,
                                            stdout=subprocess.DEVNULL), repeat)
        summary = summaries[-1]
        m = re.match(r"rank \d+: (\d+) events", summary)
        assert m, summary
        events = int(m.group(1))
        print(f"log of the killed rank: {mib:.1f} MiB, {events} events")
        print(f"mpiscope-recover: {tool_s:.3f} s  {mib / tool_s:8.1f} MiB/s  "
              f"{events / tool_s / 1e6:6.2f} M events/s  (checks, writes, reads back)")
        print(f"cat (reference):  {cat_s:.3f} s  {mib / cat_s:8.1f} MiB/s")
        limit = recover.TIMEOUT_BASE_S + recover.TIMEOUT_PER_MIB_S * mib
        print(f"recover.py's timeout for this log: {limit:.0f} s ({limit / tool_s:.0f}x the "
              "time taken)")
        many_sites(log, tmp, repeat)


def many_sites(log: list[Path], tmp: Path, repeat: int) -> None:
    """The same log with n extra call sites (ids after the real ones, each its own return
    address in the program): the time per site stays flat as n grows (n log n)."""
    from mpiscope_testing import livelog

    defs, events = (p.read_bytes() for p in log)
    real = livelog.of_type(defs, "CALLSITE")
    base = real[0]
    print("call sites  mpiscope-recover   per site")
    for n in (0, 20000, 80000):
        extra = bytearray()
        for i in range(n):
            cs = bytearray(base.payload)
            livelog.layout().callsite.put(cs, "id", len(real) + i)
            livelog.layout().callsite.put(cs, "addr", int(livelog.layout().callsite.get(
                base.payload, "addr")) + 16 * (i + 1))
            extra += struct.pack("<II", base.type, len(cs)) + cs
        header_end = livelog.records(defs)[0].end  # after the header: ids before their use
        work_defs = defs[:header_end] + bytes(extra) + defs[header_end:]

        def run(work_defs: bytes = work_defs) -> None:
            work = tmp / "sites"
            shutil.rmtree(work, ignore_errors=True)
            (work / recover.LIVE_DIR).mkdir(parents=True)
            (work / recover.LIVE_DIR / log[0].name).write_bytes(work_defs)
            (work / recover.LIVE_DIR / log[1].name).write_bytes(events)
            proc = subprocess.run([str(recover.tool()), str(work), str(KILLED)],
                                  capture_output=True, text=True)
            assert proc.returncode == 0, proc.stderr

        t = best(run, repeat)
        per = f"{t / n * 1e6:6.1f} us" if n else "(the log as killed)"
        print(f"{len(real) + n:10d}  {t:14.3f} s   {per}")


if __name__ == "__main__":
    main()
