/* mpi4py call sites: the Python file.py:LINE of the code that called an mpi4py method,
 * instead of the C call inside mpi4py's extension module that every Python call shares.
 *
 * A return address into mpi4py's module (its file is .../mpi4py/MPI.*.so) is detected
 * once, when the call site is first seen (mps_callsite_id), and its id is flagged
 * MPS_CS_PYTHON; only flagged calls come here (mps_enter tests the flag), so programs
 * without mpi4py pay one predictable branch.
 *
 * mpi4py releases the GIL around its MPI calls (`with nogil`), so the interpreter's C
 * API, which may allocate (PyThreadState_GetFrame creates a frame object), cannot be used
 * here. But this thread's own Python frames cannot change while it is inside the MPI call,
 * and reading them allocates nothing: the thread state (PyGILState_GetThisThreadState, a
 * thread-local, GIL-free by design) → its current interpreter frame → the code object and
 * the instruction being executed. Those fields are CPython internals, so they are read
 * only on a CPython whose layout this file knows (3.11, checked with Py_Version at first
 * use; tests/test_mpi4py_callsites.py compares the offsets with CPython's own headers);
 * elsewhere mpi4py calls keep the C call site, as before.
 *
 * The instruction's address identifies (code object, instruction) while the code is
 * alive; it is the call site's key in the process's call-site table, and a per-thread
 * cache of recent keys keeps the table's lock off the repeated calls. A new key is named
 * at once (the code object is alive now, not at MPI_Finalize): co_filename and the line
 * from the code's line table (PyCode_Addr2Line reads it, allocating nothing). */
#define _GNU_SOURCE
#include "runtime.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* CPython 3.11 (x86-64) layout, from Include/internal/pycore_frame.h and cpython/code.h */
#define PY311_TSTATE_CFRAME 56     /* PyThreadState.cframe */
#define PY311_CFRAME_CURRENT 8     /* _PyCFrame.current_frame */
#define PY311_FRAME_CODE 32        /* _PyInterpreterFrame.f_code */
#define PY311_FRAME_PREVIOUS 48    /* _PyInterpreterFrame.previous */
#define PY311_FRAME_PREV_INSTR 56  /* _PyInterpreterFrame.prev_instr */
#define PY311_CODE_FILENAME 112    /* PyCodeObject.co_filename */
#define PY311_CODE_BYTECODE 184    /* PyCodeObject.co_code_adaptive */
#define PY311_STR_STATE 32         /* PyASCIIObject.state */
#define PY311_STR_ASCII_DATA 48    /* sizeof(PyASCIIObject): a compact ASCII string's text */

static struct {
    int state; /* 0 not looked at, 1 usable, -1 not a CPython this file knows */
    void *(*this_thread)(void);             /* PyGILState_GetThisThreadState */
    int (*initialized)(void);               /* Py_IsInitialized */
    int (*addr2line)(void *code, int byte); /* PyCode_Addr2Line */
} py;

/* names of the Python call sites, by key (the instruction's address) */
static struct {
    uint64_t *key;
    char **file;
    uint32_t *line;
    uint32_t n, cap;
} names;

static int python_usable(void)
{
    if (py.state) return py.state > 0;
    py.state = -1;
    const unsigned long *version = dlsym(RTLD_DEFAULT, "Py_Version"); /* 3.11 and later */
    if (!version || (*version >> 16) != 0x030b) return 0;
    py.this_thread = (void *(*)(void))dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
    py.initialized = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsInitialized");
    py.addr2line = (int (*)(void *, int))dlsym(RTLD_DEFAULT, "PyCode_Addr2Line");
    if (py.this_thread && py.initialized && py.addr2line) py.state = 1;
    return py.state > 0;
}

int mps_py_is_mpi4py(void *ra)
{
    Dl_info info;
    if (!dladdr((char *)ra - 1, &info) || !info.dli_fname) return 0;
    const char *f = strstr(info.dli_fname, "/mpi4py/MPI.");
    return f && strstr(f, ".so") && python_usable();
}

/* the code object is importlib's (a compact ASCII "<frozen importlib._bootstrap...>") */
static int frozen(const char *code)
{
    const char *s = code ? *(const char **)(code + PY311_CODE_FILENAME) : NULL;
    return s && (*(const uint32_t *)(s + PY311_STR_STATE) & 0x60) == 0x60 &&
           strncmp(s + PY311_STR_ASCII_DATA, "<frozen importlib", 17) == 0;
}

/* the calling thread's executing Python code object and instruction, or 0 */
static int py_where(char **code, char **instr)
{
    if (!py.initialized()) return 0; /* e.g. mpi4py's MPI_Finalize at interpreter exit */
    char *ts = py.this_thread();
    char *cframe = ts ? *(char **)(ts + PY311_TSTATE_CFRAME) : NULL;
    char *frame = cframe ? *(char **)(cframe + PY311_CFRAME_CURRENT) : NULL;
    /* MPI_Init from `from mpi4py import MPI`: the importer, not the import machinery */
    for (int up = 0; frame && up < 16 && frozen(*(char **)(frame + PY311_FRAME_CODE)); up++)
        frame = *(char **)(frame + PY311_FRAME_PREVIOUS);
    if (!frame) return 0; /* MPI called from C code with no Python frame running */
    *code = *(char **)(frame + PY311_FRAME_CODE);
    *instr = *(char **)(frame + PY311_FRAME_PREV_INSTR);
    return *code && *instr > *code;
}

/* file and line of instr in code, registered under key instr (lock held) */
static void name_site(char *code, char *instr)
{
    if (names.n == names.cap) {
        uint32_t cap = names.cap ? names.cap * 2 : 64;
        uint64_t *k = realloc(names.key, cap * sizeof *k);
        if (k) names.key = k;
        char **f = realloc(names.file, cap * sizeof *f);
        if (f) names.file = f;
        uint32_t *l = realloc(names.line, cap * sizeof *l);
        if (l) names.line = l;
        if (!k || !f || !l) return;
        names.cap = cap;
    }
    const char *s = *(const char **)(code + PY311_CODE_FILENAME);
    /* a compact ASCII str holds its text inline (any other kind would need converting,
     * which allocates: those are named by their line only) */
    int ascii = s && (*(const uint32_t *)(s + PY311_STR_STATE) & 0x60) == 0x60;
    int line = py.addr2line(code, (int)(instr - (code + PY311_CODE_BYTECODE)));
    names.key[names.n] = (uint64_t)(uintptr_t)instr;
    names.file[names.n] = strdup(ascii ? s + PY311_STR_ASCII_DATA : "<python>");
    names.line[names.n] = line > 0 ? (uint32_t)line : 0;
    names.n++;
}

/* recently seen Python call sites of this thread: key → flagged-off id */
#define PY_CACHE 64
static __thread struct { uint64_t key; uint32_t id; } tl_pycache[PY_CACHE]
    __attribute__((tls_model("initial-exec")));

uint32_t mps_py_callsite(uint32_t cs)
{
    uint32_t c_site = cs & ~MPS_CS_PYTHON; /* mpi4py's own call: where Python is unknown */
    char *code, *instr;
    if (cs == UINT32_MAX) return cs; /* no id: as for any call site */
    if (!py_where(&code, &instr)) return c_site;
    uint64_t key = (uint64_t)(uintptr_t)instr;
    unsigned slot = (unsigned)(key >> 1) % PY_CACHE;
    if (tl_pycache[slot].key == key) return tl_pycache[slot].id;
    LOCK();
    uint32_t before = mps_sites.n;
    uint32_t id = mps_callsite_id(instr); /* the table's key: not a code address */
    if (id != UINT32_MAX && mps_sites.n > before) name_site(code, instr);
    UNLOCK();
    if (id == UINT32_MAX) return c_site;
    id &= ~MPS_CS_PYTHON;
    tl_pycache[slot].key = key;
    tl_pycache[slot].id = id;
    return id;
}

int mps_py_name(const void *addr, mps_location *out)
{
    uint64_t a = (uint64_t)(uintptr_t)addr;
    for (uint32_t i = 0; i < names.n; i++) {
        if (names.key[i] != a) continue;
        *out = (mps_location){.file = strdup(names.file[i]), .line = names.line[i]};
        return out->file != NULL;
    }
    return 0;
}
