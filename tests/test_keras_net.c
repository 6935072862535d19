/* Keras CNNs from TensorFlow.js layers models: the reader (quantised weights, shards,
 * hostile files), the graph translation against a PyTorch reference of a small graph with
 * every layer vtr runs (tests/fixtures/make_keras_fixtures.py), the conversion to
 * safetensors and back through vtr_backbone_load, the graphs vtr refuses, and nsfwjs's
 * MobileNetV2 and InceptionV3 against TensorFlow.js's own features (tests/fixtures/tfjs/,
 * made by tests/fixtures/make_tfjs_fixtures.sh; run where pipeline/nsfwjs.sh has fetched
 * the models into .cache/nsfwjs, skipped elsewhere). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "features/backbone.h"
#include "features/keras_net.h"
#include "features/tfjs_model.h"
#include "interop/tfjs_image.h"
#include "lib/npy.h"

#define PYTHON "/usr/bin/python3"
#define SCRIPT "tests/fixtures/make_keras_fixtures.py"
#define TFJS_FIXTURES "tests/fixtures/tfjs"
#define NSFWJS_DIR ".cache/nsfwjs"

/* The small graph's TF.js files, made once per run. */
static const char *keras_dir(void)
{
    static int state;
    const char *dir = test_path("keras");
    char make[1024];
    snprintf(make, sizeof make, PYTHON " " SCRIPT " '%s'", dir);
    test_fixture(&state, SCRIPT, "torch, numpy", make);
    return dir;
}

static void *load_npy(const char *path, int ndim, vtr_npy_file *f)
{
    vtr_error err;
    CHECK_OK(vtr_npy_load(path, f, &err));
    CHECK_MSG(f->tensor.dtype == VTR_F32 && f->tensor.ndim == ndim, "%s: unexpected array", path);
    return f->tensor.data;
}

/* Converts DIR/model.json to DIR/model.safetensors; returns that path (static buffer). */
static const char *convert(const char *dir)
{
    static char out[1024];
    char in[1024];
    vtr_error err;
    vtr_tfjs_model m;
    snprintf(in, sizeof in, "%s/model.json", dir);
    snprintf(out, sizeof out, "%s/model.safetensors", dir);
    CHECK_OK(vtr_tfjs_model_read(in, &m, &err));
    float mean[3] = {0, 0, 0}, std[3] = {1, 1, 1};
    CHECK_OK(vtr_tfjs_model_save(&m, in, mean, std, out, &err));
    vtr_tfjs_model_free(&m);
    return out;
}

TEST(keras_graph_matches_pytorch)
{
    const char *dir = keras_dir();
    const char *weights = convert(dir);
    vtr_error err;
    vtr_backbone *b = NULL;
    CHECK_OK(vtr_backbone_load(weights, VTR_BACKBONE_ARCH_INFER, VTR_DEVICE_CPU, &b, &err));
    CHECK_EQ_INT(vtr_backbone_get_arch(b), VTR_KERAS_CNN);
    CHECK_EQ_INT(vtr_backbone_dim(b), 12);
    vtr_preprocess_options pre;
    vtr_backbone_preprocess(b, &pre);
    CHECK_EQ_INT(pre.resize, 32);
    CHECK_EQ_INT(pre.crop, 32);
    CHECK(pre.mean[0] == 0 && pre.std[2] == 1);
    static const char *const sizes[2] = {"32x32", "23x29"};
    for (int s = 0; s < 2; s++) {
        char path[1024];
        vtr_npy_file fin, fpool, fgrid;
        snprintf(path, sizeof path, "%s/input_%s.npy", dir, sizes[s]);
        const float *x = load_npy(path, 4, &fin);
        snprintf(path, sizeof path, "%s/pooled_%s.npy", dir, sizes[s]);
        const float *pooled = load_npy(path, 2, &fpool);
        snprintf(path, sizeof path, "%s/grid_%s.npy", dir, sizes[s]);
        const float *grid = load_npy(path, 3, &fgrid);
        int n = (int)fin.tensor.shape[0], h = (int)fin.tensor.shape[2];
        int w = (int)fin.tensor.shape[3], gh, gw;
        vtr_backbone_grid_size(b, h, w, &gh, &gw);
        CHECK_EQ_INT((int64_t)gh * gw, fgrid.tensor.shape[1]);
        size_t np = (size_t)n * 12, ng = np * gh * gw;
        float *got = malloc(ng * sizeof *got);
        CHECK_OK(vtr_backbone_forward(b, x, n, h, w, false, got, &err));
        double e_pool = test_rel_error(got, pooled, np);
        CHECK_OK(vtr_backbone_forward(b, x, n, h, w, true, got, &err));
        double e_grid = test_rel_error(got, grid, ng);
        printf("    %s: relative error pooled %.2e, grid (%dx%d) %.2e\n", sizes[s], e_pool, gh,
               gw, e_grid);
        CHECK_MSG(e_pool < 1e-5 && e_grid < 1e-5, "%s: errors %g, %g", sizes[s], e_pool, e_grid);
        free(got);
        vtr_npy_close(&fin), vtr_npy_close(&fpool), vtr_npy_close(&fgrid);
    }
    vtr_backbone_free(b);
}

/* A copy of the small graph's files in a fresh directory; returns it (static buffer). */
static const char *copy_model(const char *name)
{
    static char dst[1024];
    snprintf(dst, sizeof dst, "%s", test_path(name));
    CHECK(test_run("rm -rf '%s' && mkdir -p '%s' && cp '%s'/model.json '%s'/group* '%s'", dst,
                   dst, keras_dir(), keras_dir(), dst) == 0);
    return dst;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    CHECK(f);
    char *buf = malloc(1 << 20);
    CHECK(buf);
    *len = fread(buf, 1, 1 << 20, f);
    fclose(f);
    return buf;
}

/* Every shorter length of a shard file, and every length of model.json: an error, never a
 * crash or a model. */
TEST(tfjs_reader_refuses_every_truncation)
{
    const char *dir = copy_model("truncated");
    char shard[1024], model[1024];
    snprintf(shard, sizeof shard, "%s/group1-shard2of2", dir);
    snprintf(model, sizeof model, "%s/model.json", dir);
    size_t len, mlen;
    char *full = read_file(shard, &len), *json = read_file(model, &mlen);
    vtr_error err;
    vtr_tfjs_model m;
    for (size_t cut = 0; cut < len; cut++) {
        test_write_file(shard, full, cut);
        CHECK_FAILS(vtr_tfjs_model_read(model, &m, &err), VTR_ERR_FORMAT, "weight group 0");
        CHECK(m.model_config == NULL && m.weights.count == 0);
    }
    test_write_file(shard, full, len);
    for (size_t cut = 0; cut < mlen; cut++) {
        test_write_file(model, json, cut);
        CHECK(vtr_tfjs_model_read(model, &m, &err) != VTR_OK);
    }
    test_write_file(model, json, mlen);
    CHECK_OK(vtr_tfjs_model_read(model, &m, &err));
    vtr_tfjs_model_free(&m);
    free(full);
    free(json);
}

/* model.json with `from` replaced by `to` (once) must fail with status and message. */
static void check_edit(const char *from, const char *to, vtr_status status, const char *msg)
{
    const char *dir = copy_model("edited");
    char model[1024];
    snprintf(model, sizeof model, "%s/model.json", dir);
    size_t len;
    char *json = read_file(model, &len);
    json[len] = '\0';
    char *at = strstr(json, from);
    CHECK_MSG(at, "'%s' not in model.json", from);
    size_t fl = strlen(from), tl = strlen(to);
    char *edited = malloc(len + tl + 1);
    CHECK(edited);
    memcpy(edited, json, (size_t)(at - json));
    memcpy(edited + (at - json), to, tl);
    memcpy(edited + (at - json) + tl, at + fl, len - (size_t)(at - json) - fl);
    test_write_file(model, edited, len - fl + tl);
    vtr_error err;
    vtr_tfjs_model m;
    vtr_status st = vtr_tfjs_model_read(model, &m, &err);
    if (st == VTR_OK) {
        char out[1024];
        snprintf(out, sizeof out, "%s/model.safetensors", dir);
        float mean[3] = {0, 0, 0}, std[3] = {1, 1, 1};
        st = vtr_tfjs_model_save(&m, model, mean, std, out, &err);
        vtr_tfjs_model_free(&m);
        CHECK_MSG(access(out, F_OK) != 0, "%s written for a model that cannot run", out);
    }
    CHECK_MSG(st == status && strstr(err.msg, msg), "%s -> %s: status %d, '%s' (wanted %d, '%s')",
              from, to, st, err.msg, status, msg);
    free(json);
    free(edited);
}

TEST(tfjs_reader_refuses_bad_files)
{
    check_edit("\"group2-shard1of1\"]", "\"../group2-shard1of1\"]", VTR_ERR_FORMAT,
               "is not a file name beside model.json");
    check_edit("\"group2-shard1of1\"]", "\"missing\"]", VTR_ERR_IO, "missing");
    check_edit("\"dtype\": \"uint8\"", "\"dtype\": \"int4\"", VTR_ERR_UNSUPPORTED,
               "quantization int4");
    check_edit("\"dtype\": \"float32\"}", "\"dtype\": \"int32\"}", VTR_ERR_UNSUPPORTED,
               "is int32, not float32");
    check_edit("\"modelTopology\"", "\"topology\"", VTR_ERR_FORMAT, "no modelTopology");
}

TEST(keras_translation_refuses_what_it_cannot_run)
{
    check_edit("\"class_name\": \"DepthwiseConv2D\"", "\"class_name\": \"SeparableConv2D\"",
               VTR_ERR_FORMAT, "layer 'dw1' (SeparableConv2D): a layer vtr does not run");
    check_edit("\"strides\": [1, 1], \"padding\": \"same\", \"depth_multiplier\"",
               "\"strides\": [2, 2], \"padding\": \"same\", \"depth_multiplier\"", VTR_ERR_FORMAT,
               "layer 'dw1' (DepthwiseConv2D): padding 'same' with a stride above 1");
    check_edit("\"activation\": \"relu\", \"name\": \"act2\"",
               "\"activation\": \"tanh\", \"name\": \"act2\"", VTR_ERR_FORMAT,
               "layer 'act2' (Activation): activation 'tanh'");
    check_edit("[[[\"relu1\", 0, 0, {}], [\"pw1\", 0, 0, {}]]]",
               "[[[\"relu1\", 0, 0, {}], [\"nothing\", 0, 0, {}]]]", VTR_ERR_FORMAT,
               "layer 'add1' (Add): input 'nothing' is not a layer before it");
    check_edit("\"max_value\": 6.0", "\"max_value\": 4.0", VTR_ERR_FORMAT,
               "layer 'relu1' (ReLU): vtr runs ReLU with no negative slope");
    check_edit("\"name\": \"pw1/bias\"", "\"name\": \"pw1/offset\"", VTR_ERR_NOT_FOUND,
               "missing tensor 'pw1/bias'");
    check_edit("\"name\": \"dense/bias\"", "\"name\": \"stray/bias\"", VTR_ERR_FORMAT,
               "unexpected tensor 'stray/bias'");
    check_edit("\"class_name\": \"Model\"", "\"class_name\": \"Sequential\"", VTR_ERR_FORMAT,
               "not a Keras functional model");
}

/* ---- nsfwjs's models against TensorFlow.js ---------------------------------------------- */

static void check_tfjs_parity(const char *arch_name, int size, int dim)
{
    char model[1024], path[1024];
    snprintf(model, sizeof model, NSFWJS_DIR "/%s/model.json", arch_name);
    if (access(model, R_OK) != 0) {
        test_skip("nsfwjs's models are not fetched (sh pipeline/nsfwjs.sh " NSFWJS_DIR ")");
    }
    const char *weights = test_path(arch_name);
    vtr_error err;
    vtr_tfjs_model m;
    CHECK_OK(vtr_tfjs_model_read(model, &m, &err));
    CHECK(!strcmp(vtr_keras_arch_detect(m.model_config), arch_name));
    float mean[3] = {0, 0, 0}, std[3] = {1, 1, 1};
    CHECK_OK(vtr_tfjs_model_save(&m, model, mean, std, weights, &err));
    vtr_tfjs_model_free(&m);
    vtr_backbone *b = NULL;
    CHECK_OK(vtr_backbone_load(weights, VTR_BACKBONE_ARCH_INFER, VTR_DEVICE_CPU, &b, &err));
    CHECK(!strcmp(vtr_backbone_arch_name(vtr_backbone_get_arch(b)), arch_name));
    CHECK_EQ_INT(vtr_backbone_dim(b), dim);

    /* the test images, pixel / 255, channels first */
    int n = 2;
    size_t plane = (size_t)size * size;
    float *x = malloc((size_t)n * 3 * plane * sizeof *x);
    CHECK(x);
    for (int i = 0; i < n; i++)
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < size; y++)
                for (int xx = 0; xx < size; xx++)
                    x[((size_t)i * 3 + c) * plane + (size_t)y * size + xx] =
                        (float)tfjs_image_pixel(i, y, xx, c) / 255.0f;
    int gh, gw;
    vtr_backbone_grid_size(b, size, size, &gh, &gw);
    size_t cells = (size_t)gh * gw;
    float *grid = malloc((size_t)n * cells * dim * sizeof *grid);
    float *pooled = malloc((size_t)n * dim * sizeof *pooled);
    CHECK(grid && pooled);
    CHECK_OK(vtr_backbone_forward(b, x, n, size, size, false, pooled, &err));
    CHECK_OK(vtr_backbone_forward(b, x, n, size, size, true, grid, &err));

    vtr_npy_file fp, fc;
    snprintf(path, sizeof path, TFJS_FIXTURES "/%s_pooled.npy", arch_name);
    const float *want_pooled = load_npy(path, 2, &fp);
    snprintf(path, sizeof path, TFJS_FIXTURES "/%s_grid_corner.npy", arch_name);
    const float *want_corner = load_npy(path, 3, &fc);
    CHECK_EQ_INT(fp.tensor.shape[1], dim);
    /* the corner cells (0,0), (0,W-1), (H-1,0), (H-1,W-1) of each image */
    float *corner = malloc((size_t)n * 4 * dim * sizeof *corner);
    CHECK(corner);
    size_t at[4] = {0, (size_t)gw - 1, (size_t)(gh - 1) * gw, cells - 1};
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 4; k++)
            memcpy(corner + ((size_t)i * 4 + k) * dim, grid + ((size_t)i * cells + at[k]) * dim,
                   (size_t)dim * sizeof *corner);
    double e_pool = test_rel_error(pooled, want_pooled, (size_t)n * dim);
    double e_corner = test_rel_error(corner, want_corner, (size_t)n * 4 * dim);
    printf("    %s %dx%d against TensorFlow.js: relative error pooled %.2e, corners %.2e\n",
           arch_name, size, size, e_pool, e_corner);
    CHECK_MSG(e_pool < 1e-4 && e_corner < 1e-4, "%s: errors %g, %g", arch_name, e_pool, e_corner);
    free(x), free(grid), free(pooled), free(corner);
    vtr_npy_close(&fp), vtr_npy_close(&fc);
    vtr_backbone_free(b);
}

TEST(mobilenet_v2_matches_tfjs) { check_tfjs_parity("mobilenet_v2", 224, 1280); }
TEST(inception_v3_matches_tfjs) { check_tfjs_parity("inception_v3", 299, 2048); }
