/* VTR_HD marks per-element kernel math that both backends share: the CPU backend calls
 * it from a loop, the CUDA backend from a kernel (DESIGN.md, "single source"). */
#ifndef VTR_HOSTDEVICE_H
#define VTR_HOSTDEVICE_H

#ifdef __CUDACC__
#define VTR_HD __host__ __device__ __forceinline__
#else
#define VTR_HD inline
#endif

#endif
