/* The CUDA backend, loaded on first use.
 *
 * The .cu files, and the CUDA runtime, cuBLAS, cuBLASLt and cuDNN they call, form their
 * own shared library, libvtr-cuda.so, which no program links: loading those libraries
 * takes about 0.4 s and 200 MB at start, which a run on the CPU (or a pipeline calling
 * vtr-search once per item) must not pay. Each stage's cuda_entries.c defines the CUDA
 * functions its headers declare (vtr_cuda_init, vtr_cuda_gpo_forward, ...) under their
 * own names, as entries that load the library on the first call and forward to its copy.
 * Callers see plain functions, in every build.
 *
 * The library is $VTR_CUDA_LIBRARY where that is set, else libvtr-cuda.so on the program's
 * run path: build/ in the build tree, PREFIX/lib/vtr once installed. A failed load is one
 * line naming the library and the loader's reason, returned by every entry from then on;
 * in a build without CUDA every entry fails with VTR_WITHOUT_CUDA and nothing is loaded.
 */
#ifndef VTR_CUDA_LOADER_H
#define VTR_CUDA_LOADER_H

#include <stdatomic.h>

#include "lib/error.h"

/* Any function, as stored (cast back to its own type before calling). */
typedef void (*vtr_cuda_fn)(void);
/* One entry's resolved function, NULL until its first call. */
typedef _Atomic(vtr_cuda_fn) vtr_cuda_slot;

/* The library's function `name`, cached in *slot: loads the library on the first call of
 * any entry. Fails with VTR_ERR_DEVICE (the library cannot be loaded or lacks the name)
 * or VTR_WITHOUT_CUDA's VTR_ERR_DEVICE. */
vtr_status vtr_cuda_entry(const char *name, vtr_cuda_slot *slot, vtr_cuda_fn *fn, vtr_error *err);

/* Like vtr_cuda_entry, without loading: NULL while the library is not loaded (for the
 * entries that free, since what they free came from a loaded library). */
vtr_cuda_fn vtr_cuda_entry_if_loaded(const char *name, vtr_cuda_slot *slot);

/* Defines `vtr_status name params`, whose last parameter is `vtr_error *err`, calling the
 * library's function with args (the parameters' names, in order). */
#define VTR_CUDA_ENTRY(name, params, args)                                                         \
    vtr_status name params                                                                         \
    {                                                                                              \
        static vtr_cuda_slot slot;                                                                 \
        vtr_cuda_fn fn;                                                                            \
        VTR_TRY(vtr_cuda_entry(#name, &slot, &fn, err));                                           \
        return ((vtr_status(*) params)fn)args;                                                     \
    }

/* Defines `void name(type *p)`, which frees p: nothing to do while the library is not
 * loaded (p is then NULL). */
#define VTR_CUDA_FREE_ENTRY(name, type)                                                            \
    void name(type *p)                                                                             \
    {                                                                                              \
        static vtr_cuda_slot slot;                                                                 \
        vtr_cuda_fn fn = vtr_cuda_entry_if_loaded(#name, &slot);                                   \
        if (fn)                                                                                    \
            ((void (*)(type *))fn)(p);                                                             \
    }

#endif
