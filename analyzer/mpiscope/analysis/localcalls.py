"""MPI functions that never communicate: local queries and bookkeeping on local objects.

A call of one sends nothing, waits for no other process and touches no file, so it
cannot mark a step of the program's communication: the main loop is never anchored on
one (iterations.py). By name, as every tracer records them:

- the interposer's `## local` functions (interposer/gen/mpi.spec), which it leaves
  unrecorded but other tracers (Score-P) may record: process and library queries, Wtime,
  error classes and handlers, communicator queries and attributes, topology queries,
  groups, info objects, status and address arithmetic, datatype queries, operations;
- the local ones it does record: datatype constructors, commit and free, packing,
  MPI_Reduce_local, memory and buffer attachment.

Anything that can block or communicate (Comm_split, Comm_dup, Cart_create, Win_*,
File_*, Buffer_detach, ...) is not local. MPI-4 large-count twins (`_c`) are as their
base function.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

# whole families of local objects: none of their functions communicates
_PREFIXES = ("MPI_Type_", "MPI_Group_", "MPI_Info_", "MPI_Op_", "MPI_Errhandler_",
             "MPI_Attr_", "MPI_Keyval_", "MPI_Status_", "MPI_Aint_", "MPI_Add_error_",
             "MPI_Error_", "MPI_Grequest_", "MPI_Pack", "MPI_Unpack",
             "MPI_T_")  # the tools interface: the library's own variables
# per-object handlers, attributes, keyvals, names and C/Fortran handle conversions
# (Comm_, Win_, File_, Session_, Type_, Request_, Message_)
_SUFFIXES = ("_errhandler", "_get_attr", "_set_attr", "_delete_attr", "_create_keyval",
             "_free_keyval", "_get_name", "_set_name", "_c2f", "_f2c")
_NAMES = frozenset((
    # process and library queries
    "MPI_Initialized", "MPI_Finalized", "MPI_Query_thread", "MPI_Is_thread_main",
    "MPI_Get_version", "MPI_Get_library_version", "MPI_Get_processor_name", "MPI_Wtime",
    "MPI_Wtick", "MPI_Pcontrol",
    # communicator queries
    "MPI_Comm_rank", "MPI_Comm_size", "MPI_Comm_remote_size", "MPI_Comm_test_inter",
    "MPI_Comm_compare", "MPI_Comm_get_parent", "MPI_Comm_get_info", "MPI_Comm_group",
    "MPI_Comm_remote_group",
    # topology queries (the constructors communicate)
    "MPI_Topo_test", "MPI_Dims_create", "MPI_Cart_coords", "MPI_Cart_rank",
    "MPI_Cart_shift", "MPI_Cart_get", "MPI_Cartdim_get", "MPI_Cart_map", "MPI_Graph_get",
    "MPI_Graphdims_get", "MPI_Graph_neighbors", "MPI_Graph_neighbors_count",
    "MPI_Graph_map", "MPI_Dist_graph_neighbors", "MPI_Dist_graph_neighbors_count",
    # status and address arithmetic
    "MPI_Get_count", "MPI_Get_elements", "MPI_Get_elements_x", "MPI_Test_cancelled",
    "MPI_Get_address", "MPI_Address",
    # session queries
    "MPI_Session_get_num_psets", "MPI_Session_get_nth_pset", "MPI_Session_get_info",
    "MPI_Session_get_pset_info",
    # recorded, yet local: computing on local buffers, memory, attaching a buffer
    "MPI_Reduce_local", "MPI_Alloc_mem", "MPI_Free_mem", "MPI_Buffer_attach",
))


def is_local(name: str) -> bool:
    """True if the MPI function `name` never communicates (module doc)."""
    if name.endswith("_c"):
        name = name[:-2]
    return name in _NAMES or name.startswith(_PREFIXES) or name.endswith(_SUFFIXES)


def local_mask(names: Iterable[str]) -> np.ndarray:
    """`is_local` of each name, as a bool array (e.g. of a calls table's categories)."""
    return np.array([is_local(str(n)) for n in names], dtype=bool)
