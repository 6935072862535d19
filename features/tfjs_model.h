/* TensorFlow.js layers models: what tensorflowjs_converter writes for a Keras model (and
 * what npm packages such as nsfwjs ship), read without TensorFlow, and their conversion
 * to a safetensors file that vtr's backbone loader (features/backbone.h) reads.
 *
 * Layout: DIR/model.json is {"modelTopology": {..., "model_config": {"class_name",
 * "config": {"layers": [...], "input_layers", "output_layers"}}}, "weightsManifest":
 * [{"paths": [FILE...], "weights": [{"name", "shape", "dtype", "quantization"?}...]}...]}.
 * Each manifest group's files, concatenated in the order listed (paths relative to
 * DIR), hold its weights back to back in the order listed, each numel x the size of its
 * stored dtype: the weight's dtype ("float32"), or the quantization's ("uint8", "uint16":
 * value = q * scale + min; "float16": IEEE half). Weights are float32 after reading;
 * other weight dtypes (int32, string) are refused. A group whose files hold more or fewer
 * bytes than its weights need is an error naming the group and both counts.
 *
 * Names and layouts stay Keras's: "Conv1/kernel" (KH, KW, C, OC), a DepthwiseConv2D's
 * "depthwise_kernel" (KH, KW, C, multiplier), "bn/gamma", "bn/beta", "bn/moving_mean",
 * "bn/moving_variance" (C), a Dense "kernel" (in, out) and "bias". The layer graph is
 * kept as JSON; features/keras_net.h turns graph and weights into a conv net.
 */
#ifndef VTR_TFJS_MODEL_H
#define VTR_TFJS_MODEL_H

#include <jansson.h>
#include <stddef.h>

#include "lib/error.h"
#include "lib/safetensors.h"

typedef struct vtr_tfjs_model {
    json_t *model_config;    /* modelTopology's model_config (owned reference) */
    vtr_safetensors weights; /* float32 tensors under their TF.js names, sorted */
    float *data;             /* their values (owned) */
} vtr_tfjs_model;

/* Reads the model at path (a model.json) and its weight files beside it. VTR_ERR_IO for a
 * file that cannot be read, VTR_ERR_FORMAT for malformed JSON or shards (naming the file,
 * weight or group), VTR_ERR_UNSUPPORTED for a weight dtype or quantization vtr does not
 * read, VTR_ERR_NOMEM. On failure m is zeroed. */
vtr_status vtr_tfjs_model_read(const char *path, vtr_tfjs_model *m, vtr_error *err);

/* Frees m; leaves it zeroed. Safe on a zeroed model. */
void vtr_tfjs_model_free(vtr_tfjs_model *m);

/* Writes m to path as safetensors (atomic), the tensors under their TF.js names, with
 * metadata: "format" "keras", "keras_model" (model_config as compact JSON), "arch" (the
 * architecture vtr recognises in the graph, vtr_keras_arch_detect; absent when none),
 * "source" (source: the model.json read), "pretrained" "true", and the preprocessing the
 * weights expect (vtr_backbone_preprocess reads it back): "input_size" (the input layer's
 * fixed height when it has one: the resize and crop; else none), "mean" and "std"
 * ("R,G,B", of v / 255). VTR_ERR_FORMAT when the graph is not one vtr can run
 * (vtr_keras_net_build's errors, checked before writing), VTR_ERR_IO, VTR_ERR_NOMEM. */
vtr_status vtr_tfjs_model_save(const vtr_tfjs_model *m, const char *source,
                               const float mean[3], const float std[3], const char *path,
                               vtr_error *err);

#endif
