// The CUDA side of lib/device.h: device setup, memory, and two kernels' worth of glue.
// Errors are translated to text once here (cudaGetErrorString, cuBLAS/cuDNN status).
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <stdio.h>

#include "lib/cuda_launch.h"
#include "lib/device.h"
#include "lib/rng.h"

static cublasHandle_t cublas_handle;
static cudnnHandle_t cudnn_handle;

cublasHandle_t vtr_cuda_cublas(void)
{
    return cublas_handle;
}

vtr_status vtr_cuda_fail(vtr_error *err, cudaError_t rc, const char *what)
{
    return vtr_fail(err, VTR_ERR_DEVICE, "CUDA %s: %s", what, cudaGetErrorString(rc));
}

extern "C" int vtr_cuda_device_count(void)
{
    int count = 0;
    return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

extern "C" vtr_status vtr_cuda_check(int device, vtr_error *err)
{
    int count = 0;
    cudaError_t rc = cudaGetDeviceCount(&count);
    if (rc != cudaSuccess || count == 0)
        return vtr_fail(err, VTR_ERR_DEVICE,
                        "no CUDA GPU is visible (%s): see nvidia-smi -L and CUDA_VISIBLE_DEVICES, "
                        "or run on the CPU (--device cpu)",
                        rc != cudaSuccess ? cudaGetErrorString(rc) : "the driver lists none");
    if (device < 0 || device >= count)
        return vtr_fail(err, VTR_ERR_DEVICE,
                        "GPU %d does not exist: %d visible, cuda:0 .. cuda:%d (CUDA_VISIBLE_DEVICES "
                        "renumbers them)", device, count, count - 1);
    return VTR_OK;
}

extern "C" vtr_status vtr_cuda_init(int device, char *name, size_t name_size, vtr_error *err)
{
    vtr_status st = vtr_cuda_check(device, err);
    if (st != VTR_OK)
        return st;
    cudaError_t rc = cudaSetDevice(device);
    if (rc != cudaSuccess)
        return vtr_cuda_fail(err, rc, "set device");
    cudaDeviceProp prop;
    rc = cudaGetDeviceProperties(&prop, device);
    if (rc != cudaSuccess)
        return vtr_cuda_fail(err, rc, "device properties");
    if (name)
        snprintf(name, name_size, "%s, %.1f GiB, cc %d.%d", prop.name,
                 prop.totalGlobalMem / 1073741824.0, prop.major, prop.minor);
    if (!cublas_handle) {
        cublasStatus_t bs = cublasCreate(&cublas_handle);
        if (bs != CUBLAS_STATUS_SUCCESS)
            return vtr_fail(err, VTR_ERR_DEVICE, "cuBLAS init: %s", cublasGetStatusString(bs));
    }
    if (!cudnn_handle) {
        cudnnStatus_t ds = cudnnCreate(&cudnn_handle);
        if (ds != CUDNN_STATUS_SUCCESS)
            return vtr_fail(err, VTR_ERR_DEVICE, "cuDNN init: %s", cudnnGetErrorString(ds));
    }
    return VTR_OK;
}

static cublasComputeType_t compute_type = CUBLAS_COMPUTE_32F;

cublasComputeType_t vtr_cuda_compute_type(void)
{
    return compute_type;
}

extern "C" vtr_status vtr_cuda_set_precision(vtr_precision p, vtr_error *err)
{
    if (!cublas_handle)
        return vtr_fail(err, VTR_ERR_DEVICE, "cuBLAS used before vtr_cuda_init");
    compute_type = p == VTR_PRECISION_TF32   ? CUBLAS_COMPUTE_32F_FAST_TF32
                   : p == VTR_PRECISION_BF16 ? CUBLAS_COMPUTE_32F_FAST_16BF
                                             : CUBLAS_COMPUTE_32F;
    return VTR_OK;
}

vtr_status vtr_cuda_allocated(cudaError_t rc, void **ptr, const char *what, size_t bytes,
                              vtr_error *err)
{
    if (rc == cudaSuccess)
        return VTR_OK;
    cudaGetLastError();
    *ptr = NULL;
    return vtr_fail(err, VTR_ERR_DEVICE, "CUDA %s of %zu bytes: %s", what, bytes,
                    cudaGetErrorString(rc));
}

extern "C" vtr_status vtr_cuda_malloc(void **ptr, size_t bytes, vtr_error *err)
{
    return vtr_cuda_allocated(cudaMalloc(ptr, bytes), ptr, "malloc", bytes, err);
}

extern "C" void vtr_cuda_free(void *ptr)
{
    if (ptr)
        cudaFree(ptr);
}

extern "C" vtr_status vtr_cuda_to_device(void *dst, const void *src, size_t bytes,
                                         vtr_error *err)
{
    cudaError_t rc = cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
    return rc == cudaSuccess ? VTR_OK : vtr_cuda_fail(err, rc, "copy to device");
}

extern "C" vtr_status vtr_cuda_to_host(void *dst, const void *src, size_t bytes, vtr_error *err)
{
    cudaError_t rc = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
    return rc == cudaSuccess ? VTR_OK : vtr_cuda_fail(err, rc, "copy to host");
}

__global__ static void uniform_kernel(float *out, size_t n, uint64_t seed, uint64_t stream)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = vtr_philox_uniform_at(seed, stream, i);
}

extern "C" vtr_status vtr_cuda_uniform(float *out, size_t n, uint64_t seed, uint64_t stream,
                                       vtr_error *err)
{
    if (n == 0)
        return VTR_OK;
    unsigned threads = 256;
    unsigned blocks = (unsigned)((n + threads - 1) / threads);
    uniform_kernel<<<blocks, threads>>>(out, n, seed, stream);
    cudaError_t rc = cudaGetLastError();
    if (rc == cudaSuccess)
        rc = cudaDeviceSynchronize();
    return rc == cudaSuccess ? VTR_OK : vtr_cuda_fail(err, rc, "uniform kernel");
}

extern "C" vtr_status vtr_cuda_matmul(const float *a, const float *b, float *c, int m, int n,
                                      int k, vtr_error *err)
{
    VTR_TRY(vtr_cuda_sgemm(false, false, m, n, k, 1.0f, a, k, b, n, 0.0f, c, n, err));
    cudaError_t rc = cudaDeviceSynchronize();
    return rc == cudaSuccess ? VTR_OK : vtr_cuda_fail(err, rc, "sgemm");
}
