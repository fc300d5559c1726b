/* Call-site resolution, once per distinct return address at MPI_Finalize:
 * file:line from DWARF (libdw handles PIE and shared-library load biases),
 * object+offset where there is no debug information. */
#define _GNU_SOURCE
#include "mpiscope.h"

#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* file:line of the instruction at a (DWARF through libdw) into *out; 0 where unknown */
static int source_line(Dwfl *dwfl, Dwarf_Addr a, mps_location *out)
{
    Dwfl_Module *mod = dwfl ? dwfl_addrmodule(dwfl, a) : NULL;
    Dwfl_Line *line = mod ? dwfl_module_getsrc(mod, a) : NULL;
    int lineno = 0;
    const char *src = line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
    if (!src || lineno <= 0) return 0;
    out->file = strdup(src);
    out->line = (uint32_t)lineno;
    return 1;
}

static char *object_offset(void *addr)
{
    Dl_info info;
    char buf[512];
    if (dladdr(addr, &info) && info.dli_fname) {
        const char *base = strrchr(info.dli_fname, '/');
        base = base ? base + 1 : info.dli_fname;
        snprintf(buf, sizeof buf, "%s+0x%lx", *base ? base : "?",
                 (unsigned long)((char *)addr - (char *)info.dli_fbase));
    } else {
        snprintf(buf, sizeof buf, "?+0x%lx", (unsigned long)(uintptr_t)addr);
    }
    return strdup(buf);
}

void mps_callsite_resolve(void *const *addrs, uint32_t n, mps_location *out)
{
    static char *debuginfo_path = NULL;
    Dwfl_Callbacks cb = {
        .find_elf = dwfl_linux_proc_find_elf,
        .find_debuginfo = dwfl_standard_find_debuginfo,
        .debuginfo_path = &debuginfo_path,
    };
    Dwfl *dwfl = n ? dwfl_begin(&cb) : NULL;
    if (dwfl && (dwfl_linux_proc_report(dwfl, getpid()) != 0 ||
                 dwfl_report_end(dwfl, NULL, NULL) != 0)) {
        dwfl_end(dwfl);
        dwfl = NULL;
    }
    for (uint32_t i = 0; i < n; i++) {
        out[i].file = NULL;
        out[i].line = 0;
        /* the return address follows the call: look up the call instruction itself */
        if (!source_line(dwfl, (Dwarf_Addr)(uintptr_t)addrs[i] - 1, &out[i])) {
            out[i].file = object_offset((char *)addrs[i] - 1); /* the call, as for file:line */
        }
    }
    if (dwfl) dwfl_end(dwfl);
}

/* The same after the process is gone (mpiscope-recover): each object is reported to libdw
 * at the load bias it had in the process, so the recorded return addresses resolve as
 * they would have in it. Objects that are gone or changed give object+offset. */
void mps_callsite_resolve_offline(const mps_offline_site *sites, uint32_t n, mps_location *out)
{
    static char *debuginfo_path = NULL;
    Dwfl_Callbacks cb = {
        .find_elf = dwfl_build_id_find_elf,
        .find_debuginfo = dwfl_standard_find_debuginfo,
        .section_address = dwfl_offline_section_address,
        .debuginfo_path = &debuginfo_path,
    };
    Dwfl *dwfl = n ? dwfl_begin(&cb) : NULL;
    if (dwfl) {
        dwfl_report_begin(dwfl);
        for (uint32_t i = 0; i < n; i++) {
            int seen = 0;
            for (uint32_t j = 0; j < i && !seen; j++)
                seen = sites[j].path && sites[i].path && strcmp(sites[j].path, sites[i].path) == 0;
            if (!seen && sites[i].path && *sites[i].path)
                dwfl_report_elf(dwfl, sites[i].path, sites[i].path, -1, (GElf_Addr)sites[i].bias,
                                false);
        }
        if (dwfl_report_end(dwfl, NULL, NULL) != 0) {
            dwfl_end(dwfl);
            dwfl = NULL;
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        out[i].file = NULL;
        out[i].line = 0;
        if (!sites[i].addr) { out[i].file = strdup("?"); continue; } /* never logged */
        Dwarf_Addr a = (Dwarf_Addr)sites[i].addr - 1; /* the call, not the return address */
        if (!source_line(dwfl, a, &out[i])) {
            /* as object_offset() names it in the live process */
            char buf[512];
            const char *p = sites[i].path ? sites[i].path : "";
            const char *base = strrchr(p, '/');
            base = base ? base + 1 : p;
            snprintf(buf, sizeof buf, "%s+0x%lx", *base ? base : "?",
                     (unsigned long)(a - sites[i].fbase));
            out[i].file = strdup(buf);
        }
    }
    if (dwfl) dwfl_end(dwfl);
}
