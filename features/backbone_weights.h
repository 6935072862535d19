/* Reading a backbone's weights by name from a table of tensors (lib/safetensors.h: a
 * safetensors or .pth file, or a TF.js model read into one), for the builders of conv
 * nets (features/backbone.c for torchvision's ResNets, features/keras_net.c for Keras
 * graphs). */
#ifndef VTR_BACKBONE_WEIGHTS_H
#define VTR_BACKBONE_WEIGHTS_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/error.h"
#include "lib/safetensors.h"

typedef struct vtr_backbone_weights {
    const vtr_safetensors *st;
    const char *what; /* the weights in errors: a path */
    const char *arch; /* the architecture in errors: "resnet50", "mobilenet_v2" */
    bool *used;       /* per entry of st: read by vtr_backbone_weights_read */
} vtr_backbone_weights;

/* A reader over st (borrowed); VTR_ERR_NOMEM. */
vtr_status vtr_backbone_weights_open(vtr_backbone_weights *w, const vtr_safetensors *st,
                                     const char *what, const char *arch, vtr_error *err);

void vtr_backbone_weights_close(vtr_backbone_weights *w);

/* Whether st has a tensor called name. */
bool vtr_backbone_weights_has(const vtr_backbone_weights *w, const char *name);

/* Reads tensor name, which must have the given shape, as float32 into a new buffer (*out,
 * malloc; float16 and bfloat16 are converted) and marks it used. VTR_ERR_NOT_FOUND for a
 * missing tensor, VTR_ERR_FORMAT for another shape (both shapes named), a dtype other
 * than float32/16, bfloat16, or a non-finite value; VTR_ERR_NOMEM. *out is NULL on
 * failure. */
vtr_status vtr_backbone_weights_read(vtr_backbone_weights *w, const char *name, int ndim,
                                     const int64_t *shape, float **out, vtr_error *err);

/* VTR_ERR_FORMAT naming the first tensor that was not read and that ignore(ctx, name) does
 * not accept ("weights W: unexpected tensor 'N' for ARCH (weights of another
 * architecture?)"); VTR_OK when there is none. */
vtr_status vtr_backbone_weights_check_all_used(const vtr_backbone_weights *w,
                                               bool (*ignore)(void *ctx, const char *name),
                                               void *ctx, vtr_error *err);

#endif
