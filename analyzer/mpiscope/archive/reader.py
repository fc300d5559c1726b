"""Open a trace: from the Parquet cache when it is current, else decoded from OTF2 (one
archive, `decode`) or from the per-rank archives of a job that died (`salvaged`).
"""

from __future__ import annotations

from pathlib import Path

from mpiscope.archive import cache, salvaged
from mpiscope.archive.decode import (
    READER_VERSION,
    Definitions,
    Progress,
    build_archive,
    require_regular,
)
from mpiscope.archive.trace import Trace
from mpiscope.errors import UserError


def anchor_of(path: Path) -> Path:
    """The anchor file of a trace given as a directory or as its traces.otf2.

    A directory of a job that died (per-rank archives only) has none: load/build read it
    through `salvaged` before asking for an anchor."""
    path = Path(path)
    if not path.exists():
        raise UserError(str(path), "no such file or directory")
    anchor = path / "traces.otf2" if path.is_dir() else path
    require_regular(anchor)
    if not anchor.is_file():
        cut = salvaged.incomplete(path) if path.is_dir() else []
        if cut:  # per-rank archives begun, none finished: every rank was killed writing
            raise UserError(str(path), "the job ended without MPI_Finalize and no rank "
                            "finished writing its trace (incomplete: "
                            f"{', '.join(f'rank{r}' for r in cut)})")
        lost = salvaged.unrecovered(path) if path.is_dir() else {}
        if lost:  # every rank killed outright, and no log could be recovered
            raise UserError(str(path), "the job's ranks were killed and none of their "
                            "crash-safe logs could be recovered (" + "; ".join(lost.values())
                            + ")")
        raise UserError(str(path), "not an OTF2 archive (no traces.otf2)")
    try:
        with open(anchor, "rb") as f:
            head = f.read(64)
    except OSError as err:
        raise UserError(str(anchor), f"cannot read: {err.strerror}") from None
    if b"OTF2" not in head[:16]:  # the anchor starts with an endianness byte, then "?OTF2"
        raise UserError(str(anchor), "not an OTF2 anchor file (no OTF2 signature)")
    return anchor


def build(path: Path, progress: Progress | None = None) -> Trace:
    """Read the trace at `path` from scratch (no cache): one archive, or the per-rank
    archives of a job that died (salvaged.py)."""
    if salvaged.is_salvaged(Path(path)):
        return salvaged.build(Path(path), progress)
    anchor = anchor_of(path)
    if progress:
        progress("definitions")
    return build_archive(anchor, Definitions(anchor), progress)


def load(path: Path | str, *, use_cache: bool = True, progress: Progress | None = None) -> Trace:
    """Open a trace: from the Parquet cache when it is current, else from OTF2.

    `progress`, if given, is called with short status texts ("events 3.1M of 10.0M (31%)").
    Raises UserError(path, problem) for anything that is not a readable OTF2 archive.
    """
    path = Path(path)
    if salvaged.is_salvaged(path):  # a job that died: its per-rank archives as one trace
        return salvaged.load(path, use_cache=use_cache, progress=progress)
    anchor = anchor_of(path)
    # the cache is per directory; the anchor's name tells archives in one dir apart
    return cache.load_or_build(anchor.parent, f"{READER_VERSION}:{anchor.name}",
                               lambda: build(path, progress), use_cache=use_cache,
                               progress=progress)
