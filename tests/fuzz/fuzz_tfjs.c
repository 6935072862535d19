/* Fuzz target: a TF.js layers model (features/tfjs_model.h) and the translation of its
 * Keras graph into a conv net (features/keras_net.h), both of which a downloaded model
 * controls. The input up to its first NUL byte is model.json; the rest is the weight file
 * "w" beside it. On success every weight is finite or not (no check) but in bounds (ASan),
 * and the graph either builds a net that vtr_conv_net_check accepts or fails with one
 * line; on failure the model is left zeroed. Seed: the small graph of
 * tests/fixtures/make_keras_fixtures.py --fuzz-seed (every layer vtr runs). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "features/keras_net.h"
#include "features/tfjs_model.h"
#include "fuzz_util.h"

static volatile float sink; /* keeps the reads of the weights */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t json = nul ? (size_t)(nul - data) : size;
    fuzz_scratch();
    fuzz_write_file("model.json", data, json);
    fuzz_write_file("w", nul ? nul + 1 : data, nul ? size - json - 1 : 0);
    char *path = fuzz_path("model.json");
    vtr_tfjs_model m;
    vtr_error err;
    if (vtr_tfjs_model_read(path, &m, &err) != VTR_OK) {
        fuzz_check_message(&err, NULL);
        if (m.model_config || m.weights.count || m.data)
            abort();
        free(path);
        return 0;
    }
    float sum = 0;
    for (size_t i = 0; i < m.weights.count; i++) {
        const vtr_tensor *t = &m.weights.entries[i].tensor;
        const float *v = t->data;
        for (int64_t k = 0; k < vtr_tensor_numel(t); k++)
            sum += v[k];
    }
    sink = sum;
    vtr_conv_net net;
    if (vtr_keras_net_build(m.model_config, &m.weights, path, "keras", &net, &err) != VTR_OK) {
        fuzz_check_message(&err, NULL);
        if (net.layers || net.ops || net.n_ops)
            abort();
    } else {
        int h, w;
        vtr_keras_input_size(m.model_config, &h, &w);
        if (h < 1 || w < 1)
            h = w = 224;
        if (vtr_conv_net_check(&net, h, w, &err) != VTR_OK)
            abort();
        vtr_conv_net_free(&net);
    }
    vtr_tfjs_model_free(&m);
    free(path);
    return 0;
}
