/* BLAS thread count; the contract is in blas_threads.h. */
#include "blas_threads.h"

#include <stddef.h>

/* OpenBLAS's calls, declared weak: NULL when the CBLAS linked in lacks them. */
extern void openblas_set_num_threads(int num_threads) __attribute__((weak));
extern int openblas_get_num_threads(void) __attribute__((weak));
extern int openblas_get_parallel(void) __attribute__((weak));

bool vtr_blas_threads_adjustable(void)
{
    return openblas_set_num_threads != NULL && openblas_get_num_threads != NULL;
}

int vtr_blas_set_threads(int n)
{
    if (!vtr_blas_threads_adjustable() || n < 1)
        return 0;
    int previous = openblas_get_num_threads();
    if (previous != n)
        openblas_set_num_threads(n);
    return previous;
}

bool vtr_blas_threads_follow_openmp(void)
{
    return openblas_get_parallel != NULL && openblas_get_parallel() == 2; /* 2: OpenMP */
}
