/* The CUDA engine of features/conv.h: the same folded conv nets on cuDNN
 * (lib/cuda/conv.cu), for features/backbone.c.
 *
 * Each conv runs as cudnnConvolutionBiasActivationForward (y = ReLU(conv(x) + bias
 * [+ y]), the residual added in place) or, for a conv without ReLU, cudnnConvolutionForward
 * followed by the bias; max pools as cudnnPoolingForward (padding never wins). Activations
 * are NCHW float32 on the GPU; the algorithm of each conv is the fastest that
 * cudnnFindConvolutionForwardAlgorithm reports for the batch shape, with the math type
 * CUDNN_FMA_MATH (strict float32, no TF32), so features agree with the CPU engine to
 * float32 rounding.
 *
 * Declared always, implemented only when vtr is built with CUDA (VTR_HAVE_CUDA): callers
 * compile their calls under #ifdef VTR_HAVE_CUDA.
 */
#ifndef VTR_CONV_CUDA_H
#define VTR_CONV_CUDA_H

#include "features/conv.h"
#include "lib/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct vtr_conv_cuda vtr_conv_cuda;

/* An engine for net (borrowed: it must outlive the engine and not change) on the current
 * GPU (vtr_cuda_init first): creates a cuDNN handle and uploads the layers' weights and
 * biases. VTR_ERR_DEVICE with CUDA's or cuDNN's message, VTR_ERR_NOMEM. *out is NULL on
 * failure. */
vtr_status vtr_conv_cuda_new(const vtr_conv_net *net, vtr_conv_cuda **out, vtr_error *err);

void vtr_conv_cuda_free(vtr_conv_cuda *c);

/* Runs the net on a batch held in host memory: in (n, in_channels, h, w) float32 NCHW,
 * out (n, oh, ow, out_channels) float32 NHWC (vtr_conv_net_output_size). Copies the
 * input in, runs every op on the default stream, copies the output back and waits. The
 * first call for an (n, h, w) picks the algorithms and allocates activations and
 * workspace for it (kept for later calls of the same shape). n == 0 does nothing.
 * VTR_ERR_INVALID when the net does not check for this shape, VTR_ERR_DEVICE otherwise.
 * Not thread-safe. */
vtr_status vtr_conv_cuda_run(vtr_conv_cuda *c, const float *in, int n, int h, int w, float *out,
                             vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
