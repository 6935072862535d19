/* The BLAS library's own thread count, for code that runs several products at once on
 * separate threads (each product then single-threaded), e.g. the two directions of a
 * BiGRU. CBLAS has no such call; OpenBLAS (the BLAS vtr is built against) has
 * openblas_set_num_threads, found here at run time, so any other CBLAS still links and
 * merely reports that the count cannot be changed.
 *
 * The count is process-wide: change it only around a region in which this thread is the
 * only one calling BLAS, and restore it after. Not thread-safe.
 */
#ifndef VTR_BLAS_THREADS_H
#define VTR_BLAS_THREADS_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Whether the BLAS thread count can be read and changed (OpenBLAS). */
bool vtr_blas_threads_adjustable(void);

/* Sets the BLAS thread count to n (>= 1) and returns the previous count; does nothing and
 * returns 0 when the count is not adjustable. */
int vtr_blas_set_threads(int n);

/* Whether BLAS runs its products on the caller's OpenMP threads (OpenBLAS's OpenMP build,
 * which configure prefers: lib/nn.h, "Threads"). Its thread count is then OpenMP's
 * (omp_set_num_threads sets both), a product called inside a parallel region runs on its
 * caller's thread alone, and a product's rounding may change with the thread count (the
 * rows each thread takes). With the pthreads build the BLAS count stays what
 * vtr_blas_set_threads (or OPENBLAS_NUM_THREADS) made it, whatever OpenMP's is. */
bool vtr_blas_threads_follow_openmp(void);

#ifdef __cplusplus
}
#endif

#endif
