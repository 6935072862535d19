/* The BLAS kernel chosen from the CPU's instructions (lib/blas_kernel.h): the choice for
 * each level, the CPU's level against what the kernel reports in /proc/cpuinfo, and the
 * kernel in use in this process. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lib/blas_kernel.h"

static bool all_kernels(const char *name)
{
    (void)name;
    return true;
}

static bool no_bf16_kernels(const char *name)
{
    return strcmp(name, "Cooperlake") != 0 && strcmp(name, "SapphireRapids") != 0;
}

static bool no_kernels(const char *name)
{
    (void)name;
    return false;
}

/* "" for NULL, to compare choices as strings */
static const char *str(const char *s)
{
    return s ? s : "";
}

TEST(blas_kernel_choice_by_level)
{
    CHECK_EQ_INT(vtr_blas_kernel_level("SkylakeX"), VTR_ISA_AVX512);
    CHECK_EQ_INT(vtr_blas_kernel_level("skylakex"), VTR_ISA_AVX512);
    CHECK_EQ_INT(vtr_blas_kernel_level("Cooperlake"), VTR_ISA_AVX512); /* same sgemm */
    CHECK_EQ_INT(vtr_blas_kernel_level("Haswell"), VTR_ISA_AVX2);
    CHECK_EQ_INT(vtr_blas_kernel_level("Zen"), VTR_ISA_AVX2);
    CHECK_EQ_INT(vtr_blas_kernel_level("Prescott"), VTR_ISA_BASELINE);
    CHECK_EQ_INT(vtr_blas_kernel_level("Sandybridge"), VTR_ISA_BASELINE);
    CHECK_EQ_INT(vtr_blas_kernel_level(NULL), VTR_ISA_BASELINE);

    /* a generic choice on a better CPU is replaced by the CPU's best */
    CHECK_STR(str(vtr_blas_kernel_choice(VTR_ISA_AVX512_BF16, "Prescott", all_kernels)),
              "Cooperlake");
    CHECK_STR(str(vtr_blas_kernel_choice(VTR_ISA_AVX512_BF16, "Prescott", no_bf16_kernels)),
              "SkylakeX");
    CHECK_STR(str(vtr_blas_kernel_choice(VTR_ISA_AVX512, "Prescott", all_kernels)), "SkylakeX");
    CHECK_STR(str(vtr_blas_kernel_choice(VTR_ISA_AVX512, "Haswell", all_kernels)), "SkylakeX");
    CHECK_STR(str(vtr_blas_kernel_choice(VTR_ISA_AVX512, "Zen", all_kernels)), "SkylakeX");
    CHECK_STR(str(vtr_blas_kernel_choice(VTR_ISA_AVX2, "Sandybridge", all_kernels)), "Haswell");
    /* OpenBLAS's own choice kept: it uses the CPU's level, or nothing better is there */
    CHECK(vtr_blas_kernel_choice(VTR_ISA_AVX512_BF16, "SkylakeX", all_kernels) == NULL);
    CHECK(vtr_blas_kernel_choice(VTR_ISA_AVX512, "Cooperlake", all_kernels) == NULL);
    CHECK(vtr_blas_kernel_choice(VTR_ISA_AVX2, "Zen", all_kernels) == NULL);
    CHECK(vtr_blas_kernel_choice(VTR_ISA_AVX2, "Haswell", all_kernels) == NULL);
    CHECK(vtr_blas_kernel_choice(VTR_ISA_BASELINE, "Prescott", all_kernels) == NULL);
    CHECK(vtr_blas_kernel_choice(VTR_ISA_AVX512, "Prescott", no_kernels) == NULL);
}

/* Whether /proc/cpuinfo's first "flags" line names every flag of the list. */
static bool cpuinfo_has(char *flags_line, const char *const *wanted)
{
    for (; *wanted; wanted++) {
        char word[64];
        snprintf(word, sizeof word, " %s ", *wanted);
        if (!strstr(flags_line, word))
            return false;
    }
    return true;
}

/* The level cpuid gives agrees with the flags Linux reports (which it clears for state the
 * OS does not save). */
TEST(blas_kernel_cpu_level_matches_cpuinfo)
{
#if defined(__x86_64__)
    FILE *fp = fopen("/proc/cpuinfo", "r");
    if (!fp)
        test_skip("no /proc/cpuinfo");
    char line[8192], flags[8200] = "";
    while (fgets(line, sizeof line, fp))
        if (strncmp(line, "flags", 5) == 0) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(flags, sizeof flags, "%s ", strchr(line, ':') ? strchr(line, ':') : line);
            break;
        }
    fclose(fp);
    CHECK(flags[0] != '\0');
    static const char *const avx2[] = {"avx2", "fma", NULL};
    static const char *const avx512[] = {"avx512f",  "avx512cd", "avx512bw",
                                         "avx512dq", "avx512vl", NULL};
    static const char *const bf16[] = {"avx512_bf16", NULL};
    vtr_isa_level want = VTR_ISA_BASELINE;
    if (cpuinfo_has(flags, avx2))
        want = VTR_ISA_AVX2;
    if (want == VTR_ISA_AVX2 && cpuinfo_has(flags, avx512))
        want = VTR_ISA_AVX512;
    if (want == VTR_ISA_AVX512 && cpuinfo_has(flags, bf16))
        want = VTR_ISA_AVX512_BF16;
    CHECK_EQ_INT(vtr_cpu_isa_level(), want);
#else
    test_skip("not x86-64");
#endif
}

/* This process's kernel: on an AVX-512 CPU an AVX-512 one, unless OPENBLAS_CORETYPE (the
 * user's choice, kept) is set; the report says which. */
TEST(blas_kernel_in_use)
{
    const char *report = vtr_blas_kernel_report();
    CHECK(strncmp(report, "BLAS: ", 6) == 0);
    if (strcmp(vtr_blas_kernel_name(), "unknown") == 0)
        test_skip("the BLAS linked in is not OpenBLAS");
    CHECK(strstr(report, vtr_blas_kernel_name()) != NULL);
    const char *set = getenv("OPENBLAS_CORETYPE");
    if (set && *set) {
        CHECK(strstr(report, "set by OPENBLAS_CORETYPE") != NULL);
        return;
    }
    vtr_isa_level cpu = vtr_cpu_isa_level();
    vtr_isa_level want = cpu == VTR_ISA_AVX512_BF16 ? VTR_ISA_AVX512 : cpu;
    CHECK_EQ_INT(vtr_blas_kernel_level(vtr_blas_kernel_name()), want);
}
