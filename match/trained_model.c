/* A trained model as its checkpoint names it (trained_model.h). */
#define _POSIX_C_SOURCE 200809L
#include "trained_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/hash.h"
#include "match/run_dir.h"
#include "match/train_data.h"

void vtr_trained_model_close(vtr_trained_model *t)
{
    if (!t)
        return;
    vtr_vocab_free(t->vocab);
    free(t->vocab_path);
    vtr_config_free(t->cfg);
    vtr_checkpoint_close(&t->ck);
    memset(t, 0, sizeof *t);
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

vtr_status vtr_trained_model_open_config(const char *ckpt, const char *config_path,
                                         const char *const *sets, int n_sets,
                                         vtr_trained_model *out, vtr_error *err)
{
    vtr_trained_model t;
    vtr_status st;
    memset(&t, 0, sizeof t);
    memset(out, 0, sizeof *out);
    if ((st = vtr_checkpoint_open(ckpt, VTR_CHECKPOINT_ALLOW_PLAIN, &t.ck, err)))
        return st;
    const char *text = vtr_checkpoint_meta(&t.ck, "config");
    if (config_path) {
        if ((st = vtr_train_config_new(&t.cfg, err)) ||
            (st = vtr_config_load_file(t.cfg, config_path, err)))
            goto fail;
    } else if (text) {
        if ((st = vtr_train_config_from_string(ckpt, text, &t.cfg, err)))
            goto fail;
    } else {
        st = vtr_fail(err, VTR_ERR_INVALID, "carries no config: name the training config");
        goto fail;
    }
    for (int i = 0; i < n_sets; i++)
        if ((st = vtr_config_set(t.cfg, sets[i], err)))
            goto fail;
    if ((st = vtr_train_options_from_config(t.cfg, &t.o, err)))
        goto fail;
    *out = t;
    return VTR_OK;
fail:
    vtr_error_context(err, "%s", ckpt);
    vtr_trained_model_close(&t);
    return st;
}

vtr_status vtr_trained_model_open(const char *ckpt, const char *config_path,
                                  const char *const *sets, int n_sets, const char *vocab_path,
                                  vtr_trained_model *out, vtr_error *err)
{
    vtr_trained_model t;
    char *beside = NULL;
    vtr_status st = vtr_trained_model_open_config(ckpt, config_path, sets, n_sets, &t, err);
    memset(out, 0, sizeof *out);
    if (st != VTR_OK)
        return st;
    if (!vocab_path && (beside = vocab_beside(ckpt)))
        vocab_path = beside;
    if (!vocab_path && t.o.vocab[0])
        vocab_path = t.o.vocab;
    if (!vocab_path) {
        st = vtr_fail(err, VTR_ERR_INVALID, "no vocabulary: no %s beside it and no data.vocab "
                      "in its config", VTR_RUN_VOCAB);
        goto fail;
    }
    const char *want = vtr_checkpoint_meta(&t.ck, "vocab_sha256");
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
    if ((st = vtr_run_vocab_load(vocab_path, &t.vocab, err)))
        goto fail;
    if (!(t.vocab_path = strdup(vocab_path))) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto fail;
    }
    t.model = vtr_train_model_config(&t.o, t.vocab);
    free(beside);
    *out = t;
    return VTR_OK;
fail:
    vtr_error_context(err, "%s", ckpt);
    free(beside);
    vtr_trained_model_close(&t);
    return st;
}

vtr_status vtr_trained_model_build_run(const vtr_trained_model *t, vtr_device device,
                                       int max_batch, int max_frames, int max_words,
                                       vtr_run_model *m, vtr_error *err)
{
    /* the config against the tensors first: a config that disagrees with them must not
     * size the buffers (an embed_size of 1e11 would fail as "out of memory") */
    unsigned flags = t->ck.plain ? VTR_CHECKPOINT_ALLOW_EXTRA : 0;
    vtr_param_set spec;
    vtr_param_set_init(&spec);
    vtr_status st = vtr_run_model_add_params(&spec, &t->o, t->vocab, err);
    if (st == VTR_OK && (st = vtr_checkpoint_check_params(&t->ck, &spec, flags, err)))
        vtr_error_context(err, "its config does not match its tensors");
    vtr_param_set_free(&spec);
    memset(m, 0, sizeof *m);
    if (st != VTR_OK)
        return st;
    st = vtr_run_model_init(m, &t->o, t->vocab, device, max_batch, max_frames, max_words, err);
    if (st != VTR_OK) {
        vtr_error_context(err, "%s", t->ck.path);
        return st;
    }
    st = vtr_checkpoint_load_params(&t->ck, vtr_run_model_params(m), flags, err);
    if (st == VTR_OK)
        st = vtr_run_model_params_to_device(m, err);
    if (st != VTR_OK)
        vtr_run_model_free(m);
    return st;
}
