/* A trained model opened for evaluation (eval_model.h). */
#define _POSIX_C_SOURCE 200809L
#include "eval_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/catalog.h"
#include "lib/checkpoint.h"
#include "lib/hash.h"
#include "match/trainer.h"

void vtr_eval_model_close(vtr_eval_model *m)
{
    if (!m)
        return;
    vtr_vse_model_free(&m->model);
    vtr_split_free(&m->split);
    vtr_vocab_free(m->vocab);
    free(m->vocab_path);
    vtr_feature_store_reader_close(m->store);
    vtr_config_free(m->cfg);
    memset(m, 0, sizeof *m);
}

/* "DIR/vocab.json" for the checkpoint DIR/x.safetensors when it is readable, else NULL. */
static char *vocab_beside(const char *ckpt)
{
    const char *slash = strrchr(ckpt, '/');
    size_t n = (slash ? (size_t)(slash - ckpt) : 1) + strlen(VTR_RUN_VOCAB) + 2;
    char *p = malloc(n);
    if (!p)
        return NULL;
    if (slash)
        snprintf(p, n, "%.*s/%s", (int)(slash - ckpt), ckpt, VTR_RUN_VOCAB);
    else
        snprintf(p, n, "./%s", VTR_RUN_VOCAB);
    if (access(p, R_OK) != 0) {
        free(p);
        return NULL;
    }
    return p;
}

vtr_status vtr_eval_model_open(const char *ckpt, const vtr_eval_source *src, vtr_eval_model *out,
                               vtr_error *err)
{
    vtr_eval_model m;
    vtr_checkpoint ck = {0};
    vtr_catalog *cat = NULL;
    char *beside = NULL;
    vtr_status st;
    memset(&m, 0, sizeof m);
    memset(out, 0, sizeof *out);
    if ((st = vtr_checkpoint_open(ckpt, VTR_CHECKPOINT_ALLOW_PLAIN, &ck, err)))
        return st;
    const char *text = vtr_checkpoint_meta(&ck, "config");
    if (src->config_path) {
        if ((st = vtr_train_config_new(&m.cfg, err)) ||
            (st = vtr_config_load_file(m.cfg, src->config_path, err)))
            goto fail;
    } else if (text) {
        if ((st = vtr_train_config_from_string(ckpt, text, &m.cfg, err)))
            goto fail;
    } else {
        st = vtr_fail(err, VTR_ERR_INVALID, "carries no config: name the training config");
        goto fail;
    }
    for (int i = 0; i < src->n_sets; i++)
        if ((st = vtr_config_set(m.cfg, src->sets[i], err)))
            goto fail;
    if ((st = vtr_train_options_from_config(m.cfg, &m.o, err)))
        goto fail;

    const char *vocab_path = src->vocab_path;
    if (!vocab_path && (beside = vocab_beside(ckpt)))
        vocab_path = beside;
    if (!vocab_path && m.o.vocab[0])
        vocab_path = m.o.vocab;
    if (!vocab_path) {
        st = vtr_fail(err, VTR_ERR_INVALID, "no vocabulary: no %s beside it and no data.vocab "
                      "in its config", VTR_RUN_VOCAB);
        goto fail;
    }
    const char *want = vtr_checkpoint_meta(&ck, "vocab_sha256");
    char have[VTR_SHA256_HEX_SIZE];
    if (want) {
        if ((st = vtr_file_sha256(vocab_path, have, err)))
            goto fail;
        if (strcmp(want, have) != 0) {
            st = vtr_fail(err, VTR_ERR_INVALID, "%s is not the vocabulary it was trained with",
                          vocab_path);
            goto fail;
        }
    }
    if ((st = vtr_vocab_load_json(vocab_path, &m.vocab, err)))
        goto fail;
    if (!(m.vocab_path = strdup(vocab_path))) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto fail;
    }

    if ((st = vtr_catalog_open(m.o.catalog, &cat, err)) ||
        (st = vtr_feature_store_reader_open(m.o.features, &m.store, err)) ||
        (st = vtr_split_load(cat, m.o.dataset, src->split, m.store, m.o.max_frames, &m.split,
                             err)) ||
        (st = vtr_split_encode_captions(&m.split, m.vocab, m.o.tokenizer, err)))
        goto fail;

    vtr_vse_config mc = vtr_train_model_config(&m.o, m.vocab);
    if ((st = vtr_vse_model_init(&m.model, &mc, src->batch, m.split.max_frames,
                                 m.split.max_words, err)) ||
        (st = vtr_checkpoint_load_params(&ck, &m.model.params,
                                         ck.plain ? VTR_CHECKPOINT_ALLOW_EXTRA : 0, err)))
        goto fail;
    free(beside);
    vtr_catalog_close(cat);
    vtr_checkpoint_close(&ck);
    *out = m;
    return VTR_OK;
fail:
    vtr_error_context(err, "%s", ckpt);
    free(beside);
    vtr_catalog_close(cat);
    vtr_checkpoint_close(&ck);
    vtr_eval_model_close(&m);
    return st;
}
