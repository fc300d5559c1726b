"""The wrapper generator (interposer/gen/wrapgen.py): mpi.spec lines parsed, and the C it
writes for each kind of function — what the hooks see, in which order, and that every
wrapper forwards to PMPI. Assertions name what matters, never whole files (nor includes).
"""

from __future__ import annotations

import difflib
import re
import subprocess
import sys
from types import ModuleType

import pytest

from mpiscope_testing import REPO, mpijobs, scriptload

GEN = REPO / "interposer" / "gen"
ROLES = {"FUNCTION", "POINT2POINT", "BARRIER", "COLL_ONE2ALL", "COLL_ALL2ONE", "COLL_ALL2ALL",
         "COLL_OTHER", "RMA", "FILE_IO", "FILE_IO_METADATA"}  # roles docs/trace-format.md uses

# one function of each shape the generator knows
SPEC = """\
# a comment, then a blank line

MPI_Init FUNCTION init
  args: int *argc, char ***argv
MPI_Finalize FUNCTION finalize
  args:
MPI_Send POINT2POINT
  args: const void *buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm
  pre:  mps_send(dest, tag, comm, count, datatype);
MPI_Isend POINT2POINT
  args: const void *buf, int n, MPI_Datatype dt, int dest, int tag, MPI_Comm comm, MPI_Request *req
  post: mps_isend(dest, tag, comm, n, dt, req, 0);
MPI_Waitall POINT2POINT
  args: int count, MPI_Request array_of_requests[count], MPI_Status array_of_statuses[count]
  pre:  MPS_SAVE_REQUESTS(count, array_of_requests);
  pre:  MPS_FIX_STATUSES(count, array_of_statuses);
  post: mps_complete_many(count, saved_, array_of_statuses, NULL, 0); MPS_RELEASE();
MPI_Bcast COLL_ONE2ALL
  args: void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm
  pre:  mps_coll_begin();
  post: uint64_t b_ = mps_type_bytes(count, datatype);
  post: mps_coll_end(MPS_COLL_BCAST, comm, root, b_, b_, 0, 0, 0);
MPI_Comm_set_name FUNCTION
  fortran: no
  args: MPI_Comm comm, const char *comm_name
  post: if (rc == MPI_SUCCESS) { mps_comm_named(comm, comm_name); }
"""


@pytest.fixture(scope="module")
def wrapgen() -> ModuleType:
    """gen/wrapgen.py is a build script, not a package: loaded from its file."""
    return scriptload.load(GEN / "wrapgen.py", "wrapgen")


@pytest.fixture(scope="module")
def functions(wrapgen, tmp_path_factory) -> dict:
    path = tmp_path_factory.mktemp("spec") / "mpi.spec"
    path.write_text(SPEC)
    return {f.name: f for f in wrapgen.parse_spec(path)}


def body(c: str, signature_start: str) -> str:
    """The text of the C function whose definition starts with `signature_start`."""
    start = c.index(signature_start)
    return c[start:c.index("\n}\n", start) + 3]


def in_order(text: str, *parts: str) -> bool:
    where = [text.find(p) for p in parts]
    return -1 not in where and where == sorted(where)


# ---------------------------------------------------------------- parsing


def test_parameters_keep_types_names_and_array_lengths(wrapgen):
    params = wrapgen.parse_params(
        "const void *buf, int  count, char ***argv, MPI_Request array_of_requests[count], "
        "const int sendcounts[], MPI_Status *status")
    assert [(p.ctype, p.name, p.array) for p in params] == [
        ("const void *", "buf", None), ("int", "count", None), ("char ***", "argv", None),
        ("MPI_Request", "array_of_requests", "count"), ("const int", "sendcounts", ""),
        ("MPI_Status *", "status", None)]
    assert [p.c_decl for p in params] == [
        "const void *buf", "int count", "char ***argv", "MPI_Request array_of_requests[]",
        "const int sendcounts[]", "MPI_Status *status"]
    assert wrapgen.parse_params("") == []


def test_spec_entries_in_order_with_roles_kinds_and_hooks(functions):
    assert list(functions) == ["MPI_Init", "MPI_Finalize", "MPI_Send", "MPI_Isend",
                               "MPI_Waitall", "MPI_Bcast", "MPI_Comm_set_name"]
    assert {n: (f.role, f.kind) for n, f in functions.items() if f.kind != "normal"} == {
        "MPI_Init": ("FUNCTION", "init"), "MPI_Finalize": ("FUNCTION", "finalize")}
    assert functions["MPI_Bcast"].role == "COLL_ONE2ALL"
    assert functions["MPI_Finalize"].params == []
    # hook lines of one key add up, in order
    assert functions["MPI_Waitall"].pre == ("MPS_SAVE_REQUESTS(count, array_of_requests);\n"
                                            "MPS_FIX_STATUSES(count, array_of_statuses);\n")
    assert functions["MPI_Isend"].pre == "" and "mps_isend(" in functions["MPI_Isend"].post
    assert not functions["MPI_Comm_set_name"].fortran and functions["MPI_Send"].fortran


def test_hook_code_splits_into_top_level_statements(wrapgen):
    code = "int n_ = f(a, b); if (rc == 0) { g(); h(); } for (;;) { break; } tail()"
    assert wrapgen.statements(code) == [
        "int n_ = f(a, b);", "if (rc == 0) { g(); h(); }", "for (;;) { break; }", "tail()"]


@pytest.mark.parametrize("spec, message", [
    ("MPI_Send POINT2POINT\n  args: int x\n  prex: f();\n", r"mpi\.spec:3: unknown key 'prex'"),
    ("MPI_Send\n  args: int x\n", r"mpi\.spec:1: expected 'MPI_Name ROLE"),
    ("MPI_Send POINT2POINT blocking\n", r"mpi\.spec:1: expected .* got 'MPI_Send POINT2POINT "
                                        r"blocking'"),
    ("  args: int x\nMPI_Send POINT2POINT\n", r"mpi\.spec:1: 'args' before the first function"),
    ("MPI_Recv POINT2POINT\n  args: int count, MPI_Status *\n",
     r"cannot parse parameter 'MPI_Status \*'"),
    ("MPI_Recv POINT2POINT\n  args: count[2]\n", r"cannot parse parameter 'count\[2\]'"),
])
def test_a_malformed_spec_line_stops_the_build_naming_it(wrapgen, tmp_path, spec, message):
    path = tmp_path / "mpi.spec"
    path.write_text(spec)
    with pytest.raises(SystemExit, match=message):
        wrapgen.parse_spec(path)


# ---------------------------------------------------------------- generated C


def test_blocking_p2p_hooks_run_between_enter_and_pmpi(wrapgen, functions):
    impl = wrapgen.impl(functions["MPI_Send"])
    assert impl.startswith("static int impl_MPI_Send(void *ra_, const void *buf, int count, "
                           "MPI_Datatype datatype, int dest, int tag, MPI_Comm comm)")
    pmpi = "PMPI_Send(buf, count, datatype, dest, tag, comm)"
    # untraced (before MPI_Init, after MPI_Finalize, MPISCOPE_DISABLE): straight to PMPI
    assert f"if (!mps_active()) return {pmpi};" in impl
    assert in_order(impl, "mps_enter(MPS_FN_MPI_Send, ra_);",
                    "mps_send(dest, tag, comm, count, datatype);", f"int rc = {pmpi};",
                    "mps_after();", "mps_leave(MPS_FN_MPI_Send);", "return rc;")
    # the C symbol: its caller's return address is the call site
    door = wrapgen.c_door(functions["MPI_Send"])
    assert door.startswith("int MPI_Send(const void *buf, int count, MPI_Datatype datatype, "
                           "int dest, int tag, MPI_Comm comm)\n")
    assert ("return impl_MPI_Send(__builtin_return_address(0), buf, count, datatype, dest, "
            "tag, comm);") in door


def test_nonblocking_send_notes_its_request_after_pmpi_filled_it(wrapgen, functions):
    impl = wrapgen.impl(functions["MPI_Isend"])
    assert in_order(impl, "mps_enter(MPS_FN_MPI_Isend, ra_);",
                    "int rc = PMPI_Isend(buf, n, dt, dest, tag, comm, req);",
                    "mps_after();", "mps_isend(dest, tag, comm, n, dt, req, 0);",
                    "mps_leave(MPS_FN_MPI_Isend);")


def test_collective_hooks_one_statement_a_line_around_pmpi(wrapgen, functions):
    impl = wrapgen.impl(functions["MPI_Bcast"])
    assert in_order(impl, "mps_enter(MPS_FN_MPI_Bcast, ra_);", "\n    mps_coll_begin();\n",
                    "int rc = PMPI_Bcast(buffer, count, datatype, root, comm);", "mps_after();",
                    "\n    uint64_t b_ = mps_type_bytes(count, datatype);\n",
                    "\n    mps_coll_end(MPS_COLL_BCAST, comm, root, b_, b_, 0, 0, 0);\n",
                    "mps_leave(MPS_FN_MPI_Bcast);")


def test_life_cycle_kinds_wrap_pmpi_their_own_way(wrapgen, functions):
    init = wrapgen.impl(functions["MPI_Init"])
    # nothing is traced before PMPI_Init has returned: the runtime starts after it
    assert "mps_active" not in init and "mps_enter" not in init
    assert in_order(init, "uint64_t t_ = mps_clock();", "int rc = PMPI_Init(argc, argv);",
                    "if (rc == MPI_SUCCESS) mps_init_after(MPS_FN_MPI_Init, t_, ra_);")
    fin = wrapgen.impl(functions["MPI_Finalize"])
    assert fin.startswith("static int impl_MPI_Finalize(void *ra_)")
    assert in_order(fin, "mps_enter(MPS_FN_MPI_Finalize, ra_);", "mps_finalize_before();",
                    "return PMPI_Finalize();")
    assert "int MPI_Finalize(void)\n" in wrapgen.c_door(functions["MPI_Finalize"])


def test_fortran_door_converts_handles_and_arrays_and_sets_ierr(wrapgen, functions):
    door = wrapgen.fortran_door(functions["MPI_Isend"])
    assert door.startswith("void mpi_isend_(void *buf, MPI_Fint *n, MPI_Fint *dt, "
                           "MPI_Fint *dest, MPI_Fint *tag, MPI_Fint *comm, MPI_Fint *req, "
                           "MPI_Fint *ierr);\n")
    assert in_order(door, "MPI_Request req_c = PMPI_Request_f2c(*req);",
                    "int rc = impl_MPI_Isend(__builtin_return_address(0), mps_f_buf(buf), "
                    "*n, PMPI_Type_f2c(*dt), *dest, *tag, PMPI_Comm_f2c(*comm), &req_c);",
                    "*req = PMPI_Request_c2f(req_c);", "if (ierr) *ierr = rc;")
    # every compiler's symbol and use mpi_f08's are aliases of the one door
    aliases = re.findall(r'void (\w+)\([^)]*\) __attribute__\(\(alias\("mpi_isend_"\)\)\);',
                         door)
    assert aliases == ["mpi_isend__", "mpi_isend", "MPI_ISEND", "ompi_isend_f",
                       "mpi_isend_f08_"]

    waitall = wrapgen.fortran_door(functions["MPI_Waitall"])
    # array lengths name Fortran INTEGERs, passed by reference
    assert in_order(waitall, "MPS_F2C_REQUESTS(array_of_requests, (*count));",
                    "MPS_F2C_STATUSES(array_of_statuses, (*count));",
                    "impl_MPI_Waitall(__builtin_return_address(0), *count, "
                    "array_of_requests_c, array_of_statuses_c);",
                    "MPS_C2F_REQUESTS(array_of_requests, (*count));")

    init = wrapgen.fortran_door(functions["MPI_Init"])
    assert "void mpi_init_(MPI_Fint *ierr)" in init  # no argc/argv in Fortran
    assert "impl_MPI_Init(__builtin_return_address(0), NULL, NULL);" in init


def test_forwarding_door_notes_the_caller_then_calls_the_library_binding(wrapgen, functions):
    doors = wrapgen.forward_door(functions["MPI_Send"])
    assert re.findall(r"^void (\w+)\(", doors, re.M)[::2] == [
        "mpi_send_", "mpi_send__", "mpi_send", "MPI_SEND"]
    door = body(doors, "void mpi_send_(void *a0")
    assert "void mpi_send_(" + ", ".join(f"void *a{i}" for i in range(7)) + ")" in door
    assert in_order(door, 'mps_fortran_next("mpi_send_", "pmpi_send_")',
                    "mps_fortran_caller(__builtin_return_address(0));",
                    "next)(a0, a1, a2, a3, a4, a5, a6);", "mps_fortran_caller(NULL);")


@pytest.mark.parametrize("flag", ["--fortran", "--fortran-forward"])
def test_main_writes_ids_names_roles_and_every_door(tmp_path, flag):
    (tmp_path / "mpi.spec").write_text(SPEC)
    subprocess.run([sys.executable, str(GEN / "wrapgen.py"), str(tmp_path / "mpi.spec"),
                    str(tmp_path / "gen"), flag], check=True)
    header = (tmp_path / "gen" / "functions.h").read_text()
    c = (tmp_path / "gen" / "wrappers.c").read_text()
    names = ["MPI_Init", "MPI_Finalize", "MPI_Send", "MPI_Isend", "MPI_Waitall", "MPI_Bcast",
             "MPI_Comm_set_name"]
    assert re.findall(r"^    MPS_FN_(\w+),$", header, re.M) == names
    assert "MPS_FN_COUNT\n};" in header
    assert re.findall(r'^    "(MPI_\w+)",$', body(c, "const char *const mps_fn_names"),
                      re.M) == names
    assert re.findall(r"^    OTF2_REGION_ROLE_(\w+),$", body(c, "const int mps_fn_roles"),
                      re.M) == ["FUNCTION"] * 2 + ["POINT2POINT"] * 3 + ["COLL_ONE2ALL",
                                                                         "FUNCTION"]
    for name in names:
        assert f"\nint {name}(" in c and f"static int impl_{name}(" in c
    for name in names[:-1]:
        assert f"\nvoid {name.lower()}_(" in c and f"\nvoid {name.upper()}(" in c
    assert "mpi_comm_set_name" not in c  # `fortran: no`: a C-only wrapper


# ---------------------------------------------------------------- the real table


def test_the_real_spec_generates_for_both_mpi_flavours(wrapgen):
    functions = wrapgen.parse_spec(GEN / "mpi.spec")
    names = [f.name for f in functions]
    assert len(names) == len(set(names)) and all(n.startswith("MPI_") for n in names)
    assert {f.role for f in functions} <= ROLES
    for f in functions:
        impl = wrapgen.impl(f)
        assert f"PMPI_{f.name[4:]}(" in impl  # every wrapper forwards to PMPI
        if f.kind == "normal":
            assert in_order(impl, f"mps_enter(MPS_FN_{f.name}, ra_);",
                            f"int rc = PMPI_{f.name[4:]}(",
                            f"mps_leave(MPS_FN_{f.name});")
        if f.fortran:  # every Fortran door has a mapping for each parameter type
            wrapgen.fortran_door(f)
            wrapgen.forward_door(f)


def test_a_parameter_without_a_fortran_mapping_is_refused(wrapgen, tmp_path):
    path = tmp_path / "mpi.spec"
    path.write_text("MPI_Foo FUNCTION\n  args: MPI_T_enum win\n"
                    "MPI_Bar FUNCTION\n  args: const MPI_Datatype types[]\n")
    foo, bar = wrapgen.parse_spec(path)
    with pytest.raises(SystemExit, match="no Fortran mapping for MPI_T_enum win in MPI_Foo"):
        wrapgen.fortran_door(foo)
    with pytest.raises(SystemExit, match="MPI_Bar: datatype array without comm"):
        wrapgen.fortran_door(bar)
    assert "PMPI_Foo(win)" in wrapgen.impl(foo)  # C-only wrappers need no mapping



# ---------------------------------------------------------------- coverage from mpi.h

# a preprocessed mpi.h in miniature: attributes, typedefs, every shape of declaration
HEADER = """\
typedef struct ompi_win_t *MPI_Win;
typedef int (MPI_Copy_function)(MPI_Comm, int, void *, void *, void *, int *);
typedef MPI_Aint (QMPI_Aint_add_t) (void *context, MPI_Aint base);
__attribute__((visibility("default"))) int MPI_Win_fence(int assert, MPI_Win win);
extern int MPI_Win_set_name(MPI_Win win, const char *win_name)
    __attribute__((deprecated("no, just a test")));
int MPI_Group_range_incl(MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup);
int MPI_Finalize(void);
double MPI_Wtime(void);
int MPI_Pcontrol(const int level, ...);
int MPI_Comm_rank(MPI_Comm comm, int *rank);
int MPI_Unnamed(MPI_Comm, int []);
int PMPI_Win_fence(int assert, MPI_Win win);
"""


def test_header_declarations_become_prototypes(wrapgen):
    protos = wrapgen.parse_header(HEADER)
    assert sorted(protos) == ["MPI_Comm_rank", "MPI_Finalize", "MPI_Group_range_incl",
                              "MPI_Pcontrol", "MPI_Unnamed", "MPI_Win_fence",
                              "MPI_Win_set_name", "MPI_Wtime"]  # no typedef, no PMPI_
    fence = protos["MPI_Win_fence"]
    assert (fence.ret, [p.name for p in fence.params]) == ("int", ["assert", "win"])
    assert [p.c_decl for p in protos["MPI_Win_set_name"].params] == [
        "MPI_Win win", "const char *win_name"]
    # declarators are kept as the header wrote them, arrays of arrays included
    assert protos["MPI_Group_range_incl"].params[2].c_decl == "int ranges[][3]"
    assert protos["MPI_Finalize"].params == []
    assert protos["MPI_Wtime"].ret == "double" and protos["MPI_Pcontrol"].variadic
    # a parameter the header leaves unnamed gets a name to forward it by
    assert [p.c_decl for p in protos["MPI_Unnamed"].params] == ["MPI_Comm a0", "int a1[]"]


def local_spec(tmp_path, text: str) -> tuple:
    path = tmp_path / "mpi.spec"
    path.write_text(text)
    return path


def test_local_section_is_its_own_syntax(wrapgen, tmp_path):
    path = local_spec(tmp_path, SPEC + "\n## local\nMPI_Comm_rank local\nMPI_T_* local\n")
    functions, local = wrapgen.parse_spec_tables(path)
    assert len(functions) == 7 and local == ["MPI_Comm_rank", "MPI_T_*"]
    assert wrapgen.is_local("MPI_T_pvar_read", local)
    assert not wrapgen.is_local("MPI_Comm_ranks", local)


@pytest.mark.parametrize("extra, message", [
    ("MPI_Send local\n", "MPI_Send is both a spec entry and local"),
    ("MPI_Wtime local\nMPI_Wtime local\n", r"MPI_Wtime listed twice as local"),
    ("Comm_rank local\n", r"expected 'MPI_Name local'"),
])
def test_a_wrong_local_line_stops_the_build(wrapgen, tmp_path, extra, message):
    with pytest.raises(SystemExit, match=message):
        wrapgen.parse_spec_tables(local_spec(tmp_path, SPEC + extra))


def test_coverage_wraps_every_declared_function_but_spec_and_local(wrapgen, functions):
    protos = wrapgen.parse_header(HEADER)
    local = ["MPI_Comm_rank", "MPI_Wtime", "MPI_Pcontrol"]
    spec = [functions["MPI_Finalize"]]
    pmpi = {"PMPI_Win_fence", "PMPI_Win_set_name", "PMPI_Group_range_incl", "PMPI_Unnamed"}
    gen = wrapgen.coverage(spec, local, protos, pmpi)
    assert [f.name for f in gen] == ["MPI_Group_range_incl", "MPI_Unnamed", "MPI_Win_fence",
                                     "MPI_Win_set_name"]
    assert all(f.generated and f.kind == "normal" and not f.pre and not f.post for f in gen)
    assert {f.name: f.role for f in gen}["MPI_Win_fence"] == "RMA"
    # a declared function its library does not build cannot be forwarded: left out
    assert [f.name for f in wrapgen.coverage(spec, local, protos, pmpi - {"PMPI_Unnamed"})
            ] == ["MPI_Group_range_incl", "MPI_Win_fence", "MPI_Win_set_name"]
    # the generated wrapper is the spec's timed shape with no hooks
    impl = wrapgen.impl(gen[0])
    assert impl.startswith("static int impl_MPI_Group_range_incl(void *ra_, MPI_Group group, "
                           "int n, int ranges[][3], MPI_Group *newgroup)")
    assert in_order(impl, "if (!mps_active()) return PMPI_Group_range_incl(group, n, ranges, "
                    "newgroup);", "mps_enter(MPS_FN_MPI_Group_range_incl, ra_);",
                    "int rc = PMPI_Group_range_incl(group, n, ranges, newgroup);",
                    "mps_after();", "mps_leave(MPS_FN_MPI_Group_range_incl);", "return rc;")


@pytest.mark.parametrize("unlisted", ["MPI_Wtime", "MPI_Pcontrol"])
def test_a_non_int_or_variadic_function_must_be_listed(wrapgen, unlisted):
    protos = wrapgen.parse_header(HEADER)
    local = [n for n in ("MPI_Wtime", "MPI_Pcontrol") if n != unlisted]
    with pytest.raises(SystemExit, match=f"{unlisted} .* needs a spec entry or a "
                                         f"`{unlisted} local` line"):
        wrapgen.coverage([], local, protos, None)


@pytest.mark.parametrize("name, role", [
    ("MPI_Win_fence", "RMA"), ("MPI_Rget_accumulate_c", "RMA"), ("MPI_Win_create", "FUNCTION"),
    ("MPI_File_write_at_all", "FILE_IO"), ("MPI_File_open", "FILE_IO_METADATA"),
    ("MPI_Ibsend", "POINT2POINT"), ("MPI_Mrecv", "POINT2POINT"), ("MPI_Send_c", "POINT2POINT"),
    ("MPI_Isendrecv_replace", "POINT2POINT"), ("MPI_Ialltoall", "FUNCTION"),
    ("MPI_Comm_split_type", "FUNCTION"), ("MPI_Get_processor_name", "FUNCTION")])
def test_generated_roles_follow_the_name(wrapgen, name, role):
    assert wrapgen.generated_role(name) == role


def test_generated_fortran_doors_forward_hidden_lengths(wrapgen):
    fn = wrapgen.coverage([], ["MPI_Wtime", "MPI_Pcontrol"], wrapgen.parse_header(HEADER),
                          None)[-1]
    assert fn.name == "MPI_Win_set_name"
    # Open MPI: a timed door around the library's own binding, which calls PMPI_*
    door = wrapgen.fortran_timed_door(fn)
    args = ", ".join(f"a{i}" for i in range(4))  # win, name, ierr, then name's length
    assert door.startswith(f"void mpi_win_set_name_({', '.join(f'void *a{i}' for i in range(4))});")
    assert in_order(door, 'mps_fortran_next("pmpi_win_set_name_", "mpi_win_set_name_")',
                    f"if (!mps_active()) {{ ((void (*)(void *, void *, void *, void *))next)"
                    f"({args}); return; }}",
                    "mps_enter(MPS_FN_MPI_Win_set_name, __builtin_return_address(0));",
                    f"\n    ((void (*)(void *, void *, void *, void *))next)({args});\n",
                    "mps_after();", "mps_leave(MPS_FN_MPI_Win_set_name);")
    assert re.findall(r'void (\w+)\([^)]*\) __attribute__\(\(alias\("mpi_win_set_name_"\)\)\);',
                      door) == ["mpi_win_set_name__", "mpi_win_set_name", "MPI_WIN_SET_NAME",
                                "ompi_win_set_name_f", "mpi_win_set_name_f08_"]
    # MPICH: the forwarding door passes the same four
    fwd = body(wrapgen.forward_door(fn), "void mpi_win_set_name_(void *a0")
    assert f"next)({args});" in fwd


@pytest.mark.skipif(not mpijobs.have("mpicc.openmpi"), reason="no Open MPI")
def test_coverage_only_adds_to_the_spec_wrappers(tmp_path):
    """The spec's wrappers (the hot path) are byte for byte what they were without
    coverage: the generated functions are added after them, nothing else changes."""
    spec = str(GEN / "mpi.spec")
    gen = [sys.executable, str(GEN / "wrapgen.py"), spec]
    subprocess.run(gen + [str(tmp_path / "a"), "--fortran"], check=True)
    subprocess.run(gen + [str(tmp_path / "b"), "--fortran", "--mpicc", "mpicc.openmpi"],
                   check=True)
    before = (tmp_path / "a" / "wrappers.c").read_text().splitlines()
    after = (tmp_path / "b" / "wrappers.c").read_text().splitlines()
    ops = difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes()
    assert {op for op, *_ in ops} == {"equal", "insert"}
    # a function no spec entry hooks arrives only with coverage
    assert "int MPI_Comm_spawn(" not in "\n".join(before)
    assert "int MPI_Comm_spawn(" in "\n".join(after)


def test_fortran_doors_of_windows_files_offsets_and_names(wrapgen, tmp_path):
    """RMA and MPI-IO arguments: handles in and out, address/offset-kind integers by
    reference, a CHARACTER name with its hidden length (after ierr) made a C string."""
    path = tmp_path / "mpi.spec"
    path.write_text("MPI_File_open FILE_IO\n  args: MPI_Comm comm, const char *filename, "
                    "int amode, MPI_Info info, MPI_File *fh\n"
                    "MPI_Put RMA\n  args: const void *origin_addr, MPI_Aint target_disp, "
                    "MPI_Offset offset, MPI_Win win\n"
                    "MPI_Win_allocate RMA\n  args: MPI_Aint size, void *baseptr, MPI_Win *win\n")
    fopen, put, alloc = wrapgen.parse_spec(path)
    door = wrapgen.fortran_door(fopen)
    assert "MPI_Fint *ierr, size_t filename_len)" in door
    assert "char *filename_c = mps_f_string(filename, filename_len);" in door
    assert "free(filename_c);" in door
    assert "MPI_File fh_c = PMPI_File_f2c(*fh);" in door and "*fh = PMPI_File_c2f(fh_c);" in door
    door = wrapgen.fortran_door(put)
    assert "MPI_Aint *target_disp, MPI_Offset *offset, MPI_Fint *win" in door
    assert "*target_disp, *offset, PMPI_Win_f2c(*win))" in door
    door = wrapgen.fortran_door(alloc)
    assert "*size, baseptr, &win_c)" in door  # the address is stored into the INTEGER
    # MPICH: the hidden length is forwarded to its own binding as one more argument
    assert "void *a0, void *a1, void *a2, void *a3, void *a4, void *a5, void *a6)" in \
        wrapgen.forward_door(fopen)


# ---------------------------------------------------------------- MPI-4 large-count twins

# MPICH 4's spelling: the header's own parameter names (MPI_Isend_c's differ from SPEC's)
HEADER_C = """\
int MPI_Send_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag,
               MPI_Comm comm);
int MPI_Isend_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag,
                MPI_Comm comm, MPI_Request *request);
int MPI_Bcast_c(void *buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm);
int MPI_Get_count_c(const MPI_Status *status, MPI_Datatype datatype, MPI_Count *count);
"""


def test_a_c_twin_runs_its_spec_entry_s_hooks_with_the_header_s_types(wrapgen, functions):
    twins = wrapgen.large_count_twins(list(functions.values()),
                                      wrapgen.parse_header(HEADER_C), None)
    assert [(t.name, t.role, t.fortran, t.pre, t.post) for t in twins] == [
        (f"{f.name}_c", f.role, False, f.pre, f.post)
        for f in (functions["MPI_Send"], functions["MPI_Isend"], functions["MPI_Bcast"])]
    isend = wrapgen.impl(twins[1])
    # the entry's parameter names (its hooks name them), the header's types
    assert isend.startswith("static int impl_MPI_Isend_c(void *ra_, const void *buf, "
                            "MPI_Count n, MPI_Datatype dt, int dest, int tag, MPI_Comm comm, "
                            "MPI_Request *req)")
    assert in_order(isend, "mps_enter(MPS_FN_MPI_Isend_c, ra_);",
                    "int rc = PMPI_Isend_c(buf, n, dt, dest, tag, comm, req);",
                    "mps_isend(dest, tag, comm, n, dt, req, 0);",
                    "mps_leave(MPS_FN_MPI_Isend_c);")
    assert wrapgen.c_door(twins[1]).startswith(
        "int MPI_Isend_c(const void *buf, MPI_Count n, MPI_Datatype dt, int dest, int tag, "
        "MPI_Comm comm, MPI_Request *req)\n")
    bcast = wrapgen.impl(twins[2])
    assert in_order(bcast, "mps_coll_begin();", "int rc = PMPI_Bcast_c(",
                    "uint64_t b_ = mps_type_bytes(count, datatype);",
                    "mps_coll_end(MPS_COLL_BCAST, comm, root, b_, b_, 0, 0, 0);")
    # the twin is the entry's, not a generated timed wrapper as well
    gen = wrapgen.coverage(list(functions.values()) + twins, ["MPI_Get_count_c"],
                           wrapgen.parse_header(HEADER_C), None)
    assert gen == []
    # a library without PMPI_Bcast_c: no twin (it could not be forwarded)
    assert [t.name for t in wrapgen.large_count_twins(
        list(functions.values()), wrapgen.parse_header(HEADER_C),
        {"PMPI_Send_c", "PMPI_Isend_c"})] == ["MPI_Send_c", "MPI_Isend_c"]


@pytest.mark.parametrize("decl, message", [
    ("int MPI_Send_c(const void *buf, MPI_Count count, MPI_Datatype datatype, MPI_Count dest,"
     " int tag, MPI_Comm comm);", r"MPI_Send_c: parameter 4 is `MPI_Count dest` where "
                                   r"MPI_Send has `int dest`"),
    ("int MPI_Send_c(const void *buf, MPI_Count count, MPI_Count datatype, int dest, int tag,"
     " MPI_Comm comm);", r"parameter 3 is `MPI_Count datatype`"),
    ("int MPI_Send_c(const void *buf, MPI_Aint count, MPI_Datatype datatype, int dest, int tag,"
     " MPI_Comm comm);", r"parameter 2 is `MPI_Aint count`"),
    ("int MPI_Send_c(const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, "
     "int tag);", r"MPI_Send_c has 5 parameters, the spec's MPI_Send 6"),
])
def test_a_c_twin_unlike_its_entry_stops_the_build(wrapgen, functions, decl, message):
    """Only the large-count widenings (a count, a displacement unit, count and displacement
    arrays, as the header names them) are the entry's hooks' to handle: a rank or a
    datatype made something else, or a count made an address, needs a decision."""
    with pytest.raises(SystemExit, match=message):
        wrapgen.large_count_twins([functions["MPI_Send"]], wrapgen.parse_header(decl), None)


def test_v_collective_twins_take_count_and_aint_arrays(wrapgen, tmp_path):
    path = tmp_path / "mpi.spec"
    path.write_text("MPI_Allgatherv COLL_ALL2ALL\n  args: const void *sendbuf, int sendcount, "
                    "MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], "
                    "const int displs[], MPI_Datatype recvtype, MPI_Comm comm\n"
                    "MPI_Win_create FUNCTION\n  args: void *base, MPI_Aint size, "
                    "int disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win *win\n")
    header = ("int MPI_Allgatherv_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype "
              "sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint displs[],"
              " MPI_Datatype recvtype, MPI_Comm comm);\nint MPI_Win_create_c(void *base, "
              "MPI_Aint size, MPI_Aint disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win *win);")
    twins = wrapgen.large_count_twins(wrapgen.parse_spec(path), wrapgen.parse_header(header),
                                      None)
    assert [p.c_decl for p in twins[0].params][3:6] == [
        "void *recvbuf", "const MPI_Count recvcounts[]", "const MPI_Aint displs[]"]
    assert [p.c_decl for p in twins[1].params][2] == "MPI_Aint disp_unit"


@pytest.mark.skipif(not mpijobs.have("mpicc.mpich"), reason="no MPICH")
def test_mpich_s_c_functions_are_twins_of_spec_entries_without_fortran(tmp_path):
    """MPICH 4 declares `_c` twins of ~100 spec entries: each is wrapped with its entry's
    hooks (after the spec's wrappers, before the generated ones), none gets a Fortran door;
    `_c` functions of no spec entry stay timed wrappers."""
    gen = [sys.executable, str(GEN / "wrapgen.py"), str(GEN / "mpi.spec"), str(tmp_path),
           "--fortran-forward", "--mpicc", "mpicc.mpich"]
    subprocess.run(gen, check=True)
    names = re.findall(r"^    MPS_FN_(\w+),$", (tmp_path / "functions.h").read_text(), re.M)
    c = (tmp_path / "wrappers.c").read_text()
    assert names.index("MPI_Finalize") < names.index("MPI_Send_c") < names.index(
        "MPI_Type_contiguous_c")
    allgatherv = body(c, "static int impl_MPI_Allgatherv_c(")
    assert "const MPI_Count recvcounts[], const MPI_Aint displs[]" in allgatherv
    assert "mps_coll_end(MPS_COLL_ALLGATHERV, comm, -1," in allgatherv
    assert "mps_io_begin(fh, MPS_IO_READ" in body(c, "static int impl_MPI_File_read_at_c(")
    assert "mps_win_created(comm, win)" in body(c, "static int impl_MPI_Win_create_c(")
    # no spec entry: timed only, no hook
    timed = body(c, "static int impl_MPI_Type_contiguous_c(")
    assert "mps_" not in re.sub(r"mps_(active|enter|after|leave|failed)\(", "", timed)
    assert not re.search(r"\bvoid mpi_\w+_c_\(", c)  # no Fortran door for a `_c` function


@pytest.mark.skipif(not mpijobs.have("mpicc.openmpi"), reason="no Open MPI")
def test_open_mpi_4_1_has_no_c_twins(wrapgen):
    """Open MPI 4.1's mpi.h declares no large-count function: its build is as before."""
    protos = wrapgen.parse_header(wrapgen.preprocess_header("mpicc.openmpi"))
    assert wrapgen.large_count_twins(wrapgen.parse_spec(GEN / "mpi.spec"), protos, None) == []
