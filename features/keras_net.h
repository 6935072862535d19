/* Keras functional CNNs (as TF.js layers models carry them, features/tfjs_model.h) as
 * folded conv nets (features/conv.h): MobileNetV2, InceptionV3 and other graphs of the
 * same layers, run by the same engines as torchvision's ResNets.
 *
 * The graph: model_config {"class_name": "Model" | "Functional", "config": {"layers":
 * [{"name", "class_name", "config", "inbound_nodes": [[[NAME, 0, 0, {}], ...]]}, ...],
 * "input_layers", "output_layers"}}, layers in an order where each comes after its
 * inputs (Keras writes them so), one node per layer. Layers vtr runs, channels last:
 *
 *   InputLayer           the (N, H, W, C) image; vtr feeds (N, C, H, W) floats
 *   ZeroPadding2D        folded into the convolution that reads it (sides may differ)
 *   Conv2D               any kernel_size, equal strides, dilation 1, "valid" or "same"
 *                        (same: stride 1, or a 1x1 kernel), activation linear or relu
 *   DepthwiseConv2D      the same, with depth_multiplier M: output channel c*M + m
 *   BatchNormalization   folded into the convolution before it (moving statistics,
 *                        the layer's epsilon; no gamma/beta when scale/center is false)
 *   ReLU, Activation     relu (ReLU's max_value 6: ReLU6) or linear, fused into the
 *                        convolution before it
 *   Add                  two inputs, one of them a convolution (after its fusions) whose
 *                        output nothing else reads: it accumulates onto the other
 *   MaxPooling2D, AveragePooling2D
 *                        square windows; "same" only with stride 1; the average does not
 *                        count padded cells (TF's rule)
 *   Concatenate          on the channel axis, 2 to VTR_CONV_MAX_CONCAT inputs
 *
 * The head: the net ends at the map that the first Flatten, GlobalAveragePooling2D,
 * GlobalMaxPooling2D or Dense reads (the backbone averages it over its cells: the pooled
 * feature); an AveragePooling2D right before that layer whose window covers the whole
 * map at the model's declared input size is the global pool itself and is left out, so
 * that the pooled feature is the same at that size and the global mean at others. The
 * head's layers and their weights are ignored. A graph without a head ends at its output.
 *
 * Weights under TF.js's names in Keras's layouts: LAYER/kernel (KH, KW, C, OC),
 * LAYER/depthwise_kernel (KH, KW, C, M), LAYER/bias, LAYER/{gamma, beta, moving_mean,
 * moving_variance}; converted to (OC, C / groups, KH, KW) at load time. A layer vtr does
 * not run, a missing or misshapen weight, a weight no layer reads: VTR_ERR_FORMAT naming
 * the layer (and its class) or the weight.
 */
#ifndef VTR_KERAS_NET_H
#define VTR_KERAS_NET_H

#include <jansson.h>

#include "features/conv.h"
#include "lib/error.h"
#include "lib/safetensors.h"

/* The architecture vtr recognises in the graph by its layer names: "mobilenet_v2"
 * (keras.applications.MobileNetV2: Conv1, expanded_conv_*, block_16_project) or
 * "inception_v3" (keras.applications.InceptionV3: mixed0 .. mixed10); NULL otherwise. */
const char *vtr_keras_arch_detect(const json_t *model_config);

/* The model's declared input height and width (the input layer's batch_input_shape),
 * 0 when not fixed. */
void vtr_keras_input_size(const json_t *model_config, int *h, int *w);

/* Builds net (zeroed first; freed on failure) from the graph model_config and the
 * weights st (borrowed), `what` naming the weights and `arch` the architecture in errors.
 * The net is checked for the declared input size (224 x 224 when none). */
vtr_status vtr_keras_net_build(const json_t *model_config, const vtr_safetensors *st,
                               const char *what, const char *arch, vtr_conv_net *net,
                               vtr_error *err);

#endif
