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
 * use; interposer/tests/test_mpi4py_callsites.py compares the offsets with CPython's own
 * headers);
 * elsewhere mpi4py calls keep the C call site, as before.
 *
 * The instruction's address identifies (code object, instruction) while the code is
 * alive; it is the call site's key in the process's call-site table, and a per-thread
 * cache of recent keys keeps the table's lock off the repeated calls. A new key is named
 * at once (the code object is alive now, not at MPI_Finalize): co_filename and the line
 * from the code's line table (PyCode_Addr2Line reads it, allocating nothing).
 *
 * At MPISCOPE_CALLPATH_DEPTH > 1 the call path is made of Python frames too: the lines of
 * the frames from the caller outwards, each keyed and named the same way, interned in the
 * path table (callpath.c) instead of the C stack's frames (mpi4py, the interpreter). */
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
#define PY311_CODE_QUALNAME 128    /* PyCodeObject.co_qualname */
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
    char **file, **func;
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

/* the calling thread's executing Python frame (importlib's skipped), or NULL */
static char *py_frame(void)
{
    if (!py.initialized()) return NULL; /* e.g. mpi4py's MPI_Finalize at interpreter exit */
    char *ts = py.this_thread();
    char *cframe = ts ? *(char **)(ts + PY311_TSTATE_CFRAME) : NULL;
    char *frame = cframe ? *(char **)(cframe + PY311_CFRAME_CURRENT) : NULL;
    /* MPI_Init from `from mpi4py import MPI`: the importer, not the import machinery */
    for (int up = 0; frame && up < 16 && frozen(*(char **)(frame + PY311_FRAME_CODE)); up++)
        frame = *(char **)(frame + PY311_FRAME_PREVIOUS);
    return frame; /* NULL: MPI called from C code with no Python frame running */
}

/* a frame's code object and current instruction, or 0 */
static int frame_at(const char *frame, char **code, char **instr)
{
    *code = *(char **)(frame + PY311_FRAME_CODE);
    *instr = *(char **)(frame + PY311_FRAME_PREV_INSTR);
    return *code && *instr > *code;
}

/* the text of the str at *field: a compact ASCII str holds it inline (any other kind
 * would need converting, which allocates) */
static const char *ascii(const char *field)
{
    const char *s = *(const char **)field;
    int inline_ascii = s && (*(const uint32_t *)(s + PY311_STR_STATE) & 0x60) == 0x60;
    return inline_ascii ? s + PY311_STR_ASCII_DATA : "<python>";
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
        char **q = realloc(names.func, cap * sizeof *q);
        if (q) names.func = q;
        if (!k || !f || !l || !q) return;
        names.cap = cap;
    }
    int line = py.addr2line(code, (int)(instr - (code + PY311_CODE_BYTECODE)));
    names.key[names.n] = (uint64_t)(uintptr_t)instr;
    names.file[names.n] = strdup(ascii(code + PY311_CODE_FILENAME));
    names.func[names.n] = strdup(ascii(code + PY311_CODE_QUALNAME));
    names.line[names.n] = line > 0 ? (uint32_t)line : 0;
    names.n++;
}

/* the call-site id of instr in code, named where new (lock held); UINT32_MAX without
 * memory */
static uint32_t site_of(char *code, char *instr)
{
    uint32_t before = mps_sites.n;
    uint32_t id = mps_callsite_id(instr); /* the table's key: not a code address */
    if (id != UINT32_MAX && mps_sites.n > before) name_site(code, instr);
    return id == UINT32_MAX ? id : id & ~MPS_CS_PYTHON;
}

/* recently seen Python call sites of this thread: key → id */
#define PY_CACHE 64
static __thread struct { uint64_t key; uint32_t id; } tl_pycache[PY_CACHE]
    __attribute__((tls_model("initial-exec")));

/* this thread's recent Python call paths (allocated at its first one): frames → path id */
#define PY_PATH_MAX 16
typedef struct { uintptr_t f[PY_PATH_MAX]; uint32_t n, id; } py_path;
static __thread py_path *tl_pypaths __attribute__((tls_model("initial-exec")));

/* the call path of Python frames from `frame` outwards (depth > 1): each frame's line is
 * a frame of the path, innermost first; UINT32_MAX where it cannot be had */
static uint32_t python_path(char *frame)
{
    uintptr_t f[PY_PATH_MAX];
    char *codes[PY_PATH_MAX];
    unsigned depth = mps_cfg.callpath_depth < PY_PATH_MAX ? mps_cfg.callpath_depth
                                                           : PY_PATH_MAX;
    unsigned n = 0;
    uint64_t h = 0xcbf29ce484222325ull;
    for (char *fr = frame; fr && n < depth; fr = *(char **)(fr + PY311_FRAME_PREVIOUS)) {
        char *code, *instr;
        if (!frame_at(fr, &code, &instr)) break;
        codes[n] = code;
        f[n++] = (uintptr_t)instr;
        h = (h ^ (uintptr_t)instr) * 0x100000001b3ull;
    }
    if (!n) return UINT32_MAX;
    if (!tl_pypaths && !(tl_pypaths = calloc(PY_CACHE, sizeof *tl_pypaths))) return UINT32_MAX;
    py_path *e = &tl_pypaths[(h ^ h >> 29) % PY_CACHE];
    if (e->n == n && memcmp(e->f, f, n * sizeof *f) == 0) return e->id;
    LOCK();
    for (unsigned i = 0; i < n; i++) site_of(codes[i], (char *)f[i]); /* named once */
    uint32_t id = mps_callpath_intern(f, n);
    UNLOCK();
    if (id != UINT32_MAX) {
        memcpy(e->f, f, n * sizeof *f);
        e->n = n;
        e->id = id;
    }
    return id;
}

uint32_t mps_py_callsite(uint32_t cs, uint32_t *path)
{
    uint32_t c_site = cs & ~MPS_CS_PYTHON; /* mpi4py's own call: where Python is unknown */
    char *frame, *code, *instr;
    if (cs == UINT32_MAX) return cs; /* no id: as for any call site */
    if (!(frame = py_frame()) || !frame_at(frame, &code, &instr)) return c_site;
    if (path && mps_cfg.callpath_depth > 1) *path = python_path(frame);
    uint64_t key = (uint64_t)(uintptr_t)instr;
    unsigned slot = (unsigned)(key >> 1) % PY_CACHE;
    if (tl_pycache[slot].key == key) return tl_pycache[slot].id;
    LOCK();
    uint32_t id = site_of(code, instr);
    UNLOCK();
    if (id == UINT32_MAX) return c_site;
    tl_pycache[slot].key = key;
    tl_pycache[slot].id = id;
    return id;
}

int mps_py_name(const void *addr, mps_location *out)
{
    uint64_t a = (uint64_t)(uintptr_t)addr;
    for (uint32_t i = 0; i < names.n; i++) {
        if (names.key[i] != a) continue;
        *out = (mps_location){.file = strdup(names.file[i]), .line = names.line[i],
                              .func = strdup(names.func[i])};
        return out->file != NULL;
    }
    return 0;
}
