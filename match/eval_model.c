/* A trained model opened for evaluation (eval_model.h). */
#define _POSIX_C_SOURCE 200809L
#include "eval_model.h"

#include <stdbool.h>
#include <string.h>

#include "lib/catalog.h"

void vtr_eval_model_close(vtr_eval_model *m)
{
    if (!m)
        return;
    vtr_run_model_free(&m->model);
    vtr_split_free(&m->split);
    vtr_feature_store_reader_close(m->store);
    vtr_trained_model_close(&m->trained);
    memset(m, 0, sizeof *m);
}

/* Whether the key's value comes from the caller (a "data.catalog=..." override, or a
 * config file given) rather than from the checkpoint's own config. */
static bool overridden(const vtr_eval_source *src, const char *key)
{
    size_t n = strlen(key);
    for (int i = 0; i < src->n_sets; i++)
        if (strncmp(src->sets[i], key, n) == 0 && src->sets[i][n] == '=')
            return true;
    return src->config_path != NULL;
}

/* The split's captions as the model reads them. */
static vtr_status encode(vtr_eval_model *m, vtr_catalog *cat, vtr_error *err)
{
    const vtr_train_options *o = &m->trained.o;
    if (o->kind == VTR_MODEL_VSE)
        return vtr_split_encode_captions(&m->split, m->trained.vocab, o->tokenizer, err);
    vtr_role_graph_shape shape = {.max_words = o->hgr_max_words,
                                  .num_verbs = o->hgr.num_verbs,
                                  .num_nouns = o->hgr.num_nouns,
                                  .eos_id = VTR_ROLE_GRAPH_EOS};
    return vtr_split_encode_graphs(&m->split, cat, o->dataset, m->trained.vocab, &shape, err);
}

vtr_status vtr_eval_model_open(const char *ckpt, const vtr_eval_source *src, vtr_eval_model *out,
                               vtr_error *err)
{
    vtr_eval_model m;
    vtr_catalog *cat = NULL;
    vtr_status st;
    memset(&m, 0, sizeof m);
    memset(out, 0, sizeof *out);
    if ((st = vtr_trained_model_open(ckpt, src->config_path, src->sets, src->n_sets,
                                     src->vocab_path, &m.trained, err)))
        return st;
    const vtr_train_options *o = &m.trained.o;
    /* a checkpoint's relative data paths are missing when run elsewhere than vtr-train */
    if ((st = vtr_train_options_check_data(o, err))) {
        vtr_error_context(err, "%s (give --catalog, --dataset, --store)", ckpt);
        goto fail;
    }
    if ((st = vtr_catalog_open_existing(o->catalog, &cat, err))) {
        if (!overridden(src, "data.catalog"))
            vtr_train_explain_data_path(o->catalog, "--catalog gives another", err);
    } else if ((st = vtr_feature_store_reader_open(o->features, &m.store, err))) {
        if (!overridden(src, "data.features"))
            vtr_train_explain_data_path(o->features, "--store gives another", err);
    }
    if (st ||
        (st = vtr_split_load(cat, o->dataset, src->split, m.store, o->max_frames, &m.split,
                             err)) ||
        (st = encode(&m, cat, err))) {
        vtr_error_context(err, "%s", ckpt);
        goto fail;
    }
    if ((st = vtr_trained_model_build_run(&m.trained, src->device, src->batch,
                                          m.split.max_frames, m.split.max_words, &m.model, err)))
        goto fail;
    vtr_catalog_close(cat);
    *out = m;
    return VTR_OK;
fail:
    vtr_catalog_close(cat);
    vtr_eval_model_close(&m);
    return st;
}
