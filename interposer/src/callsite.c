/* Call-site resolution, once per distinct return address at MPI_Finalize (and in
 * salvage and mpiscope-recover), naming each call as well as the binary allows:
 * file:line from DWARF; else function+0xOFFSET from .symtab or .dynsym, demangled;
 * else object+0xOFFSET. libdw handles PIE and shared-library load biases and finds
 * separate debug files (.gnu_debuglink, build-id) under the debuginfo path. */
#define _GNU_SOURCE
#include "runtime.h"

#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* libdw's debuginfo path: MPISCOPE_DEBUGINFO_PATH's directories first (colon-separated,
 * absolute), then libdw's default (the object's own directory, .debug, /usr/lib/debug). */
static char **debuginfo_path(void)
{
    static char *path;
    static char buf[4096];
    const char *extra = getenv("MPISCOPE_DEBUGINFO_PATH");
    path = NULL; /* NULL: libdw's default */
    if (extra && *extra) {
        snprintf(buf, sizeof buf, "%s::.debug:/usr/lib/debug", extra);
        path = buf;
    }
    return &path;
}

/* C++'s demangler where libstdc++ is there (it is in every C++ program; the C tools
 * load it on demand) */
typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);
static demangle_fn cxa_demangle(void)
{
    static int tried;
    static demangle_fn fn;
    if (!tried) {
        tried = 1;
        fn = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
        if (!fn) {
            void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
            if (h) fn = (demangle_fn)dlsym(h, "__cxa_demangle");
        }
    }
    return fn;
}

/* a symbol as its language writes it: C++ demangled, gfortran's module procedures
 * `__mod_MOD_proc` as `mod::proc`, everything else as it is */
static char *demangle(const char *sym)
{
    if (strncmp(sym, "_Z", 2) == 0 && cxa_demangle()) {
        int status = -1;
        char *d = cxa_demangle()(sym, NULL, NULL, &status);
        if (d && status == 0) return d;
        free(d);
    }
    const char *mod = strstr(sym, "_MOD_");
    if (strncmp(sym, "__", 2) == 0 && mod && mod > sym + 2 && mod[5]) {
        size_t n = (size_t)(mod - (sym + 2));
        char *d = malloc(n + 2 + strlen(mod + 5) + 1);
        if (d) sprintf(d, "%.*s::%s", (int)n, sym + 2, mod + 5);
        return d;
    }
    return strdup(sym);
}

/* file:line of the instruction at a (DWARF through libdw), else function+0xOFFSET from
 * the symbol tables, into *out; 0 where neither is known */
static int name_from_module(Dwfl *dwfl, Dwarf_Addr a, mps_location *out)
{
    Dwfl_Module *mod = dwfl ? dwfl_addrmodule(dwfl, a) : NULL;
    if (!mod) return 0;
    Dwfl_Line *line = dwfl_module_getsrc(mod, a);
    int lineno = 0;
    const char *src = line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
    if (src && lineno > 0) {
        out->file = strdup(src);
        out->line = (uint32_t)lineno;
        return 1;
    }
    GElf_Off off = 0;
    GElf_Sym sym;
    const char *name = dwfl_module_addrinfo(mod, a, &off, &sym, NULL, NULL, NULL);
    if (!name || !*name) return 0;
    char *d = demangle(name);
    if (!d) return 0;
    size_t n = strlen(d) + 24;
    out->file = malloc(n);
    if (out->file) snprintf(out->file, n, "%s+0x%lx", d, (unsigned long)off);
    free(d);
    return out->file != NULL;
}

/* the module's GNU build-id in hex into out (65 bytes), "" where it has none */
static void module_build_id(Dwfl_Module *mod, char *out)
{
    const unsigned char *bits = NULL;
    GElf_Addr vaddr, bias;
    out[0] = 0;
    int n = mod && dwfl_module_getelf(mod, &bias) ? dwfl_module_build_id(mod, &bits, &vaddr)
                                                  : 0;
    for (int i = 0; i < n && i < 32; i++) sprintf(out + 2 * i, "%02x", bits[i]);
}

/* "object+0xOFFSET" from the object's path */
static char *object_offset(const char *path, uint64_t offset)
{
    char buf[512];
    const char *p = path ? path : "";
    const char *base = strrchr(p, '/');
    base = base ? base + 1 : p;
    snprintf(buf, sizeof buf, "%s+0x%lx", *base ? base : "?", (unsigned long)offset);
    return strdup(buf);
}

void mps_callsite_resolve(void *const *addrs, uint32_t n, mps_location *out)
{
    Dwfl_Callbacks cb = {
        .find_elf = dwfl_linux_proc_find_elf,
        .find_debuginfo = dwfl_standard_find_debuginfo,
        .debuginfo_path = debuginfo_path(),
    };
    Dwfl *dwfl = n ? dwfl_begin(&cb) : NULL;
    if (dwfl && (dwfl_linux_proc_report(dwfl, getpid()) != 0 ||
                 dwfl_report_end(dwfl, NULL, NULL) != 0)) {
        dwfl_end(dwfl);
        dwfl = NULL;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (mps_py_name(addrs[i], &out[i])) continue; /* a Python caller of mpi4py */
        /* the return address follows the call: look up the call instruction itself */
        char *call = (char *)addrs[i] - 1;
        Dl_info info;
        int known = dladdr(call, &info) && info.dli_fname;
        out[i] = (mps_location){
            .object = known && *info.dli_fname ? strdup(info.dli_fname) : NULL,
            .offset = known ? (uint64_t)(call - (char *)info.dli_fbase) : (uint64_t)(uintptr_t)call,
        };
        if (!name_from_module(dwfl, (Dwarf_Addr)(uintptr_t)call, &out[i]))
            out[i].file = known ? object_offset(info.dli_fname, out[i].offset)
                                : object_offset("?", out[i].offset);
        /* the main program's dladdr name is argv[0] as run: its real path is libdw's
         * (known once name_from_module has loaded the module's ELF) */
        Dwfl_Module *mod = dwfl ? dwfl_addrmodule(dwfl, (Dwarf_Addr)(uintptr_t)call) : NULL;
        const char *mpath = NULL;
        if (mod) dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, &mpath, NULL);
        if (mpath && *mpath == '/') {
            free(out[i].object);
            out[i].object = strdup(mpath);
        }
        module_build_id(mod, out[i].build_id);
        const char *fname = mod ? dwfl_module_addrname(mod, (Dwarf_Addr)(uintptr_t)call) : NULL;
        if (fname && *fname) out[i].func = demangle(fname);
    }
    if (dwfl) dwfl_end(dwfl);
}

/* by path, then by index: the first site of each path sorts first */
static const mps_offline_site *offline_sites;

static int cmp_site_path(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    int c = strcmp(offline_sites[x].path, offline_sites[y].path);
    return c ? c : (x > y) - (x < y);
}

/* The same after the process is gone (mpiscope-recover): each object is reported to libdw
 * at the load bias it had in the process, so the recorded return addresses resolve as
 * they would have in it. Objects that are gone or changed give object+offset. */
void mps_callsite_resolve_offline(const mps_offline_site *sites, uint32_t n, mps_location *out)
{
    Dwfl_Callbacks cb = {
        .find_elf = dwfl_build_id_find_elf,
        .find_debuginfo = dwfl_standard_find_debuginfo,
        .section_address = dwfl_offline_section_address,
        .debuginfo_path = debuginfo_path(),
    };
    Dwfl *dwfl = n ? dwfl_begin(&cb) : NULL;
    /* each object once, in order of first sight: the sites sorted by path (n log n: a log
     * may name millions), the first of each path marked */
    uint32_t *by_path = dwfl ? malloc((size_t)n * sizeof *by_path) : NULL;
    unsigned char *first = dwfl ? calloc(n, 1) : NULL;
    int dedup = by_path && first; /* else (no memory) each site's object, libdw keeps one */
    if (dedup) {
        uint32_t m = 0;
        for (uint32_t i = 0; i < n; i++)
            if (sites[i].path && *sites[i].path) by_path[m++] = i;
        offline_sites = sites;
        qsort(by_path, m, sizeof *by_path, cmp_site_path);
        for (uint32_t k = 0; k < m; k++)
            first[by_path[k]] = k == 0 || strcmp(sites[by_path[k]].path,
                                                 sites[by_path[k - 1]].path) != 0;
    }
    if (dwfl) {
        dwfl_report_begin(dwfl);
        for (uint32_t i = 0; i < n; i++) {
            struct stat st;
            /* a log's paths are not to be trusted: only regular files are read (a FIFO
             * would wait for a writer forever) */
            if ((dedup ? first[i] : sites[i].path && *sites[i].path) &&
                stat(sites[i].path, &st) == 0 && S_ISREG(st.st_mode))
                dwfl_report_elf(dwfl, sites[i].path, sites[i].path, -1, (GElf_Addr)sites[i].bias,
                                false);
        }
        if (dwfl_report_end(dwfl, NULL, NULL) != 0) {
            dwfl_end(dwfl);
            dwfl = NULL;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        out[i] = (mps_location){0};
        if (!sites[i].addr) { out[i].file = strdup("?"); continue; } /* never logged */
        Dwarf_Addr a = (Dwarf_Addr)sites[i].addr - 1; /* the call, not the return address */
        out[i].offset = a - sites[i].fbase;
        out[i].object = sites[i].path && *sites[i].path ? strdup(sites[i].path) : NULL;
        if (!name_from_module(dwfl, a, &out[i]))
            out[i].file = object_offset(sites[i].path, out[i].offset);
        module_build_id(dwfl ? dwfl_addrmodule(dwfl, a) : NULL, out[i].build_id);
    }
    if (dwfl) dwfl_end(dwfl);
    free(by_path);
    free(first);
}

/* The same for one object in a file, from its recorded offset (mpiscope-symbolize): the
 * object is reported at bias 0, where its first loaded byte (dladdr's base) is the
 * module's low address. 1 where it gave a name into *out (file:line or
 * function+0xOFFSET), 0 where the object has none, -1 where it is not the object of
 * build_id any more. */
int mps_callsite_resolve_file(const char *path, const char *build_id, uint64_t offset,
                              mps_location *out)
{
    Dwfl_Callbacks cb = {
        .find_elf = dwfl_build_id_find_elf,
        .find_debuginfo = dwfl_standard_find_debuginfo,
        .section_address = dwfl_offline_section_address,
        .debuginfo_path = debuginfo_path(),
    };
    Dwfl *dwfl = dwfl_begin(&cb);
    if (!dwfl) return 0;
    dwfl_report_begin(dwfl);
    Dwfl_Module *mod = dwfl_report_elf(dwfl, path, path, -1, 0, false);
    if (!mod || dwfl_report_end(dwfl, NULL, NULL) != 0) {
        dwfl_end(dwfl);
        return 0;
    }
    Dwarf_Addr low = 0;
    char now[65];
    dwfl_module_info(mod, NULL, &low, NULL, NULL, NULL, NULL, NULL);
    module_build_id(mod, now);
    /* rebuilt since the run: its offsets would name other code */
    int ok = *build_id && strcmp(now, build_id) != 0 ? -1
                                                     : name_from_module(dwfl, low + offset, out);
    dwfl_end(dwfl);
    return ok;
}
