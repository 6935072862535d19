/* The BLAS kernel chosen from the CPU's instructions; the contract is in blas_kernel.h. */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include "blas_kernel.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

/* OpenBLAS's calls, declared weak: NULL when the CBLAS linked in lacks them. */
extern char *openblas_get_corename(void) __attribute__((weak));
extern char *openblas_get_config(void) __attribute__((weak));
extern int openblas_get_parallel(void) __attribute__((weak));
extern void gotoblas_dynamic_init(void) __attribute__((weak));
extern void gotoblas_dynamic_quit(void) __attribute__((weak));
extern int blas_thread_shutdown_(void) __attribute__((weak));
extern int blas_thread_init(void) __attribute__((weak));

/* ---- the CPU ----------------------------------------------------------------------- */

#if defined(__x86_64__)
/* XCR0: which register states the OS saves on a context switch. */
static uint64_t xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}
#endif

vtr_isa_level vtr_cpu_isa_level(void)
{
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE))
        return VTR_ISA_BASELINE;
    bool fma_avx = (c & bit_FMA) && (c & bit_AVX);
    uint64_t saved = xcr0();
    bool ymm = (saved & 0x6) == 0x6;   /* SSE and AVX state */
    bool zmm = (saved & 0xe6) == 0xe6; /* and the opmask and ZMM states */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return VTR_ISA_BASELINE;
    if (!(fma_avx && ymm && (b & bit_AVX2)))
        return VTR_ISA_BASELINE;
    const unsigned avx512 = bit_AVX512F | bit_AVX512CD | bit_AVX512BW | bit_AVX512DQ | bit_AVX512VL;
    if (!zmm || (b & avx512) != avx512)
        return VTR_ISA_AVX2;
    /* leaf 7 subleaf 1, EAX bit 5: AVX512-BF16 */
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & 1u << 5))
        return VTR_ISA_AVX512_BF16;
    return VTR_ISA_AVX512;
#else
    return VTR_ISA_BASELINE;
#endif
}

static const char *isa_name(vtr_isa_level level)
{
    switch (level) {
    case VTR_ISA_AVX2: return "AVX2";
    case VTR_ISA_AVX512: return "AVX-512";
    case VTR_ISA_AVX512_BF16: return "AVX-512 with AVX512-BF16";
    default: return "baseline x86-64";
    }
}

/* ---- OpenBLAS's kernels ------------------------------------------------------------ */

/* OpenBLAS's x86-64 kernels that use more than the baseline, best first for each level. */
static const struct {
    const char *name;
    vtr_isa_level needs;
} kernels[] = {
    {"Cooperlake", VTR_ISA_AVX512_BF16},
    {"SapphireRapids", VTR_ISA_AVX512_BF16},
    {"SkylakeX", VTR_ISA_AVX512},
    {"Haswell", VTR_ISA_AVX2},
    {"Zen", VTR_ISA_AVX2},
};
enum { N_KERNELS = sizeof kernels / sizeof kernels[0] };

/* The level that counts for float32 products: the BF16 kernels' sgemm is SkylakeX's. */
static vtr_isa_level sgemm_level(vtr_isa_level level)
{
    return level == VTR_ISA_AVX512_BF16 ? VTR_ISA_AVX512 : level;
}

vtr_isa_level vtr_blas_kernel_level(const char *name)
{
    for (int i = 0; name && i < N_KERNELS; i++)
        if (strcasecmp(name, kernels[i].name) == 0)
            return sgemm_level(kernels[i].needs);
    return VTR_ISA_BASELINE;
}

const char *vtr_blas_kernel_choice(vtr_isa_level cpu, const char *own,
                                   bool (*available)(const char *name))
{
    vtr_isa_level have = vtr_blas_kernel_level(own);
    if (have >= sgemm_level(cpu))
        return NULL;
    for (int i = 0; i < N_KERNELS; i++)
        if (kernels[i].needs <= cpu && vtr_blas_kernel_level(kernels[i].name) > have &&
            available(kernels[i].name))
            return kernels[i].name;
    return NULL;
}

/* Whether the OpenBLAS linked in has the kernel: its table gotoblas_NAME (upper case). */
static bool openblas_has(const char *name)
{
    char symbol[64] = "gotoblas_";
    size_t n = strlen(symbol);
    for (size_t i = 0; name[i] && n + 1 < sizeof symbol; i++)
        symbol[n++] = (char)toupper((unsigned char)name[i]);
    symbol[n] = '\0';
    return dlsym(RTLD_DEFAULT, symbol) != NULL;
}

/* ---- the choice, before main ------------------------------------------------------ */

/* Why the kernel in use is the one: filled in once, before main. */
static char origin[160] = "not OpenBLAS: the kernel is the library's choice";

__attribute__((constructor)) static void choose_kernel(void)
{
    if (!openblas_get_corename) {
        if (!dlsym(RTLD_DEFAULT, "cblas_sgemm"))
            snprintf(origin, sizeof origin, "none loaded (this program makes no BLAS calls)");
        return;
    }
    const char *own = openblas_get_corename();
    const char *set = getenv("OPENBLAS_CORETYPE");
    if (set && *set) {
        snprintf(origin, sizeof origin, "set by OPENBLAS_CORETYPE=%s", set);
        return;
    }
    vtr_isa_level cpu = vtr_cpu_isa_level();
    const char *best = vtr_blas_kernel_choice(cpu, own, openblas_has);
    if (!best) {
        snprintf(origin, sizeof origin, "OpenBLAS's choice; this CPU: %s", isa_name(cpu));
        return;
    }
    if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit || !blas_thread_shutdown_ ||
        !blas_thread_init) {
        snprintf(origin, sizeof origin,
                 "OpenBLAS's choice; this CPU has %s, which this OpenBLAS (not built with "
                 "DYNAMIC_ARCH) cannot be switched to",
                 isa_name(cpu));
        return;
    }
    char own_name[32];
    snprintf(own_name, sizeof own_name, "%s", own);
    /* OpenBLAS's start-up path again, now with the core type set. Its worker threads,
     * started by its own constructor, read the kernel table as they start: they are
     * stopped first (joined) and started again after, as OpenBLAS does around a fork. */
    setenv("OPENBLAS_CORETYPE", best, 1);
    blas_thread_shutdown_();
    gotoblas_dynamic_quit();
    gotoblas_dynamic_init();
    blas_thread_init();
    unsetenv("OPENBLAS_CORETYPE");
    snprintf(origin, sizeof origin, "chosen by vtr for this CPU's %s; OpenBLAS's own choice: %s",
             isa_name(cpu), own_name);
}

const char *vtr_blas_kernel_name(void)
{
    return openblas_get_corename ? openblas_get_corename() : "unknown";
}

const char *vtr_blas_kernel_report(void)
{
    static char line[256];
    if (!openblas_get_corename) {
        snprintf(line, sizeof line, "BLAS: %s", origin);
        return line;
    }
    char version[32] = ""; /* openblas_get_config(): "OpenBLAS 0.3.21 NO_LAPACKE ..." */
    if (openblas_get_config && sscanf(openblas_get_config(), "OpenBLAS %30s", version + 1) == 1)
        version[0] = ' ';
    /* openblas_get_parallel(): 0 serial, 1 pthreads, 2 OpenMP (lib/nn.h, "Threads") */
    static const char *const builds[] = {" (serial build)", " (pthreads build)", " (OpenMP build)"};
    int parallel = openblas_get_parallel ? openblas_get_parallel() : -1;
    const char *build = parallel >= 0 && parallel <= 2 ? builds[parallel] : "";
    snprintf(line, sizeof line, "BLAS: OpenBLAS%s%s, kernel %s (%s)", version, build,
             vtr_blas_kernel_name(), origin);
    return line;
}
