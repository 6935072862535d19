/* CNN backbones for frame features: the ResNet family of torchvision, loaded from
 * safetensors under torchvision's state_dict names, and Keras CNNs (MobileNetV2,
 * InceptionV3, others of the same layers) converted from TF.js layers models
 * (features/tfjs_model.h, features/keras_net.h); run on CPU (oneDNN) or CUDA (cuDNN).
 *
 * Keras CNNs: safetensors whose metadata "format" is "keras" hold the layer graph
 * ("keras_model") and the weights under their Keras names; "arch" names the
 * architecture when vtr recognises it (mobilenet_v2: D = 1280; inception_v3: D = 2048;
 * keras: another graph, D its last map's channels). The net ends at the map before the
 * classifier; the pooled feature is that map's mean over its cells, which is what the
 * models' own final average pool gives at their input size (224 for MobileNetV2, 299 for
 * InceptionV3). Batch norms use each layer's epsilon (Keras's 1e-3).
 *
 * Architecture: torchvision.models.resnet{18,34,50,101,152} ("v1.5": in a bottleneck the
 * stride sits on the 3x3 convolution), without the classifier: conv1 7x7/2, bn1, ReLU,
 * max pool 3x3/2, layer1..layer4 (BasicBlock for 18/34, Bottleneck for 50/101/152; the
 * first block of a layer has a 1x1 downsample conv + bn when the stride or the width
 * changes), then either the global average pool (the pooled feature, 512-d for 18/34,
 * 2048-d for 50/101/152, torchvision's avgpool output) or the last feature map itself
 * (grid features: each of its OH x OW cells is one set element of D channels, row-major
 * over the cells; 7x7 cells for a 224x224 input).
 *
 * Weights: a safetensors file or a torch.save file (.pth, lib/pth.h: torchvision's
 * released weights as downloaded), told apart by content (lib/tensor_file.h), with
 * torchvision's (and timm's) names, e.g.
 *   conv1.weight (64, 3, 7, 7)   bn1.{weight,bias,running_mean,running_var} (64)
 *   layer1.0.conv1.weight        layer1.0.bn1.*
 *   layer1.0.downsample.0.weight layer1.0.downsample.1.*
 * float32, float16 or bfloat16 (converted to float32). fc.* and *.num_batches_tracked
 * are ignored. A missing tensor, a tensor of the wrong shape or dtype, and a tensor that
 * the architecture does not have (weights of another depth) are errors naming the file
 * and the tensor (and both shapes). The architecture can be inferred from the weights
 * (vtr_backbone_arch_infer). Batch norms (eps 1e-5, torchvision's) are folded into
 * the convolutions at load time (features/conv.h), so a loaded backbone is a
 * vtr_conv_net: each conv carries a bias, ReLUs and residual additions are fused.
 *
 * Numerics: float32 throughout. With the same weights and input, features agree with
 * torchvision's eval-mode forward to about 1e-6 of their largest magnitude on CPU; the
 * CUDA engine runs cuDNN in strict float32 (no TF32), the same to float32 rounding.
 */
#ifndef VTR_BACKBONE_H
#define VTR_BACKBONE_H

#include <stdbool.h>
#include <stdint.h>

#include "features/conv.h"
#include "features/preprocess.h"
#include "lib/device.h"
#include "lib/error.h"
#include "lib/safetensors.h"

typedef enum vtr_backbone_arch {
    VTR_BACKBONE_ARCH_INFER = -1, /* for loading: the architecture the weights are of */
    VTR_RESNET18,
    VTR_RESNET34,
    VTR_RESNET50,
    VTR_RESNET101,
    VTR_RESNET152,
    VTR_MOBILENET_V2, /* the Keras CNNs: from here on */
    VTR_INCEPTION_V3,
    VTR_KERAS_CNN,    /* any other Keras CNN vtr runs */
    VTR_BACKBONE_ARCH_COUNT
} vtr_backbone_arch;

/* "resnet18", ..., "resnet152", "mobilenet_v2", "inception_v3", "keras" */
const char *vtr_backbone_arch_name(vtr_backbone_arch arch);

/* Parses an architecture name; VTR_ERR_INVALID listing the known ones otherwise. */
vtr_status vtr_backbone_arch_parse(const char *name, vtr_backbone_arch *arch, vtr_error *err);

/* The architecture of the weights in st: the safetensors metadata "arch" where there is
 * one (vtr-backbone-init records it), else keras for a converted Keras CNN (metadata
 * "format" "keras"), else the tensors: blocks per layer
 * (layerL.B.conv1.weight present) and the block type (layer1.0.conv1.weight 64x64x1x1
 * and a conv3: Bottleneck; 64x64x3x3 and none: BasicBlock). Only the tensors that tell
 * the architecture are read: loading checks them all. VTR_ERR_FORMAT naming `what` (a
 * path) when the metadata names no architecture vtr knows or the tensors are of none of
 * resnet18/34/50/101/152. */
vtr_status vtr_backbone_arch_infer(const vtr_safetensors *st, const char *what,
                                   vtr_backbone_arch *arch, vtr_error *err);

/* Feature dimension D: 512, 1280 or 2048; 0 for keras (the graph's, known once loaded:
 * vtr_backbone_dim). */
int vtr_backbone_arch_dim(vtr_backbone_arch arch);

/* One convolution of an architecture and the batch norm after it, under torchvision's
 * names: weight `conv`.weight (out_c, in_c, k, k), norm `bn`.{weight,bias,running_mean,
 * running_var,num_batches_tracked} (out_c). */
typedef struct vtr_backbone_conv_spec {
    char conv[64], bn[64];
    int out_c, in_c, k;
} vtr_backbone_conv_spec;

/* The convolutions of a ResNet arch in torchvision's module order (conv1, then per block conv1,
 * conv2[, conv3], downsample.0). Writes at most cap specs to out (out may be NULL when cap
 * is 0) and returns how many the architecture has (at most 160; 0 for a Keras CNN). */
int vtr_backbone_conv_specs(vtr_backbone_arch arch, vtr_backbone_conv_spec *out, int cap);

typedef struct vtr_backbone vtr_backbone;

/* Builds the backbone from the tensors of st (borrowed; copied, so st may be closed
 * afterwards). `what` names the weights in errors (a path). arch VTR_BACKBONE_ARCH_INFER
 * takes the architecture from the weights (vtr_backbone_arch_infer's errors); another
 * arch must be theirs where they tell it, else VTR_ERR_INVALID "W are resnet50 weights,
 * not resnet152: use -a resnet50"; weights of no known architecture are then checked
 * tensor by tensor against arch (a missing tensor, a wrong shape: as below). On CUDA the
 * weights go to the GPU that vtr_cuda_init chose, which must come first (VTR_ERR_DEVICE
 * otherwise, as when vtr has no CUDA). *out is NULL on failure. */
vtr_status vtr_backbone_from_safetensors(const vtr_safetensors *st, const char *what,
                                         vtr_backbone_arch arch, vtr_device device,
                                         vtr_backbone **out, vtr_error *err);

/* vtr_backbone_from_safetensors on the file at path, safetensors or torch.save
 * (vtr_tensor_file_open). */
vtr_status vtr_backbone_load(const char *path, vtr_backbone_arch arch,
                             vtr_device device, vtr_backbone **out, vtr_error *err);

void vtr_backbone_free(vtr_backbone *b);

/* Whether a backbone on device can run in bfloat16, as far as is known before a GPU is
 * chosen: VTR_OK, or VTR_ERR_UNSUPPORTED saying why not (a CPU without AVX512-BF16 or AMX).
 * On CUDA, vtr_backbone_set_bf16 checks the GPU. */
vtr_status vtr_backbone_bf16_check(vtr_device device, vtr_error *err);

/* Runs the convolutions in bfloat16 (bf16 true) or float32 (the default): see
 * vtr_conv_cpu_set_bf16 and vtr_conv_cuda_set_bf16 (features/conv.h). Features stay
 * float32; their cosine to the float32 ones is about 0.9999 for a ResNet
 * (tests/test_backbone.c, bench/features). VTR_ERR_UNSUPPORTED, with b unchanged (float32),
 * on a CPU without AVX512-BF16 or AMX and on a GPU before compute capability 8.0. */
vtr_status vtr_backbone_set_bf16(vtr_backbone *b, bool bf16, vtr_error *err);

/* Whether b runs in bfloat16. */
bool vtr_backbone_bf16(const vtr_backbone *b);

vtr_backbone_arch vtr_backbone_get_arch(const vtr_backbone *b);

/* The preprocessing the weights expect: torchvision's ImageNet transform for a ResNet
 * (vtr_preprocess_defaults), what vtr-backbone-init --tfjs recorded for a Keras CNN (its
 * input size as resize and crop, the mean and std: 0 and 1, TF.js's pixel / 255, where
 * none is recorded). */
void vtr_backbone_preprocess(const vtr_backbone *b, vtr_preprocess_options *opt);
int vtr_backbone_dim(const vtr_backbone *b);

/* The folded program (features/conv.h); lives as long as b. */
const vtr_conv_net *vtr_backbone_net(const vtr_backbone *b);

/* The grid (last feature map) for an h x w input: gh x gw cells, 0 x 0 when the input
 * is too small for the net (the smallest input is 1x1 for ResNets: every conv and pool
 * pads). */
void vtr_backbone_grid_size(const vtr_backbone *b, int h, int w, int *gh, int *gw);

/* Features of n images: images (n, 3, h, w) float32, normalized (features/preprocess.h);
 * out (n, D) pooled, or with grid (n, gh*gw, D), float32. The engine keeps primitives
 * (and, on CUDA, buffers) for the last (n, h, w) and rebuilds them when it changes, so
 * calls of one batch shape are cheapest. VTR_ERR_INVALID for an input too small,
 * VTR_ERR_NOMEM, VTR_ERR_DEVICE from oneDNN/CUDA. Not thread-safe. */
vtr_status vtr_backbone_forward(vtr_backbone *b, const float *images, int n, int h, int w,
                                bool grid, float *out, vtr_error *err);

#endif
