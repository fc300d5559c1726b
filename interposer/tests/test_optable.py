"""src/optable.h, the runtime's one open-addressing table (call sites, communicators,
requests): its C unit test, unit/optable_test.c, built warnings-as-errors and run."""

from __future__ import annotations

import subprocess
from pathlib import Path

HERE = Path(__file__).parent


def test_optable(tmp_path: Path) -> None:
    exe = tmp_path / "optable_test"
    subprocess.run(["cc", "-std=c11", "-O2", "-g", "-Wall", "-Wextra", "-Werror",
                    "-I", str(HERE.parent / "src"), "-o", str(exe),
                    str(HERE / "unit" / "optable_test.c")], check=True, capture_output=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "ok\n"
