#!/usr/bin/env python3
"""Generate the MPI wrappers from gen/mpi.spec (the one table of signatures).

    wrapgen.py SPEC OUTDIR [--fortran | --fortran-forward] [--mpicc CC [--mpifort FC]]

writes OUTDIR/functions.h (function ids, names, OTF2 region roles) and
OUTDIR/wrappers.c (C wrappers, and with --fortran the Fortran entry points; with
--fortran-forward thin Fortran doors that note the caller and forward to the MPI
library's own Fortran binding, which calls our C wrappers: MPICH's way).
Every function gets one static implementation `impl_MPI_X(ra, args...)`; the C
symbol and each Fortran symbol are thin doors into it, passing their caller's
return address so call sites point at user code.

With --mpicc, every other `MPI_*` function the `mpi.h` of that MPI declares (and its
library exports as PMPI_*) gets a generated timed wrapper too — Enter, PMPI, Leave —
unless the spec's `## local` section lists it: whatever the MPI declares is covered by
construction. --mpifort names that MPI's Fortran compiler wrapper, whose libraries tell
which of those functions have a Fortran binding (and so get a Fortran door).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Param:
    ctype: str  # e.g. "const void *", "int", "MPI_Request *", "MPI_Request" (array elem)
    name: str
    array: str | None = None  # length expression for `T name[n]`, "" for `T name[]`
    decl: str = ""  # a header's own declarator, used as it is (generated wrappers)

    @property
    def c_decl(self) -> str:
        if self.decl:
            return self.decl
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
    generated: bool = False  # from mpi.h, not from a spec entry: a timed wrapper only

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
    return parse_spec_tables(path)[0]


def parse_spec_tables(path: Path) -> tuple[list[Function], list[str]]:
    """The spec's entries, and its local-only list (`MPI_X local` lines: names, or a
    prefix ending in `*`)."""
    functions: list[Function] = []
    local: list[str] = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        words = line.split()
        if not line[0].isspace() and len(words) == 2 and words[1] == "local":
            if not re.fullmatch(r"MPI_\w+\*?", words[0]):
                raise SystemExit(f"{path}:{lineno}: expected 'MPI_Name local', got "
                                 f"{line.strip()!r}")
            if words[0] in local:
                raise SystemExit(f"{path}:{lineno}: {words[0]} listed twice as local")
            local.append(words[0])
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
    for fn in functions:
        if is_local(fn.name, local):
            raise SystemExit(f"{path}: {fn.name} is both a spec entry and local")
    return functions, local


def is_local(name: str, local: list[str]) -> bool:
    return any(name == p or (p.endswith("*") and name.startswith(p[:-1])) for p in local)


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
        # a completion call (Wait/Test families) still completes requests when it fails
        keep = int("mps_complete" in fn.post or "mps_test_incomplete" in fn.post)
        body = (f"    if (!mps_active()) return {call};\n"
                f"    mps_enter({fid}, ra_);\n{hooks_pre}"
                f"    int rc = {call};\n    mps_after();\n"
                f"    if (__builtin_expect(rc != MPI_SUCCESS, 0)) mps_failed(rc, {keep});\n"
                f"{hooks_post}"
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
    "MPI_Win": "PMPI_Win_f2c",
    "MPI_File": "PMPI_File_f2c",
    "MPI_Message": "PMPI_Message_f2c",
    "MPI_Request": "PMPI_Request_f2c",  # by value: MPI_Request_get_status
}
# handles a call creates or frees: converted in, and back out after the call
HANDLE_OUT = {"MPI_Comm *": "Comm", "MPI_Win *": "Win", "MPI_File *": "File",
              "MPI_Message *": "Message"}  # Mprobe sets a message, Mrecv consumes it
# INTEGER(KIND=MPI_ADDRESS_KIND) and INTEGER(KIND=MPI_OFFSET_KIND), by reference
BY_VALUE_KIND = ("MPI_Aint", "MPI_Offset")


def fortran_door(fn: Function) -> str:
    """mpi_x_(...) with Fortran handles and INTEGER by reference, converted to C."""
    fparams: list[str] = []
    before: list[str] = []
    call: list[str] = []
    after: list[str] = []
    hidden: list[str] = []  # Fortran's hidden CHARACTER lengths, after ierr
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
            elif t == "void *" and n == "baseptr":
                # Win_allocate stores the address into an INTEGER(KIND=MPI_ADDRESS_KIND)
                fparams.append(f"void *{n}")
                call.append(n)
            elif t in ("void *",):
                fparams.append(f"void *{n}")
                call.append(f"mps_f_buf({n})")
            elif t == "char *":
                # CHARACTER(*): blank-padded, its length a hidden argument after ierr
                fparams.append(f"char *{n}")
                hidden.append(f"size_t {n}_len")
                before.append(f"char *{n}_c = mps_f_string({n}, {n}_len);")
                call.append(f"{n}_c")
                after.append(f"free({n}_c);")
            elif t in BY_VALUE_KIND:
                fparams.append(f"{t} *{n}")
                call.append(f"*{n}")
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
            elif t in HANDLE_OUT:
                h = HANDLE_OUT[t]
                fparams.append(f"MPI_Fint *{n}")
                before.append(f"MPI_{h} {n}_c = PMPI_{h}_f2c(*{n});")
                call.append(f"&{n}_c")
                after.append(f"*{n} = PMPI_{h}_c2f({n}_c);")
            elif t == "MPI_Status *":
                fparams.append(f"MPI_Fint *{n}")
                before.append(f"MPI_Status {n}_c;")
                call.append(f"mps_f_status_ignore({n}) ? MPI_STATUS_IGNORE : &{n}_c")
                after.append(f"if (!mps_f_status_ignore({n})) PMPI_Status_c2f(&{n}_c, {n});")
            else:
                raise SystemExit(f"wrapgen: no Fortran mapping for {p.ctype} {n} in {fn.name}")
    fparams.append("MPI_Fint *ierr")
    fparams += hidden
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
             if fn.kind == "init" else len(fn.params) + hidden_lengths(fn)) + 1  # + ierr
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


# ---------------------------------------------------------------- the MPI's own mpi.h

@dataclass
class Prototype:
    name: str
    ret: str  # return type as declared ("int", "double", "MPI_Aint", ...)
    params: list[Param]
    variadic: bool = False


def _strip_attributes(text: str) -> str:
    """The header without its `__attribute__((...))` groups (visibility, deprecation,
    type tags: nothing a wrapper's own declaration needs)."""
    out, i = [], 0
    while (j := text.find("__attribute__", i)) >= 0:
        out.append(text[i:j])
        k, depth = text.index("(", j), 0
        while True:
            depth += text[k] == "("
            depth -= text[k] == ")"
            k += 1
            if depth == 0:
                break
        i = k
    out.append(text[i:])
    return "".join(out)


def _split_top(text: str, sep: str) -> list[str]:
    out, cur, depth = [], "", 0
    for ch in text:
        depth += ch in "({["
        depth -= ch in ")}]"
        if ch == sep and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


DECL_RE = re.compile(
    r"^(?:extern )?(?P<ret>[\w ]*?[\w*]) ?\b(?P<name>MPI_\w+) ?\((?P<params>.*)\)$", re.S)
C_WORDS = {"const", "volatile", "restrict", "int", "char", "void", "double", "float", "long",
           "short", "unsigned", "signed", "struct"}


def header_param(text: str, index: int) -> Param:
    """One parameter as the header declares it: kept verbatim, its name found (or given:
    `a<index>` when the header names none)."""
    text = " ".join(text.split())
    if "(" in text:
        raise SystemExit(f"wrapgen: cannot parse header parameter {text!r}")
    base = re.sub(r"(\s*\[[^\]]*\])+$", "", text)  # `int ranges[][3]` -> `int ranges`
    m = re.search(r"(\w+)$", base)
    words = base.replace("*", " ").split()
    if m and len(words) > 1 and m[1] not in C_WORDS and not m[1].startswith("MPI_"):
        name, ctype = m[1], base[:m.start()].strip()
        return Param(ctype, name, "" if base != text else None, decl=text)
    name = f"a{index}"  # an unnamed parameter gets one, before any array suffix
    arrays = text[len(base):].strip()
    return Param(base, name, "" if arrays else None, decl=f"{base} {name}{arrays}")


def parse_header(text: str) -> dict[str, Prototype]:
    """Every `MPI_*` function a preprocessed mpi.h declares (typedefs skipped)."""
    protos: dict[str, Prototype] = {}
    for decl in _split_top(_strip_attributes(text), ";"):
        decl = " ".join(decl.split())
        if decl.startswith("typedef") or "MPI_" not in decl:
            continue
        m = DECL_RE.match(decl)
        if not m:
            continue
        raw = [p.strip() for p in _split_top(m["params"], ",")]
        variadic = "..." in raw
        raw = [p for p in raw if p not in ("...", "void", "")]
        params = [header_param(p, i) for i, p in enumerate(raw)]
        protos[m["name"]] = Prototype(m["name"], " ".join(m["ret"].split()), params, variadic)
    return protos


def preprocess_header(mpicc: str) -> str:
    """mpi.h as the MPI's own compiler wrapper sees it (its include path, its macros)."""
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "h.c"
        src.write_text("#include <mpi.h>\n")
        return subprocess.run([mpicc, "-E", "-P", str(src)], check=True, text=True,
                              capture_output=True).stdout


def link_libraries(compiler: str) -> list[Path]:
    """The shared libraries an MPI compiler wrapper links (Open MPI's -showme:link,
    MPICH's -link_info), found in its -L directories or the compiler's own."""
    for flag in ("-showme:link", "-link_info"):
        r = subprocess.run([compiler, flag], text=True, capture_output=True)
        if r.returncode == 0 and r.stdout.strip():
            words = r.stdout.split()
            break
    else:
        raise SystemExit(f"wrapgen: {compiler} tells no link line")
    dirs = [Path(w[2:]) for w in words if w.startswith("-L")]
    libs: list[Path] = []
    # the MPI's own libraries (libmpi*, libmpich*), not its dependencies (libm, libz, ...)
    for lib in (w[2:] for w in words if w.startswith("-l") and "mpi" in w):
        found = [d / f"lib{lib}.so" for d in dirs if (d / f"lib{lib}.so").exists()]
        if not found:
            r = subprocess.run([compiler, f"-print-file-name=lib{lib}.so"], text=True,
                               capture_output=True)
            path = Path(r.stdout.strip())
            found = [path] if r.returncode == 0 and path.is_absolute() and path.exists() else []
        libs += found[:1]
    return libs


def exported(libs: list[Path]) -> set[str]:
    """Function and object names the libraries define in their dynamic symbol tables."""
    names: set[str] = set()
    for lib in libs:
        out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], check=True, text=True,
                             capture_output=True).stdout
        names.update(line.split()[-1].split("@")[0] for line in out.splitlines()
                     if line.strip())
    return names


# OTF2 roles of generated wrappers where the name says what the call is; FUNCTION else.
P2P_RE = re.compile(r"^MPI_(I?[bsr]?send|I?recv|[BSR]?send_init|Recv_init|I?m?probe|Imrecv"
                    r"|Mrecv|I?sendrecv(_replace)?|P(send|recv)_init|Pready(_list|_range)?"
                    r"|Parrived)(_c)?$", re.I)
RMA_RE = re.compile(r"^MPI_(R?(put|get|accumulate|get_accumulate)|Fetch_and_op|Compare_and_swap"
                    r"|Win_(fence|post|start|complete|wait|test|lock|unlock|lock_all|unlock_all"
                    r"|flush|flush_all|flush_local|flush_local_all|sync))(_c)?$", re.I)
FILE_DATA_RE = re.compile(r"^MPI_File_i?(read|write)", re.I)


def generated_role(name: str) -> str:
    if P2P_RE.match(name):
        return "POINT2POINT"
    if RMA_RE.match(name):
        return "RMA"
    if FILE_DATA_RE.match(name):
        return "FILE_IO"
    if name.startswith("MPI_File_"):
        return "FILE_IO_METADATA"
    return "FUNCTION"


def coverage(spec: list[Function], local: list[str], protos: dict[str, Prototype],
             pmpi: set[str] | None) -> list[Function]:
    """A timed wrapper for every declared function neither in the spec nor local.
    `pmpi`: the names the C library exports (None: not checked); a function it lacks
    (declared, not built) cannot be forwarded and is left out."""
    in_spec = {f.name for f in spec}
    out: list[Function] = []
    for name in sorted(protos):
        proto = protos[name]
        if name in in_spec or is_local(name, local):
            continue
        if pmpi is not None and f"PMPI_{name[4:]}" not in pmpi:
            print(f"wrapgen: {name} is declared by mpi.h but its library has no PMPI_"
                  f"{name[4:]}: not wrapped", file=sys.stderr)
            continue
        if proto.ret != "int" or proto.variadic:
            raise SystemExit(f"wrapgen: {name} ({proto.ret}{', variadic' if proto.variadic else ''}"
                             f") needs a spec entry or a `{name} local` line in mpi.spec")
        out.append(Function(name, generated_role(name), params=proto.params, generated=True))
    return out


# What a spec entry's parameter may become in its large-count twin, by the header's name
# for it: a count `MPI_Count`, a displacement unit `MPI_Aint`, count arrays `MPI_Count[]`,
# displacement arrays `MPI_Aint[]` (what the hooks' runtime takes either way). Anything
# else differing needs a decision.
WIDENED = {("int", "MPI_Count"): r"\w*count", ("int", "MPI_Aint"): r"disp_unit",
           ("const int[]", "const MPI_Count[]"): r"\w*counts",
           ("const int[]", "const MPI_Aint[]"): r"\w*displs"}


def type_key(p: Param) -> str:
    """A parameter's type in one spelling: `const void*`, `MPI_Status*`, `const int[]`."""
    return re.sub(r"\s*\*\s*", "*", " ".join(p.ctype.split())) + ("[]" if p.array is not None
                                                                   else "")


def large_count_twins(spec: list[Function], protos: dict[str, Prototype],
                      pmpi: set[str] | None) -> list[Function]:
    """MPI-4's large-count functions (`MPI_X_c`: MPI_Count counts, MPI_Aint displacements)
    of the spec's entries, from the same entry: its role and hooks, the header's parameter
    types under the entry's parameter names (the hooks' runtime takes 64-bit counts and
    either width of array, mpiscope.h). No Fortran binding exists for them."""
    out: list[Function] = []
    for f in spec:
        proto = protos.get(f"{f.name}_c")
        if f.kind != "normal" or proto is None or proto.ret != "int" or proto.variadic:
            continue
        if pmpi is not None and f"PMPI_{f.name[4:]}_c" not in pmpi:
            continue
        if len(proto.params) != len(f.params):
            raise SystemExit(f"wrapgen: {proto.name} has {len(proto.params)} parameters, "
                             f"the spec's {f.name} {len(f.params)}")
        for i, (h, s) in enumerate(zip(proto.params, f.params, strict=True)):
            a, b = type_key(s), type_key(h)
            if a != b and not re.fullmatch(WIDENED.get((a, b), "(?!)"), h.name):
                raise SystemExit(f"wrapgen: {proto.name}: parameter {i + 1} is `{h.decl}` where "
                                 f"{f.name} has `{s.c_decl}`: not a large-count widening")
        params = [Param(h.ctype, s.name, h.array,
                        re.sub(rf"\b{re.escape(h.name)}\b", s.name, h.decl, count=1))
                  for h, s in zip(proto.params, f.params, strict=True)]
        out.append(Function(proto.name, f.role, f.kind, params, f.pre, f.post, fortran=False))
    return out


def hidden_lengths(fn: Function) -> int:
    """Fortran passes a CHARACTER argument's length after the others: one per `char`
    parameter (a string, or an array of them such as Comm_spawn's argv)."""
    return sum(1 for p in fn.params if re.search(r"\bchar\b", p.ctype))


def fortran_timed_door(fn: Function) -> str:
    """mpi_x_(...) for a generated function on Open MPI, whose Fortran binding calls
    PMPI_X directly (not our C wrapper): Enter, the library's own pmpi_x_, Leave.
    Every Fortran argument is a pointer, ierr last, then one hidden length per
    CHARACTER argument: forwarded as they came."""
    nargs = len(fn.params) + 1 + hidden_lengths(fn)
    params = ", ".join(f"void *a{i}" for i in range(nargs))
    args = ", ".join(f"a{i}" for i in range(nargs))
    ptype = f"void (*)({', '.join(['void *'] * nargs)})"
    lower, short = fn.lower, fn.lower[4:]
    aliases = [f"{lower}__", lower, fn.name.upper(), f"ompi_{short}_f", f"{lower}_f08_"]
    alias_decls = "".join(
        f"void {a}({params}) __attribute__((alias(\"{lower}_\")));\n" for a in aliases)
    fid = f"MPS_FN_{fn.name}"
    return (f"void {lower}_({params});\nvoid {lower}_({params})\n{{\n"
            f"    static void *next_;\n"
            f"    void *next = __atomic_load_n(&next_, __ATOMIC_RELAXED);\n"
            f"    if (!next) {{\n"
            f"        next = mps_fortran_next(\"p{lower}_\", \"{lower}_\");\n"
            f"        __atomic_store_n(&next_, next, __ATOMIC_RELAXED);\n"
            f"    }}\n"
            f"    if (!mps_active()) {{ (({ptype})next)({args}); return; }}\n"
            f"    mps_enter({fid}, __builtin_return_address(0));\n"
            f"    (({ptype})next)({args});\n"
            f"    mps_after();\n"
            f"    mps_leave({fid});\n}}\n{alias_decls}")


def option(argv: list[str], flag: str) -> str | None:
    return argv[argv.index(flag) + 1] if flag in argv[:-1] else None


def main(argv: list[str]) -> int:
    spec, outdir = Path(argv[1]), Path(argv[2])
    fortran = "--fortran" in argv[3:]
    forward = "--fortran-forward" in argv[3:]
    mpicc, mpifort = option(argv, "--mpicc"), option(argv, "--mpifort")
    functions, local = parse_spec_tables(spec)
    generated: list[Function] = []
    fortran_names: set[str] = set()
    if mpicc:
        protos, pmpi = parse_header(preprocess_header(mpicc)), exported(link_libraries(mpicc))
        functions = functions + large_count_twins(functions, protos, pmpi)
        generated = coverage(functions, local, protos, pmpi)
        if mpifort:
            fortran_names = exported(link_libraries(mpifort))
    for f in generated:  # a Fortran door only where the library has a Fortran binding
        f.fortran = bool({f"{f.lower}_", f"p{f.lower}_"} & fortran_names)
    everything = functions + generated
    outdir.mkdir(parents=True, exist_ok=True)
    enum = "".join(f"    MPS_FN_{f.name},\n" for f in everything)
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
        + "".join(f"    \"{f.name}\",\n" for f in everything) + "};\n",
        "const int mps_fn_roles[MPS_FN_COUNT] = {\n"
        + "".join(f"    OTF2_REGION_ROLE_{f.role},\n" for f in everything) + "};\n\n",
    ]
    for f in functions:
        parts += [impl(f), c_door(f), "\n"]
    if generated:
        # every other function mpi.h declares: timed only. Some are deprecated (MPICH's
        # MPI_Address, ...): forwarding them is the point, not a use to warn about.
        parts.append("/* ---- generated from mpi.h: functions the spec does not list ---- */\n"
                     "#pragma GCC diagnostic ignored \"-Wdeprecated-declarations\"\n\n")
        for f in generated:
            parts += [impl(f), c_door(f), "\n"]
    if fortran:
        parts.append("/* ---- Fortran entry points (mpif.h, use mpi, use mpi_f08) ---- */\n")
        parts.append("_Static_assert(sizeof(MPI_Fint) == sizeof(int), "
                     "\"Fortran INTEGER arrays are passed through as int\");\n\n")
        for f in functions:
            if f.fortran:
                parts += [fortran_door(f), "\n"]
        for f in generated:
            if f.fortran:
                parts += [fortran_timed_door(f), "\n"]
    if forward:
        parts.append("/* ---- Fortran doors (mpif.h, use mpi) forwarding to the library ---- */\n")
        for f in everything:
            if f.fortran:
                parts += [forward_door(f), "\n"]
    (outdir / "wrappers.c").write_text("".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
