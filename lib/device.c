/* lib/device.h's device names, and the CPU-only build's side of it: without VTR_HAVE_CUDA
 * there is no GPU, and asking for one is an error the program reports (lib/device.cu is
 * the real one). */
#include "device.h"

#include <stdlib.h>
#include <string.h>

vtr_status vtr_device_parse(const char *name, vtr_device *out, int *index, vtr_error *err)
{
    *index = 0;
    if (strcmp(name, "cpu") == 0) {
        *out = VTR_DEVICE_CPU;
        return VTR_OK;
    }
    *out = VTR_DEVICE_CUDA;
    if (strcmp(name, "cuda") == 0)
        return VTR_OK;
    if (strncmp(name, "cuda:", 5) == 0 && name[5] >= '0' && name[5] <= '9') {
        char *end;
        long n = strtol(name + 5, &end, 10);
        if (!*end && n <= 1024) {
            *index = (int)n;
            return VTR_OK;
        }
    }
    char shown[64];
    return vtr_fail(err, VTR_ERR_INVALID, "unknown device '%s' (expected cpu, cuda or cuda:N)",
                    vtr_printable(name, strlen(name), shown, sizeof shown));
}

#ifndef VTR_HAVE_CUDA

static vtr_status no_cuda(vtr_error *err)
{
    return vtr_fail(err, VTR_ERR_DEVICE, VTR_WITHOUT_CUDA);
}

bool vtr_cuda_available(void)
{
    return false;
}

vtr_status vtr_cuda_init(int device, char *name, size_t name_size, vtr_error *err)
{
    return no_cuda(err);
}

vtr_status vtr_cuda_malloc(void **ptr, size_t bytes, vtr_error *err)
{
    *ptr = NULL;
    return no_cuda(err);
}

void vtr_cuda_free(void *ptr)
{
}

vtr_status vtr_cuda_to_device(void *dst, const void *src, size_t bytes, vtr_error *err)
{
    return no_cuda(err);
}

vtr_status vtr_cuda_to_host(void *dst, const void *src, size_t bytes, vtr_error *err)
{
    return no_cuda(err);
}

vtr_status vtr_cuda_set_tf32(bool on, vtr_error *err)
{
    return no_cuda(err);
}

vtr_status vtr_cuda_zero(void *ptr, size_t bytes, vtr_error *err)
{
    return no_cuda(err);
}

vtr_status vtr_cuda_copy(void *dst, const void *src, size_t bytes, vtr_error *err)
{
    return no_cuda(err);
}

vtr_status vtr_cuda_add(float *y, const float *x, size_t n, vtr_error *err)
{
    return no_cuda(err);
}

vtr_status vtr_cuda_uniform(float *out, size_t n, uint64_t seed, uint64_t stream,
                            vtr_error *err)
{
    return no_cuda(err);
}

vtr_status vtr_cuda_matmul(const float *a, const float *b, float *c, int m, int n, int k,
                           vtr_error *err)
{
    return no_cuda(err);
}

#endif
