/* The BLAS kernel, chosen from the CPU's instructions rather than its name.
 *
 * OpenBLAS (Debian's build has every kernel, DYNAMIC_ARCH) picks its kernel from the CPU's
 * family and model numbers. A CPU it does not know, which is what many cloud VMs show it
 * ("Intel(R) Xeon(R) Processor"), gets a generic kernel: Prescott (SSE3), 5x slower on
 * sgemm than the AVX-512 kernel the same CPU runs (bench/RESULTS.md). So, before a
 * program's first BLAS call (a constructor of this file, linked into every program through
 * the --version line), vtr reads the CPU's instructions (cpuid, and the registers the OS
 * saves, xgetbv) and, when OpenBLAS's own choice uses fewer of them, switches OpenBLAS to
 * the best kernel it has for them:
 *
 *   AVX-512 F/CD/BW/DQ/VL with AVX512-BF16    Cooperlake (else SkylakeX)
 *   AVX-512 F/CD/BW/DQ/VL                     SkylakeX
 *   AVX2 and FMA                              Haswell
 *
 * A set OPENBLAS_CORETYPE is the user's choice and is kept. The switch goes through
 * OpenBLAS's own start-up path, with the calls libopenblas exports for it: its worker
 * threads stopped (they read the kernel table as they start), OPENBLAS_CORETYPE set,
 * gotoblas_dynamic_quit and _init, the threads started again (what OpenBLAS does around a
 * fork); the same as setting the variable before the program starts. With another CBLAS,
 * or an OpenBLAS built for one CPU, nothing changes and the report says so.
 */
#ifndef VTR_BLAS_KERNEL_H
#define VTR_BLAS_KERNEL_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The instruction levels that decide the kernel, in increasing order. */
typedef enum vtr_isa_level {
    VTR_ISA_BASELINE,    /* x86-64 without AVX2 + FMA, or not x86-64 */
    VTR_ISA_AVX2,        /* AVX2 and FMA, their registers saved by the OS */
    VTR_ISA_AVX512,      /* AVX-512 F, CD, BW, DQ and VL, the ZMM state saved by the OS */
    VTR_ISA_AVX512_BF16, /* and AVX512-BF16 */
} vtr_isa_level;

/* This CPU's level (cpuid and xgetbv). */
vtr_isa_level vtr_cpu_isa_level(void);

/* The level an OpenBLAS kernel name needs ("SkylakeX" -> VTR_ISA_AVX512; names are
 * compared ignoring case); VTR_ISA_BASELINE for the others ("Prescott", "Sandybridge"). */
vtr_isa_level vtr_blas_kernel_level(const char *name);

/* The kernel to switch to for a CPU of level cpu when OpenBLAS chose own, among the
 * kernels for which available(name) is true; NULL to keep own (it already uses the CPU's
 * level, or no better kernel is available). */
const char *vtr_blas_kernel_choice(vtr_isa_level cpu, const char *own,
                                   bool (*available)(const char *name));

/* The kernel in use: OpenBLAS's name ("SkylakeX"), or "unknown" with another BLAS or none
 * (a program that makes no BLAS calls does not load one). */
const char *vtr_blas_kernel_name(void);

/* One line for --version and reports, e.g. "BLAS: OpenBLAS 0.3.21 (OpenMP build), kernel
 * SkylakeX (chosen by vtr for this CPU's AVX-512; OpenBLAS's own choice: Prescott)", in a
 * static buffer that the next call rewrites (not thread-safe). */
const char *vtr_blas_kernel_report(void);

#ifdef __cplusplus
}
#endif

#endif
