/* lib/cuda_loader.h: loads libvtr-cuda.so once per process and looks up its functions. */
#include "cuda_loader.h"

#include <string.h>

#include "device.h"

#ifdef VTR_HAVE_CUDA
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static struct {
    pthread_once_t once;
    _Atomic(void *) handle; /* set once, by load */
    const char *path;
    char reason[VTR_ERROR_MSG_MAX / 2];
} lib = {PTHREAD_ONCE_INIT};

static void load(void)
{
    const char *env = getenv("VTR_CUDA_LIBRARY");
    lib.path = env && *env ? env : "libvtr-cuda.so";
    void *handle = dlopen(lib.path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *why = dlerror();
        snprintf(lib.reason, sizeof lib.reason, "%s", why ? why : "unknown reason");
    }
    atomic_store(&lib.handle, handle);
}

/* The loaded library, or NULL after failing with one line that says what to do. */
static void *library(vtr_error *err)
{
    pthread_once(&lib.once, load);
    void *handle = atomic_load(&lib.handle);
    if (!handle) {
        char shown[256];
        vtr_fail(err, VTR_ERR_DEVICE,
                 "cannot load vtr's CUDA backend (%s): %s: build vtr with CUDA and "
                 "install it again, set VTR_CUDA_LIBRARY to the library's path, or run on "
                 "the CPU (--device cpu)",
                 vtr_shown(lib.path, shown, sizeof shown), lib.reason);
    }
    return handle;
}

static vtr_cuda_fn lookup(void *handle, const char *name, vtr_cuda_slot *slot, vtr_error *err)
{
    void *sym = dlsym(handle, name);
    vtr_cuda_fn fn = NULL;
    if (!sym) {
        char shown[256];
        vtr_fail(err, VTR_ERR_DEVICE,
                 "vtr's CUDA backend %s has no %s: it is another version's; install this "
                 "vtr again",
                 vtr_shown(lib.path, shown, sizeof shown), name);
        return NULL;
    }
    memcpy(&fn, &sym, sizeof fn); /* POSIX: dlsym's functions convert */
    atomic_store_explicit(slot, fn, memory_order_release);
    return fn;
}

vtr_status vtr_cuda_entry(const char *name, vtr_cuda_slot *slot, vtr_cuda_fn *fn, vtr_error *err)
{
    if ((*fn = atomic_load_explicit(slot, memory_order_acquire)))
        return VTR_OK;
    void *handle = library(err);
    if (!handle)
        return err->status;
    return (*fn = lookup(handle, name, slot, err)) ? VTR_OK : err->status;
}

vtr_cuda_fn vtr_cuda_entry_if_loaded(const char *name, vtr_cuda_slot *slot)
{
    vtr_cuda_fn fn = atomic_load_explicit(slot, memory_order_acquire);
    if (fn)
        return fn;
    void *handle = atomic_load(&lib.handle);
    vtr_error err;
    return handle ? lookup(handle, name, slot, &err) : NULL;
}

#else

vtr_status vtr_cuda_entry(const char *name, vtr_cuda_slot *slot, vtr_cuda_fn *fn, vtr_error *err)
{
    *fn = NULL;
    return vtr_fail(err, VTR_ERR_DEVICE, VTR_WITHOUT_CUDA);
}

vtr_cuda_fn vtr_cuda_entry_if_loaded(const char *name, vtr_cuda_slot *slot)
{
    return NULL;
}

#endif
