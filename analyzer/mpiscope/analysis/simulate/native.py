"""ctypes binding of the native replay engine (analyzer/native/replay.c): the same
algorithm as engine.reference, at C speed."""

from __future__ import annotations

import ctypes as C

import numpy as np

from mpiscope.paths import artefact

_P = C.c_void_p
_FIELDS = [("nranks", C.c_int64), ("nops", C.c_int64), ("nmsg", C.c_int64),
           ("ninst", C.c_int64)] + [(name, _P) for name in (
               "op_lo", "gap", "cost", "removed", "ps_ptr", "ps_idx", "pr_ptr", "pr_idx",
               "wr_ptr", "wr_idx", "ws_ptr", "ws_idx", "op_inst", "op_waits", "eager",
               "contended", "lat", "xfer", "msg_sender", "inst_size", "inst_cost",
               "absorb", "waited", "start", "end", "arrival", "s_post", "rank_clock")] + [
                   ("stuck_rank", C.c_int64)]


class Program(C.Structure):
    _fields_ = _FIELDS


_lib: C.CDLL | None = None


def library() -> C.CDLL:
    global _lib
    if _lib is None:
        path = artefact("native/libmpiscope_replay.so", "native replay engine")
        lib = C.CDLL(str(path))
        lib.mpsim_run.restype = C.c_int
        lib.mpsim_run.argtypes = [C.POINTER(Program)]
        _lib = lib
    return _lib


def run(arrays: dict[str, np.ndarray], sizes: dict[str, int]) -> int:
    """Run the engine on `arrays` (C-contiguous, the dtypes replay.c expects; outputs
    included) -> 0, or 1 + the first stuck rank on a deadlock."""
    prog = Program(**sizes, **{k: v.ctypes.data for k, v in arrays.items()})
    rc = library().mpsim_run(C.byref(prog))
    if rc < 0:
        raise MemoryError("native replay engine")
    return 0 if rc == 0 else 1 + int(prog.stuck_rank)
