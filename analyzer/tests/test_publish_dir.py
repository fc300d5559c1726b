"""output.publish_dir: a directory (the Parquet cache, the Dask cache, the timeline
pyramid) is built beside its target and put in place whole, or not at all."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mpiscope import output


def _build(target: Path, version: str, files: int = 20) -> None:
    with output.publish_dir(target) as tmp:
        assert tmp.is_dir() and not any(tmp.iterdir())
        for i in range(files):
            (tmp / f"part-{i}.parquet").write_text(version)
        (tmp / "manifest.json").write_text(version)  # last, as the caches do


def _leftovers(target: Path) -> list[str]:
    return sorted(p.name for p in target.parent.iterdir() if p.name != target.name)


def test_new_target_appears_whole(tmp_path: Path) -> None:
    target = tmp_path / "cache"
    _build(target, "v1")
    assert (target / "manifest.json").read_text() == "v1"
    assert len(list(target.iterdir())) == 21
    assert _leftovers(target) == []


def test_success_replaces_old_target(tmp_path: Path) -> None:
    target = tmp_path / "cache"
    _build(target, "v1", files=30)
    with output.publish_dir(target) as tmp:
        (tmp / "manifest.json").write_text("v2")
        # still building: the old target is untouched
        assert (target / "manifest.json").read_text() == "v1"
    assert sorted(p.name for p in target.iterdir()) == ["manifest.json"]  # no old file kept
    assert (target / "manifest.json").read_text() == "v2"
    assert _leftovers(target) == []


@pytest.mark.parametrize("old", [True, False])
def test_failure_leaves_old_target_and_no_temp(tmp_path: Path, old: bool) -> None:
    target = tmp_path / "cache"
    if old:
        _build(target, "v1")
    with pytest.raises(RuntimeError, match="writer failed"):
        with output.publish_dir(target) as tmp:
            (tmp / "part-0.parquet").write_text("half")
            raise RuntimeError("writer failed")
    if old:
        assert (target / "manifest.json").read_text() == "v1"
        assert len(list(target.iterdir())) == 21
    else:
        assert not target.exists()
    assert _leftovers(target) == []


def test_temp_of_a_killed_writer_is_removed(tmp_path: Path) -> None:
    target = tmp_path / "cache"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    pid = dead.stdout.strip()
    stale = tmp_path / f"cache.tmp{pid}-0123abcd@{socket.gethostname()}"
    stale.mkdir()
    (stale / "part-0.parquet").write_text("from a SIGKILLed writer")
    # the same pid on another node (a shared file system): maybe alive, left alone
    elsewhere = tmp_path / f"cache.tmp{pid}-4567cdef@{socket.gethostname()}-not"
    elsewhere.mkdir()
    _build(target, "v1")
    assert _leftovers(target) == [elsewhere.name]


POLL = """
import os, sys
path, ready, stop = sys.argv[1], sys.argv[2], sys.argv[3]
seen = missing = 0
open(ready, "w").close()
while not os.path.exists(stop):
    if os.path.exists(path):
        seen += 1
    else:
        missing += 1
print(seen, missing)
"""


def test_replacing_never_leaves_the_target_missing(tmp_path: Path) -> None:
    """A reader in another process looking at the target while it is replaced again and
    again always finds it (swapped in one step, not removed and then renamed)."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    if not output._exchange(a, b):
        pytest.skip("this file system cannot swap directories (RENAME_EXCHANGE)")
    target = tmp_path / "cache"
    _build(target, "v0")
    ready, stop = tmp_path / "ready", tmp_path / "stop"
    poller = subprocess.Popen([sys.executable, "-c", POLL, str(target / "manifest.json"),
                               str(ready), str(stop)], stdout=subprocess.PIPE, text=True)
    try:
        # the poller is polling (a busy machine may take long to start Python)
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert poller.poll() is None, "the poller exited"
            assert time.monotonic() < deadline, "the poller did not start in 120 s"
            time.sleep(0.01)
        for i in range(1, 300):
            _build(target, f"v{i}")
    finally:
        stop.touch()
        out, _ = poller.communicate(timeout=30)
    seen, missing = map(int, out.split())
    assert seen > 0 and missing == 0
    assert (target / "manifest.json").read_text() == "v299"
    assert _leftovers(target) == ["a", "b", "ready", "stop"]
