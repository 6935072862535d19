/* Convolutional feature extractors as a flat program of folded layers, and the CPU engine
 * that runs one (oneDNN). The CUDA engine (cuDNN) is features/conv_cuda.h.
 *
 * A vtr_conv_net is what is left of a CNN at inference once batch norm is folded into the
 * convolutions (vtr_conv_fold_bn): a list of layers, each a convolution with a bias, and
 * a list of ops over numbered activation slots. Ops run in order:
 *
 *   VTR_CONV_OP_CONV     slot[dst] = act(conv(slot[src], layer) + bias [+ slot[dst]])
 *                        with "+ slot[dst]" when accumulate (the residual connection:
 *                        dst holds the shortcut and receives the block's output), and
 *                        act the identity, ReLU or ReLU6.
 *   VTR_CONV_OP_MAXPOOL  slot[dst] = max pool of slot[src] (square window `kernel`,
 *                        `stride`, `pad_begin` / `pad_end` rows and columns added before /
 *                        after; padded cells never win, as in PyTorch)
 *   VTR_CONV_OP_AVGPOOL  slot[dst] = average pool of slot[src] (the same window), the mean
 *                        over the window's cells inside the map (TF's 'same' padding)
 *   VTR_CONV_OP_CONCAT   slot[dst] = slot[srcs[0]], ..., slot[srcs[n_srcs-1]] stacked along
 *                        the channels (Inception's branches)
 *
 * Slot 0 is the input (N, in_channels, H, W) and is never written; the output is slot
 * `out_slot` after the last op. A slot's shape is that of the last op that wrote it; an
 * accumulating conv requires its dst to hold a tensor of exactly the output's shape.
 * Along each axis an op's output has (n + pad_before + pad_after - k) / stride + 1 cells.
 * Convolutions have a KH x KW kernel (1x7 and 7x1 in Inception), the same stride on both
 * axes, zero padding that may differ per side (Keras's ZeroPadding2D ((0,1),(0,1)) before
 * a strided valid conv), groups (depthwise convs: groups = in_channels) and dilation 1:
 * what the ResNets, MobileNetV2 and InceptionV3 need.
 *
 * Layouts. Weights are PyTorch's (OC, C / groups, KH, KW). The engines take the input as
 * NCHW and give the output map as NHWC (N, OH, OW, OC), the layout of set elements (grid
 * features) and of pooling over cells; in between, activations stay in whatever layout
 * the engine's kernels prefer (oneDNN's AVX-512 brgconv and depthwise kernels: NHWC; older
 * kernels: nChw16c or nChw8c; a concat: the layout oneDNN picks for its sources), with no
 * reorder between layers when consecutive kernels agree, and weights are reordered to
 * their kernel's layout once.
 *
 * Choice of CPU backend. oneDNN's convolutions against im2col + OpenBLAS sgemm, measured
 * on this project's 2-core AVX-512 development machine (batch 32, bias + ReLU included,
 * best of 5): ResNet layer1 3x3 64->64 at 56x56 33.5 ms against 99.4 ms, layer3 3x3
 * 256->256 at 14x14 30.9 against 58.6, layer2 1x1 128->512 at 28x28 19.3 against 38.3,
 * layer3 1x1 1024->256 at 14x14 15.1 against 23.7; oneDNN reaches 220-240 GFLOP/s where
 * the sgemm peak is 172. Hence oneDNN, which configure requires.
 * The code follows oneDNN's 2.x C API (Debian 12's libdnnl-dev 2.6.3).
 */
#ifndef VTR_CONV_H
#define VTR_CONV_H

#include <stdbool.h>
#include <stddef.h>

#include "lib/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vtr_conv_act {
    VTR_CONV_ACT_NONE,
    VTR_CONV_ACT_RELU,  /* max(x, 0) */
    VTR_CONV_ACT_RELU6, /* min(max(x, 0), 6): Keras's ReLU(max_value=6), MobileNetV2's */
} vtr_conv_act;

typedef struct vtr_conv_layer {
    int in_channels, out_channels;
    int groups;             /* both channel counts are multiples of it: 1 dense, in_channels
                             * depthwise (out = in * multiplier); 0 is refused */
    int kernel_h, kernel_w;
    int stride;             /* the same on both axes */
    int pad_top, pad_left, pad_bottom, pad_right; /* zero padding, may differ per side */
    float *weight;          /* (OC, C / groups, KH, KW), owned by the net (malloc) */
    float *bias;            /* (OC), owned by the net (malloc) */
} vtr_conv_layer;

typedef enum vtr_conv_op_kind {
    VTR_CONV_OP_CONV,
    VTR_CONV_OP_MAXPOOL,
    VTR_CONV_OP_AVGPOOL, /* mean over the window's cells inside the map: padded cells are not
                          * counted (TF's 'same', PyTorch's count_include_pad=False) */
    VTR_CONV_OP_CONCAT,  /* slot[dst] = channels of slot[srcs[0]], then srcs[1], ... (all of
                          * the same h x w) */
} vtr_conv_op_kind;

#define VTR_CONV_MAX_CONCAT 8

typedef struct vtr_conv_op {
    vtr_conv_op_kind kind;
    int src, dst;            /* slots; dst >= 1 and dst != src (CONCAT: src unused, dst not
                              * among srcs) */
    int layer;               /* CONV: index into layers */
    vtr_conv_act act;        /* CONV: applied after the bias (and the accumulation) */
    bool accumulate;         /* CONV: add to what dst holds (before act) */
    int kernel, stride;      /* pools: square window */
    int pad_begin, pad_end;  /* pools: rows/columns added before (top, left) and after
                              * (bottom, right); each < kernel */
    int n_srcs;              /* CONCAT: 2 .. VTR_CONV_MAX_CONCAT */
    int srcs[VTR_CONV_MAX_CONCAT]; /* CONCAT: slots, in channel order */
} vtr_conv_op;

typedef struct vtr_conv_net {
    int in_channels;    /* of the input, slot 0 */
    int slots;          /* slots 0 .. slots-1 */
    int out_slot;
    int out_channels;   /* of the output */
    size_t n_layers, n_ops;
    vtr_conv_layer *layers; /* owned (malloc) */
    vtr_conv_op *ops;       /* owned (malloc) */
} vtr_conv_net;

/* Frees the layers' weights and the arrays; leaves net zeroed. Safe on a zeroed net. */
void vtr_conv_net_free(vtr_conv_net *net);

/* Appends a layer (taking over its weight and bias, which are freed on failure) or an op
 * to a net being built, growing the arrays; VTR_ERR_NOMEM. */
vtr_status vtr_conv_net_add_layer(vtr_conv_net *net, vtr_conv_layer layer, vtr_error *err);
vtr_status vtr_conv_net_add_op(vtr_conv_net *net, vtr_conv_op op, vtr_error *err);

/* Checks that the program is well-formed: slots and layers in range, slot 0 never
 * written, every slot read after it was written, channel counts that chain and that
 * groups (>= 1) divide, non-negative paddings (a pool's below its kernel), shapes of
 * accumulating convs that match (for an input of h x w), concats of 2 ..
 * VTR_CONV_MAX_CONCAT written slots of one h x w (dst not among them), an output size of
 * at least 1x1. Fails with VTR_ERR_INVALID naming the op. The engines call it. */
vtr_status vtr_conv_net_check(const vtr_conv_net *net, int h, int w, vtr_error *err);

/* The output map's height and width for an input of h x w (0 when the input is too small
 * for some op). */
void vtr_conv_net_output_size(const vtr_conv_net *net, int h, int w, int *oh, int *ow);

/* Folds an inference batch norm that follows a convolution into it, in place:
 *   weight[o] *= s[o], bias[o] = beta[o] + (bias[o] - mean[o]) * s[o],
 *   s[o] = gamma[o] / sqrt(var[o] + eps)
 * (bias holds the convolution's own bias, zeros when it has none). weight is (OC, per_oc)
 * for per_oc = C / groups * KH * KW; gamma, beta, mean, var are (OC). Computed in double,
 * stored as float.
 * A var[o] + eps that is not positive gives VTR_ERR_INVALID naming the channel. */
vtr_status vtr_conv_fold_bn(float *weight, float *bias, int out_channels, size_t per_oc,
                            const float *gamma, const float *beta, const float *mean,
                            const float *var, float eps, vtr_error *err);

/* ---- CPU engine (oneDNN) ---------------------------------------------------------- */

typedef struct vtr_conv_cpu vtr_conv_cpu;

/* One line for --version: the oneDNN that runs the CPU engine and the instruction set it
 * dispatches to on this CPU, e.g. "convolutions: oneDNN 2.6.3, ISA avx512_core_amx". In a
 * static buffer that the next call rewrites (not thread-safe). */
const char *vtr_conv_cpu_report(void);

/* An engine for net (borrowed: it must outlive the engine and not change). Creates the
 * oneDNN CPU engine; primitives are made by the first run of each input shape.
 * VTR_ERR_DEVICE when oneDNN fails, VTR_ERR_NOMEM. *out is NULL on failure. */
vtr_status vtr_conv_cpu_new(const vtr_conv_net *net, vtr_conv_cpu **out, vtr_error *err);

void vtr_conv_cpu_free(vtr_conv_cpu *c);

/* Mixed precision (off by default): with bf16, activations and weights are bfloat16
 * (each weight rounded once, when first reordered), products accumulate in float32 inside
 * oneDNN's kernels, biases stay float32; the input is rounded to bfloat16 by the first
 * reorder and the output map widened back to float32 NHWC. The next run plans again and
 * reorders the weights to the new precision. VTR_ERR_UNSUPPORTED, with the engine unchanged, on a
 * CPU without AVX512-BF16 or AMX (oneDNN would emulate them, slower than float32). */
vtr_status vtr_conv_cpu_set_bf16(vtr_conv_cpu *c, bool bf16, vtr_error *err);

/* Runs the net on a batch: in (n, in_channels, h, w) float32 NCHW, out (n, oh, ow,
 * out_channels) float32 NHWC, oh and ow from vtr_conv_net_output_size. The first call
 * for an (n, h, w) builds the oneDNN primitives and reorders the weights to their layout
 * (kept for later calls while the layout stays the same); a call with another shape
 * rebuilds the primitives. Threads: OpenMP's (omp_set_num_threads). VTR_ERR_INVALID when
 * the net does not check for this shape, VTR_ERR_DEVICE when oneDNN fails, VTR_ERR_NOMEM.
 * n == 0 does nothing. Not thread-safe: one run at a time per engine. */
vtr_status vtr_conv_cpu_run(vtr_conv_cpu *c, const float *in, int n, int h, int w, float *out,
                            vtr_error *err);

/* The CUDA engine (features/conv.cu): the same folded conv nets on cuDNN.
 *
 * Each conv runs as cudnnConvolutionBiasActivationForward (y = ReLU(conv(x) + bias
 * [+ y]), the residual added in place) or, for a conv without ReLU, cudnnConvolutionForward
 * followed by the bias and, for ReLU6, cudnnActivationForward (clipped ReLU); groups
 * through cudnnSetConvolutionGroupCount. cuDNN pads symmetrically only: a conv whose
 * padding differs between opposite sides reads a zero-padded copy of its input, and a pool
 * whose pad_begin differs from its pad_end is refused (VTR_ERR_UNSUPPORTED). Pools are
 * cudnnPoolingForward (max: padding never wins; average: padding not counted), concats
 * one strided copy per source. Activations are NCHW float32 on the GPU; the algorithm of
 * each conv is the fastest that cuDNN's heuristics (cudnnGetConvolutionForwardAlgorithm_v7)
 * rank for the batch shape with the math type CUDNN_FMA_MATH (strict float32, no TF32), so
 * features agree with the CPU engine to float32 rounding. With bf16
 * (vtr_conv_cuda_set_bf16) they are NHWC bfloat16 on tensor cores instead.
 *
 * In libvtr-cuda.so, reached through features/cuda_entries.c (lib/cuda_loader.h); in a
 * build without CUDA they fail with VTR_WITHOUT_CUDA.
 */
typedef struct vtr_conv_cuda vtr_conv_cuda;

/* An engine for net (borrowed: it must outlive the engine and not change) on the current
 * GPU (vtr_cuda_init first): creates a cuDNN handle and uploads the layers' weights and
 * biases. VTR_ERR_INVALID for a layer whose groups (< 1) do not divide its input
 * channels, VTR_ERR_DEVICE with CUDA's or cuDNN's message, VTR_ERR_NOMEM. *out is NULL on
 * failure. */
vtr_status vtr_conv_cuda_new(const vtr_conv_net *net, vtr_conv_cuda **out, vtr_error *err);

void vtr_conv_cuda_free(vtr_conv_cuda *c);

/* Mixed precision (off by default): with bf16, activations, weights and biases are bfloat16
 * NHWC (each weight and bias rounded once, here, from the net's float32), products accumulate
 * in float32 on tensor cores (CUDNN_TENSOR_OP_MATH), the input is rounded to bfloat16 on the
 * GPU and the output map widened back to float32 NHWC. A conv that cuDNN's fused call does
 * not take (ReLU6, none, or a refused configuration) adds its bias and activation in a kernel
 * of vtr's, in float32 rounded once. Replans at the next run.
 * VTR_ERR_UNSUPPORTED, with the engine unchanged, on a GPU before compute capability 8.0
 * (Ampere); VTR_ERR_DEVICE with CUDA's or cuDNN's message, the engine back in its precision
 * (or, where the GPU could not take its weights again, refusing to run). */
vtr_status vtr_conv_cuda_set_bf16(vtr_conv_cuda *c, bool bf16, vtr_error *err);

/* Runs the net on a batch held in host memory: in (n, in_channels, h, w) float32 NCHW,
 * out (n, oh, ow, out_channels) float32 NHWC (vtr_conv_net_output_size). Copies the
 * input in, runs every op on the default stream, copies the output back and waits. The
 * first call for an (n, h, w) picks the algorithms and allocates activations and
 * workspace for it (kept for later calls of the same shape). n == 0 does nothing.
 * VTR_ERR_INVALID when the net does not check for this shape, VTR_ERR_UNSUPPORTED for a
 * pool with asymmetric padding (naming the op), VTR_ERR_DEVICE otherwise.
 * Not thread-safe. */
vtr_status vtr_conv_cuda_run(vtr_conv_cuda *c, const float *in, int n, int h, int w, float *out,
                             vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
