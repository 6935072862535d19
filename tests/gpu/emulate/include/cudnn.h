// tests/gpu/emulate/include/cudnn.h: the cuDNN calls of vtr's .cu files (lib/device.cu's
// handle, features/conv.cu's convolution engine), as the CPU emulation gives them (cudnn.cc).
// 4-D tensors only, NCHW or NHWC, packed or strided; data float32, float16 or bfloat16.
#pragma once

#include "cuda_runtime.h"

typedef struct emu_cudnn *cudnnHandle_t;
typedef struct emu_cudnn_tensor *cudnnTensorDescriptor_t;
typedef struct emu_cudnn_filter *cudnnFilterDescriptor_t;
typedef struct emu_cudnn_convolution *cudnnConvolutionDescriptor_t;
typedef struct emu_cudnn_activation *cudnnActivationDescriptor_t;
typedef struct emu_cudnn_pooling *cudnnPoolingDescriptor_t;

typedef enum {
    CUDNN_STATUS_SUCCESS = 0,
    CUDNN_STATUS_NOT_INITIALIZED = 1,
    CUDNN_STATUS_BAD_PARAM = 3,
    CUDNN_STATUS_EXECUTION_FAILED = 8,
    CUDNN_STATUS_NOT_SUPPORTED = 9,
} cudnnStatus_t;
typedef enum { CUDNN_DATA_FLOAT = 0, CUDNN_DATA_HALF = 2, CUDNN_DATA_BFLOAT16 = 9 } cudnnDataType_t;
typedef enum { CUDNN_TENSOR_NCHW = 0, CUDNN_TENSOR_NHWC = 1 } cudnnTensorFormat_t;
typedef enum { CUDNN_CONVOLUTION = 0, CUDNN_CROSS_CORRELATION = 1 } cudnnConvolutionMode_t;
typedef enum {
    CUDNN_DEFAULT_MATH = 0,
    CUDNN_TENSOR_OP_MATH = 1,
    CUDNN_FMA_MATH = 3,
} cudnnMathType_t;
typedef enum {
    CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM = 0,
    CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM = 1,
    CUDNN_CONVOLUTION_FWD_ALGO_GEMM = 2,
    CUDNN_CONVOLUTION_FWD_ALGO_COUNT = 8,
} cudnnConvolutionFwdAlgo_t;
typedef enum { CUDNN_NON_DETERMINISTIC = 0, CUDNN_DETERMINISTIC = 1 } cudnnDeterminism_t;
typedef enum { CUDNN_NOT_PROPAGATE_NAN = 0, CUDNN_PROPAGATE_NAN = 1 } cudnnNanPropagation_t;
typedef enum {
    CUDNN_ACTIVATION_RELU = 1,
    CUDNN_ACTIVATION_CLIPPED_RELU = 3,
    CUDNN_ACTIVATION_IDENTITY = 5,
} cudnnActivationMode_t;
typedef enum {
    CUDNN_POOLING_MAX = 0,
    CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING = 1,
    CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING = 2,
} cudnnPoolingMode_t;
typedef struct {
    cudnnConvolutionFwdAlgo_t algo;
    cudnnStatus_t status;
    float time;
    size_t memory;
    cudnnDeterminism_t determinism;
    cudnnMathType_t mathType;
    int reserved[3];
} cudnnConvolutionFwdAlgoPerf_t;

cudnnStatus_t cudnnCreate(cudnnHandle_t *handle);
cudnnStatus_t cudnnDestroy(cudnnHandle_t handle);
const char *cudnnGetErrorString(cudnnStatus_t status);

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *desc);
cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t desc);
cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t desc, cudnnTensorFormat_t format,
                                         cudnnDataType_t type, int n, int c, int h, int w);
cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *desc);
cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t desc);
cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t desc, cudnnDataType_t type,
                                         cudnnTensorFormat_t format, int k, int c, int h, int w);
cudnnStatus_t cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *desc);
cudnnStatus_t cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t desc);
cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t desc, int pad_h,
                                              int pad_w, int u, int v, int dilation_h,
                                              int dilation_w, cudnnConvolutionMode_t mode,
                                              cudnnDataType_t compute_type);
cudnnStatus_t cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t desc, int groups);
cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t desc, cudnnMathType_t math);
cudnnStatus_t cudnnCreateActivationDescriptor(cudnnActivationDescriptor_t *desc);
cudnnStatus_t cudnnDestroyActivationDescriptor(cudnnActivationDescriptor_t desc);
cudnnStatus_t cudnnSetActivationDescriptor(cudnnActivationDescriptor_t desc,
                                           cudnnActivationMode_t mode, cudnnNanPropagation_t nan,
                                           double coef);
cudnnStatus_t cudnnCreatePoolingDescriptor(cudnnPoolingDescriptor_t *desc);
cudnnStatus_t cudnnDestroyPoolingDescriptor(cudnnPoolingDescriptor_t desc);
cudnnStatus_t cudnnSetPooling2dDescriptor(cudnnPoolingDescriptor_t desc, cudnnPoolingMode_t mode,
                                          cudnnNanPropagation_t nan, int window_h, int window_w,
                                          int pad_h, int pad_w, int stride_h, int stride_w);

cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(cudnnConvolutionDescriptor_t conv,
                                                    cudnnTensorDescriptor_t x,
                                                    cudnnFilterDescriptor_t w, int *n, int *c,
                                                    int *h, int *wd);
cudnnStatus_t cudnnGetPooling2dForwardOutputDim(cudnnPoolingDescriptor_t pool,
                                                cudnnTensorDescriptor_t x, int *n, int *c, int *h,
                                                int *w);
cudnnStatus_t
cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t handle, cudnnTensorDescriptor_t x,
                                       cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,
                                       cudnnTensorDescriptor_t y, int requested, int *returned,
                                       cudnnConvolutionFwdAlgoPerf_t *perf);
cudnnStatus_t cudnnGetConvolutionForwardWorkspaceSize(
    cudnnHandle_t handle, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
    cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y, cudnnConvolutionFwdAlgo_t algo,
    size_t *bytes);

cudnnStatus_t cudnnConvolutionForward(cudnnHandle_t handle, const void *alpha,
                                      cudnnTensorDescriptor_t x_desc, const void *x,
                                      cudnnFilterDescriptor_t w_desc, const void *w,
                                      cudnnConvolutionDescriptor_t conv,
                                      cudnnConvolutionFwdAlgo_t algo, void *workspace,
                                      size_t workspace_bytes, const void *beta,
                                      cudnnTensorDescriptor_t y_desc, void *y);
cudnnStatus_t cudnnConvolutionBiasActivationForward(
    cudnnHandle_t handle, const void *alpha1, cudnnTensorDescriptor_t x_desc, const void *x,
    cudnnFilterDescriptor_t w_desc, const void *w, cudnnConvolutionDescriptor_t conv,
    cudnnConvolutionFwdAlgo_t algo, void *workspace, size_t workspace_bytes, const void *alpha2,
    cudnnTensorDescriptor_t z_desc, const void *z, cudnnTensorDescriptor_t bias_desc,
    const void *bias, cudnnActivationDescriptor_t act, cudnnTensorDescriptor_t y_desc, void *y);
cudnnStatus_t cudnnAddTensor(cudnnHandle_t handle, const void *alpha,
                             cudnnTensorDescriptor_t a_desc, const void *a, const void *beta,
                             cudnnTensorDescriptor_t c_desc, void *c);
cudnnStatus_t cudnnActivationForward(cudnnHandle_t handle, cudnnActivationDescriptor_t act,
                                     const void *alpha, cudnnTensorDescriptor_t x_desc,
                                     const void *x, const void *beta,
                                     cudnnTensorDescriptor_t y_desc, void *y);
cudnnStatus_t cudnnPoolingForward(cudnnHandle_t handle, cudnnPoolingDescriptor_t pool,
                                  const void *alpha, cudnnTensorDescriptor_t x_desc, const void *x,
                                  const void *beta, cudnnTensorDescriptor_t y_desc, void *y);
cudnnStatus_t cudnnTransformTensor(cudnnHandle_t handle, const void *alpha,
                                   cudnnTensorDescriptor_t x_desc, const void *x, const void *beta,
                                   cudnnTensorDescriptor_t y_desc, void *y);
