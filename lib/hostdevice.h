/* VTR_HD marks per-element kernel math that both backends share: the CPU backend calls
 * it from a loop, the CUDA backend from a kernel (DESIGN.md, "single source"). */
#ifndef VTR_HOSTDEVICE_H
#define VTR_HOSTDEVICE_H

#ifdef __CUDACC__
#define VTR_HD __host__ __device__ __forceinline__
#else
#define VTR_HD inline
#endif

/* Before a loop of at most 16 iterations, a count known once inlined: unrolled whole. GCC at
 * -O2 keeps such a loop, and an `omp simd` loop around it then does not vectorize; nvcc
 * unrolls it unasked (and warns of GCC's pragma). */
#ifdef __CUDACC__
#define VTR_UNROLL
#else
#define VTR_UNROLL _Pragma("GCC unroll 16")
#endif

/* Before a host function of elementwise loops: compiled for the x86-64 baseline (SSE2, 4
 * float lanes), AVX2 (8) and AVX-512 (16), the CPU's best picked as the program loads
 * (GCC's target_clones). The clones give the same bytes: an IEEE operation rounds the same
 * in any vector width, and configure's -ffp-contract=off keeps multiplies and adds apart in
 * the clones that have FMA. A function with an `omp parallel` region is not cloned whole
 * (OpenMP moves the region into a function of its own): clone the function its loop calls. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define VTR_CLONES __attribute__((target_clones("default", "avx2", "avx512f")))
#else
#define VTR_CLONES
#endif

#endif
