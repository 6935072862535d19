// tests/gpu/emulate/include/cudnn.h: the cuDNN calls of vtr's .cu files (lib/device.cu's
// handle, features/conv.cu's convolution engine, lib/gru_cudnn.cu's GRU), as the CPU emulation
// gives them (cudnn.cc, cudnn_rnn.cc). 4-D tensors, NCHW or NHWC, packed or strided, data
// float32 or bfloat16; a GRU of one layer in float32.
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
typedef enum { CUDNN_DATA_FLOAT = 0, CUDNN_DATA_BFLOAT16 = 9 } cudnnDataType_t;
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
} cudnnActivationMode_t;
typedef enum {
    CUDNN_POOLING_MAX = 0,
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

// ---- RNNs (cudnn_rnn.cc): lib/gru_cudnn.cu's GRU

typedef struct emu_cudnn_dropout *cudnnDropoutDescriptor_t;
typedef struct emu_cudnn_rnn *cudnnRNNDescriptor_t;
typedef struct emu_cudnn_rnn_data *cudnnRNNDataDescriptor_t;
typedef enum { CUDNN_RNN_ALGO_STANDARD = 0 } cudnnRNNAlgo_t;
typedef enum { CUDNN_GRU = 3 } cudnnRNNMode_t;
typedef enum { CUDNN_RNN_DOUBLE_BIAS = 2 } cudnnRNNBiasMode_t;
typedef enum { CUDNN_UNIDIRECTIONAL = 0, CUDNN_BIDIRECTIONAL = 1 } cudnnDirectionMode_t;
typedef enum { CUDNN_LINEAR_INPUT = 0 } cudnnRNNInputMode_t;
typedef enum { CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED = 2 } cudnnRNNDataLayout_t;
typedef enum { CUDNN_FWD_MODE_INFERENCE = 0, CUDNN_FWD_MODE_TRAINING = 1 } cudnnForwardMode_t;
typedef enum { CUDNN_WGRAD_MODE_ADD = 0, CUDNN_WGRAD_MODE_SET = 1 } cudnnWgradMode_t;
#define CUDNN_RNN_PADDED_IO_ENABLED (1U << 0)

// (cudnn.cc) 3-D or 4-D, packed strides only
cudnnStatus_t cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t desc, cudnnDataType_t type,
                                         int nb_dims, const int dims[], const int strides[]);

cudnnStatus_t cudnnCreateDropoutDescriptor(cudnnDropoutDescriptor_t *desc);
cudnnStatus_t cudnnDestroyDropoutDescriptor(cudnnDropoutDescriptor_t desc);
cudnnStatus_t cudnnDropoutGetStatesSize(cudnnHandle_t handle, size_t *bytes);
cudnnStatus_t cudnnSetDropoutDescriptor(cudnnDropoutDescriptor_t desc, cudnnHandle_t handle,
                                        float dropout, void *states, size_t state_bytes,
                                        unsigned long long seed);
cudnnStatus_t cudnnCreateRNNDescriptor(cudnnRNNDescriptor_t *desc);
cudnnStatus_t cudnnDestroyRNNDescriptor(cudnnRNNDescriptor_t desc);
cudnnStatus_t cudnnSetRNNDescriptor_v8(cudnnRNNDescriptor_t desc, cudnnRNNAlgo_t algo,
                                       cudnnRNNMode_t cell, cudnnRNNBiasMode_t bias,
                                       cudnnDirectionMode_t dir, cudnnRNNInputMode_t input,
                                       cudnnDataType_t type, cudnnDataType_t math_prec,
                                       cudnnMathType_t math, int input_size, int hidden_size,
                                       int proj_size, int layers, cudnnDropoutDescriptor_t dropout,
                                       unsigned aux_flags);
cudnnStatus_t cudnnCreateRNNDataDescriptor(cudnnRNNDataDescriptor_t *desc);
cudnnStatus_t cudnnDestroyRNNDataDescriptor(cudnnRNNDataDescriptor_t desc);
cudnnStatus_t cudnnSetRNNDataDescriptor(cudnnRNNDataDescriptor_t desc, cudnnDataType_t type,
                                        cudnnRNNDataLayout_t layout, int max_length, int batch,
                                        int vector_size, const int lengths[], void *padding_fill);
cudnnStatus_t cudnnGetRNNWeightSpaceSize(cudnnHandle_t handle, cudnnRNNDescriptor_t rnn,
                                         size_t *bytes);
cudnnStatus_t cudnnGetRNNWeightParams(cudnnHandle_t handle, cudnnRNNDescriptor_t rnn,
                                      int pseudo_layer, size_t weight_bytes, const void *weights,
                                      int lin_layer, cudnnTensorDescriptor_t m_desc, void **m,
                                      cudnnTensorDescriptor_t b_desc, void **b);
cudnnStatus_t cudnnGetRNNTempSpaceSizes(cudnnHandle_t handle, cudnnRNNDescriptor_t rnn,
                                        cudnnForwardMode_t mode, cudnnRNNDataDescriptor_t x_desc,
                                        size_t *work_bytes, size_t *reserve_bytes);
cudnnStatus_t cudnnRNNForward(cudnnHandle_t handle, cudnnRNNDescriptor_t rnn,
                              cudnnForwardMode_t mode, const int dev_lengths[],
                              cudnnRNNDataDescriptor_t x_desc, const void *x,
                              cudnnRNNDataDescriptor_t y_desc, void *y,
                              cudnnTensorDescriptor_t h_desc, const void *hx, void *hy,
                              cudnnTensorDescriptor_t c_desc, const void *cx, void *cy,
                              size_t weight_bytes, const void *weights, size_t work_bytes,
                              void *work, size_t reserve_bytes, void *reserve);
cudnnStatus_t cudnnRNNBackwardData_v8(
    cudnnHandle_t handle, cudnnRNNDescriptor_t rnn, const int dev_lengths[],
    cudnnRNNDataDescriptor_t y_desc, const void *y, const void *dy, cudnnRNNDataDescriptor_t x_desc,
    void *dx, cudnnTensorDescriptor_t h_desc, const void *hx, const void *dhy, void *dhx,
    cudnnTensorDescriptor_t c_desc, const void *cx, const void *dcy, void *dcx, size_t weight_bytes,
    const void *weights, size_t work_bytes, void *work, size_t reserve_bytes, void *reserve);
cudnnStatus_t cudnnRNNBackwardWeights_v8(cudnnHandle_t handle, cudnnRNNDescriptor_t rnn,
                                         cudnnWgradMode_t mode, const int dev_lengths[],
                                         cudnnRNNDataDescriptor_t x_desc, const void *x,
                                         cudnnTensorDescriptor_t h_desc, const void *hx,
                                         cudnnRNNDataDescriptor_t y_desc, const void *y,
                                         size_t weight_bytes, void *dweights, size_t work_bytes,
                                         void *work, size_t reserve_bytes, void *reserve);
