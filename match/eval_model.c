/* A trained model opened for evaluation (eval_model.h). */
#define _POSIX_C_SOURCE 200809L
#include "eval_model.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/catalog.h"

void vtr_eval_model_close(vtr_eval_model *m)
{
    if (!m)
        return;
    vtr_vse_model_free(&m->model);
    vtr_split_free(&m->split);
    vtr_feature_store_reader_close(m->store);
    vtr_trained_model_close(&m->trained);
    memset(m, 0, sizeof *m);
}

/* A data path from the checkpoint's own config (key, not overridden) that is not there:
 * when it is relative, says where it is taken from, since vtr-eval often runs elsewhere
 * than vtr-train did. */
static vtr_status explain_missing(vtr_status st, const vtr_eval_source *src, const char *key,
                                  const char *path, const char *option, vtr_error *err)
{
    if (!err || !path || path[0] == '/' || access(path, F_OK) == 0 || src->config_path)
        return st;
    size_t n = strlen(key);
    for (int i = 0; i < src->n_sets; i++)
        if (strncmp(src->sets[i], key, n) == 0 && src->sets[i][n] == '=')
            return st;
    char msg[VTR_ERROR_MSG_MAX];
    snprintf(msg, sizeof msg, "%s", err->msg);
    return vtr_fail(err, st, "%s; %s is relative to the directory vtr-train ran in (%s "
                             "gives another)", msg, path, option);
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
    if ((st = vtr_catalog_open_existing(o->catalog, &cat, err)))
        st = explain_missing(st, src, "data.catalog", o->catalog, "--catalog", err);
    else if ((st = vtr_feature_store_reader_open(o->features, &m.store, err)))
        st = explain_missing(st, src, "data.features", o->features, "--store", err);
    if (st ||
        (st = vtr_split_load(cat, o->dataset, src->split, m.store, o->max_frames, &m.split,
                             err)) ||
        (st = vtr_split_encode_captions(&m.split, m.trained.vocab, o->tokenizer, err))) {
        vtr_error_context(err, "%s", ckpt);
        goto fail;
    }
    if ((st = vtr_trained_model_build(&m.trained, src->batch, m.split.max_frames,
                                      m.split.max_words, &m.model, err)))
        goto fail;
    vtr_catalog_close(cat);
    *out = m;
    return VTR_OK;
fail:
    vtr_catalog_close(cat);
    vtr_eval_model_close(&m);
    return st;
}
