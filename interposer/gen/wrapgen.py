#!/usr/bin/env python3
"""Generate the MPI wrappers from gen/mpi.spec (the one table of signatures).

    wrapgen.py SPEC OUTDIR [--fortran | --fortran-forward]

writes OUTDIR/functions.h (function ids, names, OTF2 region roles) and
OUTDIR/wrappers.c (C wrappers, and with --fortran the Fortran entry points; with
--fortran-forward thin Fortran doors that note the caller and forward to the MPI
library's own Fortran binding, which calls our C wrappers: MPICH's way).
Every function gets one static implementation `impl_MPI_X(ra, args...)`; the C
symbol and each Fortran symbol are thin doors into it, passing their caller's
return address so call sites point at user code.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Param:
    ctype: str  # e.g. "const void *", "int", "MPI_Request *", "MPI_Request" (array elem)
    name: str
    array: str | None = None  # length expression for `T name[n]`, "" for `T name[]`

    @property
    def c_decl(self) -> str:
        if self.array is not None:
            return f"{self.ctype} {self.name}[]"
        sep = "" if self.ctype.endswith("*") else " "
        return f"{self.ctype}{sep}{self.name}"


@dataclass
class Function:
    name: str
    role: str
    kind: str = "normal"
    params: list[Param] = field(default_factory=list)
    pre: str = ""
    post: str = ""
    fortran: bool = True

    @property
    def lower(self) -> str:
        return self.name.lower()


KINDS = ("normal", "init", "finalize", "abort")  # how impl() wraps the PMPI call
PARAM_RE = re.compile(r"^(?P<type>.*?)(?P<name>\w+)\s*(?:\[(?P<len>[^\]]*)\])?$")


def parse_params(text: str) -> list[Param]:
    params = []
    for raw in filter(None, (p.strip() for p in text.split(","))):
        m = PARAM_RE.match(raw)
        if not m or not m["type"].strip():
            raise SystemExit(f"wrapgen: cannot parse parameter {raw!r}")
        # one spelling per type: "char ***", "const void *", "MPI_Request"
        stars = m["type"].count("*")
        ctype = " ".join(m["type"].replace("*", " ").split()) + (" " + "*" * stars) * bool(stars)
        params.append(Param(ctype, m["name"], m["len"]))
    return params


def parse_spec(path: Path) -> list[Function]:
    functions: list[Function] = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[0].isspace():
            words = line.split()
            kind = words[2] if len(words) == 3 else "normal"
            if len(words) not in (2, 3) or kind not in KINDS:
                raise SystemExit(f"{path}:{lineno}: expected 'MPI_Name ROLE [{'|'.join(KINDS)}]'"
                                 f", got {line.strip()!r}")
            functions.append(Function(words[0], words[1], kind))
            continue
        key, _, value = line.strip().partition(":")
        if not functions:
            raise SystemExit(f"{path}:{lineno}: {key!r} before the first function")
        fn = functions[-1]
        if key == "args":
            fn.params = parse_params(value)
        elif key == "pre":
            fn.pre += value.strip() + "\n"
        elif key == "post":
            fn.post += value.strip() + "\n"
        elif key == "fortran":
            fn.fortran = value.strip() != "no"
        else:
            raise SystemExit(f"{path}:{lineno}: unknown key {key!r}")
    return functions


def statements(code: str) -> list[str]:
    """Split hook code into top-level statements, one per generated line."""
    out, cur, depth = [], "", 0
    for ch in code.replace("\n", " "):
        cur += ch
        depth += ch in "({"
        depth -= ch in ")}"
        if (ch == ";" or ch == "}") and depth == 0 and cur.strip():
            out.append(cur.strip())
            cur = ""
    if cur.strip():
        out.append(cur.strip())
    return out


def args_decl(fn: Function) -> str:
    return ", ".join(p.c_decl for p in fn.params) or "void"


def names(fn: Function) -> str:
    return ", ".join(p.name for p in fn.params)


def impl(fn: Function) -> str:
    """The one implementation every entry point of `fn` calls."""
    decl = ", ".join(["void *ra_"] + [p.c_decl for p in fn.params])
    call = f"PMPI_{fn.name[4:]}({names(fn)})"
    fid = f"MPS_FN_{fn.name}"
    if fn.kind == "init":
        body = (f"    uint64_t t_ = mps_clock();\n    int rc = {call};\n"
                f"    if (rc == MPI_SUCCESS) mps_init_after({fid}, t_, ra_);\n    return rc;\n")
    elif fn.kind == "finalize":
        body = (f"    if (mps_active()) mps_enter({fid}, ra_);\n"
                f"    mps_finalize_before();\n    return {call};\n")
    elif fn.kind == "abort":
        body = (f"    if (mps_active()) {{ mps_enter({fid}, ra_); mps_leave({fid}); }}\n"
                f"    mps_abort_before();\n    return {call};\n")
    else:
        hooks_pre = "".join(f"    {line}\n" for line in statements(fn.pre))
        hooks_post = "".join(f"    {line}\n" for line in statements(fn.post))
        body = (f"    if (!mps_active()) return {call};\n"
                f"    mps_enter({fid}, ra_);\n{hooks_pre}"
                f"    int rc = {call};\n    mps_after();\n{hooks_post}"
                f"    mps_leave({fid});\n    return rc;\n")
    return f"static int impl_{fn.name}({decl})\n{{\n{body}}}\n"


def c_door(fn: Function) -> str:
    args = ", ".join(["__builtin_return_address(0)"] + [p.name for p in fn.params])
    return (f"int {fn.name}({args_decl(fn)})\n{{\n"
            f"    return impl_{fn.name}({args});\n}}\n")


# ---------------------------------------------------------------- Fortran

HANDLE_F2C = {
    "MPI_Comm": "PMPI_Comm_f2c",
    "MPI_Datatype": "PMPI_Type_f2c",
    "MPI_Op": "PMPI_Op_f2c",
    "MPI_Group": "PMPI_Group_f2c",
    "MPI_Info": "PMPI_Info_f2c",
    "MPI_Message": "PMPI_Message_f2c",
}


def fortran_door(fn: Function) -> str:
    """mpi_x_(...) with Fortran handles and INTEGER by reference, converted to C."""
    fparams: list[str] = []
    before: list[str] = []
    call: list[str] = []
    after: list[str] = []
    if fn.kind == "init":
        fparams = [f"MPI_Fint *{p.name}" for p in fn.params if p.name not in ("argc", "argv")]
        call = ["NULL", "NULL"] + [
            f"*{p.name}" if p.ctype == "int" else p.name
            for p in fn.params if p.name not in ("argc", "argv")
        ]
    else:
        for p in fn.params:
            t, n = p.ctype.replace("const ", ""), p.name
            if p.array is not None and t in ("MPI_Request", "MPI_Status"):
                length = p.array or "0"
                # the length expression names a Fortran INTEGER argument: dereference it
                length = re.sub(r"\b(\w+)\b", r"(*\1)", length)
                fparams.append(f"MPI_Fint *{n}")
                if t == "MPI_Request":
                    before.append(f"MPS_F2C_REQUESTS({n}, {length});")
                    call.append(f"{n}_c")
                    after.append(f"MPS_C2F_REQUESTS({n}, {length});")
                else:
                    before.append(f"MPS_F2C_STATUSES({n}, {length});")
                    call.append(f"{n}_c")
                    after.append(f"MPS_C2F_STATUSES({n}, {length});")
            elif p.array is not None and t == "MPI_Datatype":
                # one datatype per peer (Alltoallw): sized from the communicator argument
                if "comm" not in [q.name for q in fn.params]:
                    raise SystemExit(f"wrapgen: {fn.name}: datatype array without comm")
                fparams.append(f"MPI_Fint *{n}")
                before.append(f"MPS_F2C_TYPES({n}, mps_comm_peers(PMPI_Comm_f2c(*comm)));")
                call.append(f"{n}_c")
                after.append(f"MPS_FREE_TYPES({n});")
            elif p.array is not None or t == "int *":
                fparams.append(f"MPI_Fint *{n}")  # INTEGER == int on our platforms
                call.append(n)
                if n == "index":  # Fortran counts from 1
                    after.append(f"if (rc >= 0 && *{n} >= 0) (*{n})++;")
                if n == "array_of_indices":
                    after.append("if (*outcount != MPI_UNDEFINED) for (int k_ = 0; k_ < *outcount; "
                                 f"k_++) {n}[k_]++;")
            elif t in ("void *",):
                fparams.append(f"void *{n}")
                call.append(f"mps_f_buf({n})")
            elif t == "int":
                fparams.append(f"MPI_Fint *{n}")
                call.append(f"*{n}")
            elif t in HANDLE_F2C:
                fparams.append(f"MPI_Fint *{n}")
                call.append(f"{HANDLE_F2C[t]}(*{n})")
            elif t == "MPI_Request *":
                fparams.append(f"MPI_Fint *{n}")
                before.append(f"MPI_Request {n}_c = PMPI_Request_f2c(*{n});")
                call.append(f"&{n}_c")
                after.append(f"*{n} = PMPI_Request_c2f({n}_c);")
            elif t == "MPI_Message *":  # matched probe: Mprobe sets it, Mrecv consumes it
                fparams.append(f"MPI_Fint *{n}")
                before.append(f"MPI_Message {n}_c = PMPI_Message_f2c(*{n});")
                call.append(f"&{n}_c")
                after.append(f"*{n} = PMPI_Message_c2f({n}_c);")
            elif t == "MPI_Comm *":
                fparams.append(f"MPI_Fint *{n}")
                before.append(f"MPI_Comm {n}_c = PMPI_Comm_f2c(*{n});")
                call.append(f"&{n}_c")
                after.append(f"*{n} = PMPI_Comm_c2f({n}_c);")
            elif t == "MPI_Status *":
                fparams.append(f"MPI_Fint *{n}")
                before.append(f"MPI_Status {n}_c;")
                call.append(f"mps_f_status_ignore({n}) ? MPI_STATUS_IGNORE : &{n}_c")
                after.append(f"if (!mps_f_status_ignore({n})) PMPI_Status_c2f(&{n}_c, {n});")
            else:
                raise SystemExit(f"wrapgen: no Fortran mapping for {p.ctype} {n} in {fn.name}")
    fparams.append("MPI_Fint *ierr")
    lower = fn.lower
    body = "".join(f"    {b}\n" for b in before)
    body += (f"    int rc = impl_{fn.name}({', '.join(['__builtin_return_address(0)'] + call)});\n")
    body += "".join(f"    {a}\n" for a in after)
    body += "    if (ierr) *ierr = rc;\n"
    short = lower[4:]
    # mpif.h / use mpi call mpi_x_ (or a compiler's variant); use mpi_f08 calls mpi_x_f08_,
    # whose arguments have the same layout (ierror may be absent: NULL)
    aliases = [f"{lower}__", lower, fn.name.upper(), f"ompi_{short}_f", f"{lower}_f08_"]
    alias_decls = "".join(
        f"void {a}({', '.join(fparams)}) __attribute__((alias(\"{lower}_\")));\n" for a in aliases)
    return f"void {lower}_({', '.join(fparams)});\nvoid {lower}_({', '.join(fparams)})\n" \
           f"{{\n{body}}}\n{alias_decls}"


def forward_door(fn: Function) -> str:
    """mpi_x_(...) that notes its caller as the call site, then runs the MPI library's own
    binding (which converts handles and sentinels and calls the C MPI_X we wrap).

    Every Fortran argument is a pointer (INTEGER, handles and buffers by reference), so
    the door forwards the registers and stack slots unchanged as pointers."""
    nargs = (len([p for p in fn.params if p.name not in ("argc", "argv")])
             if fn.kind == "init" else len(fn.params)) + 1  # + ierr
    params = ", ".join(f"void *a{i}" for i in range(nargs))
    args = ", ".join(f"a{i}" for i in range(nargs))
    ptype = f"void (*)({', '.join(['void *'] * nargs)})"
    lower = fn.lower
    names = [f"{lower}_", f"{lower}__", lower, fn.name.upper()]
    # the binding's address never changes once found: remembered per door
    return "".join(
        f"void {name}({params});\nvoid {name}({params})\n{{\n"
        f"    static void *next_;\n"
        f"    void *next = __atomic_load_n(&next_, __ATOMIC_RELAXED);\n"
        f"    if (!next) {{\n"
        f"        next = mps_fortran_next(\"{name}\", \"p{lower}_\");\n"
        f"        __atomic_store_n(&next_, next, __ATOMIC_RELAXED);\n"
        f"    }}\n"
        f"    mps_fortran_caller(__builtin_return_address(0));\n"
        f"    (({ptype})next)({args});\n"
        f"    mps_fortran_caller(NULL);\n}}\n"
        for name in names)


def main(argv: list[str]) -> int:
    spec, outdir = Path(argv[1]), Path(argv[2])
    fortran = "--fortran" in argv[3:]
    forward = "--fortran-forward" in argv[3:]
    functions = parse_spec(spec)
    outdir.mkdir(parents=True, exist_ok=True)
    enum = "".join(f"    MPS_FN_{f.name},\n" for f in functions)
    (outdir / "functions.h").write_text(
        "/* generated by gen/wrapgen.py from gen/mpi.spec: do not edit */\n"
        "#ifndef MPS_FUNCTIONS_H\n#define MPS_FUNCTIONS_H\n"
        f"enum mps_fn {{\n{enum}    MPS_FN_COUNT\n}};\n"
        "extern const char *const mps_fn_names[MPS_FN_COUNT];\n"
        "extern const int mps_fn_roles[MPS_FN_COUNT];\n#endif\n")
    parts = [
        "/* generated by gen/wrapgen.py from gen/mpi.spec: do not edit */\n",
        "#include \"mpiscope.h\"\n#include <otf2/otf2.h>\n#include <stdlib.h>\n"
        "#include <string.h>\n\n",
        "const char *const mps_fn_names[MPS_FN_COUNT] = {\n"
        + "".join(f"    \"{f.name}\",\n" for f in functions) + "};\n",
        "const int mps_fn_roles[MPS_FN_COUNT] = {\n"
        + "".join(f"    OTF2_REGION_ROLE_{f.role},\n" for f in functions) + "};\n\n",
    ]
    for f in functions:
        parts += [impl(f), c_door(f), "\n"]
    if fortran:
        parts.append("/* ---- Fortran entry points (mpif.h, use mpi, use mpi_f08) ---- */\n")
        parts.append("_Static_assert(sizeof(MPI_Fint) == sizeof(int), "
                     "\"Fortran INTEGER arrays are passed through as int\");\n\n")
        for f in functions:
            if f.fortran:
                parts += [fortran_door(f), "\n"]
    if forward:
        parts.append("/* ---- Fortran doors (mpif.h, use mpi) forwarding to the library ---- */\n")
        for f in functions:
            if f.fortran:
                parts += [forward_door(f), "\n"]
    (outdir / "wrappers.c").write_text("".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
