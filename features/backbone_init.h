/* Backbone weights initialised as torchvision initialises an untrained ResNet, for runs
 * without pretrained weights (make demo; nothing can be downloaded there).
 *
 * torchvision.models.resnet*(weights=None): every convolution kaiming_normal_(mode
 * "fan_out", nonlinearity "relu"), i.e. N(0, 2 / (out_c * k * k)); batch norms weight 1,
 * bias 0, running_mean 0, running_var 1, num_batches_tracked 0; the classifier fc (1000
 * classes) PyTorch's Linear default, U(-1/sqrt(D), 1/sqrt(D)) for weight and bias.
 * Values come from lib/rng.h (Philox) streams of the seed, one per tensor, so the same
 * seed gives the same bytes everywhere (not torch's values: its generator differs).
 *
 * Such a network is NOT a pretrained model: in eval mode its features are fixed random
 * projections of the pixels (nonlinear, multi-scale), useful to exercise a pipeline and
 * to show that the later stages learn, not to measure what a real backbone reaches.
 */
#ifndef VTR_BACKBONE_INIT_H
#define VTR_BACKBONE_INIT_H

#include <stdint.h>

#include "features/backbone.h"
#include "lib/error.h"

/* Writes the weights of arch under torchvision's names to path (safetensors, float32, the
 * counters int64; atomic), with metadata "arch", "init", "seed" and "pretrained": "false".
 * vtr_backbone_load() and torch's load_state_dict(strict=True) both accept the file.
 * VTR_ERR_INVALID for an unknown arch, VTR_ERR_NOMEM, VTR_ERR_IO. */
vtr_status vtr_backbone_init_write(const char *path, vtr_backbone_arch arch, uint64_t seed,
                                   vtr_error *err);

#endif
