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

#endif
