/* Checkpoints in safetensors; the format is in checkpoint.h and docs/checkpoint.md. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include "checkpoint.h"
#include "lib/version.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OPT_PREFIX "optimizer."
#define OPT_EXP_AVG "optimizer.exp_avg."
#define OPT_EXP_AVG_SQ "optimizer.exp_avg_sq."
#define SHOWN_MAX 96 /* bytes of a name from a file shown in a message */

static const char *const reserved_keys[] = {
    "format", "version", "code_version", "optimizer", "optimizer_step",
    "step",   "epoch",   "iteration",    "rng",       "config",
};

static bool same_shape(int ndim_a, const int64_t *a, int ndim_b, const int64_t *b)
{
    if (ndim_a != ndim_b)
        return false;
    for (int d = 0; d < ndim_a; d++)
        if (a[d] != b[d])
            return false;
    return true;
}

static const char *shown(const char *s, char *buf)
{
    return vtr_printable(s, strlen(s), buf, SHOWN_MAX);
}

/* A non-empty decimal integer in [0, INT64_MAX], nothing else. */
static bool parse_count(const char *s, int64_t *out)
{
    if (!s || !*s)
        return false;
    int64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9' || v > (INT64_MAX - (*p - '0')) / 10)
            return false;
        v = v * 10 + (*p - '0');
    }
    *out = v;
    return true;
}

/* 1 to 16 hex digits. */
static bool parse_hex64(const char *s, uint64_t *out)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > 16)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return false;
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return true;
}

/* ---- saving ---- */

static json_t *rng_json(const vtr_rng *rng)
{
    char seed[17], stream[17], counter[17];
    snprintf(seed, sizeof seed, "%016" PRIx64, rng->seed);
    snprintf(stream, sizeof stream, "%016" PRIx64, rng->stream);
    snprintf(counter, sizeof counter, "%016" PRIx64, rng->counter);
    return json_pack("{s:s, s:s, s:s, s:i}", "seed", seed, "stream", stream, "counter", counter,
                     "used", (int)rng->used);
}

static int set_string(json_t *obj, const char *key, const char *value)
{
    return json_object_set_new(obj, key, json_string(value));
}

static int set_count(json_t *obj, const char *key, int64_t value)
{
    char text[24];
    snprintf(text, sizeof text, "%" PRId64, value);
    return set_string(obj, key, text);
}

static vtr_status check_state(const char *path, const vtr_checkpoint_state *state,
                              vtr_error *err)
{
    char a[SHOWN_MAX];
    if (state->step < 0 || state->epoch < 0 || state->iteration < 0)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: negative step, epoch or iteration", path);
    for (size_t i = 0; i < state->rng_count; i++) {
        const char *name = state->rngs[i].name;
        if (!name || !*name || !state->rngs[i].rng)
            return vtr_fail(err, VTR_ERR_INVALID, "%s: rng %zu has no name or state", path, i);
        for (size_t j = 0; j < i; j++)
            if (strcmp(state->rngs[j].name, name) == 0)
                return vtr_fail(err, VTR_ERR_INVALID, "%s: rng '%s' registered twice", path,
                                shown(name, a));
    }
    for (size_t i = 0; i < state->extra_count; i++) {
        const char *key = state->extra[i].key;
        if (!key || !*key || !state->extra[i].value)
            return vtr_fail(err, VTR_ERR_INVALID, "%s: extra metadata %zu has no key or value",
                            path, i);
        for (size_t r = 0; r < sizeof reserved_keys / sizeof reserved_keys[0]; r++)
            if (strcmp(key, reserved_keys[r]) == 0)
                return vtr_fail(err, VTR_ERR_INVALID, "%s: extra metadata key '%s' is reserved",
                                path, key);
        for (size_t j = 0; j < i; j++)
            if (strcmp(state->extra[j].key, key) == 0)
                return vtr_fail(err, VTR_ERR_INVALID, "%s: extra metadata key '%s' given twice",
                                path, shown(key, a));
    }
    return VTR_OK;
}

/* The "__metadata__" object, keys in a fixed order. */
static vtr_status build_metadata(const char *path, const vtr_optimizer *opt,
                                 const vtr_checkpoint_state *state, json_t **out,
                                 vtr_error *err)
{
    json_t *meta = json_object(), *rngs = NULL;
    char *rng_text = NULL;
    const char *version = state && state->code_version ? state->code_version : vtr_version;
    int bad = !meta || set_string(meta, "format", VTR_CHECKPOINT_FORMAT) ||
              set_string(meta, "version", VTR_CHECKPOINT_VERSION) ||
              set_string(meta, "code_version", version);
    if (!bad && opt)
        bad = set_string(meta, "optimizer", vtr_optim_kind_name(opt->hp.kind)) ||
              set_count(meta, "optimizer_step", opt->step);
    if (!bad && state) {
        bad = set_count(meta, "step", state->step) || set_count(meta, "epoch", state->epoch) ||
              set_count(meta, "iteration", state->iteration) || !(rngs = json_object());
        for (size_t i = 0; !bad && i < state->rng_count; i++)
            bad = json_object_set_new(rngs, state->rngs[i].name, rng_json(state->rngs[i].rng));
        bad = bad || !(rng_text = json_dumps(rngs, JSON_COMPACT)) ||
              set_string(meta, "rng", rng_text) ||
              (state->config && set_string(meta, "config", state->config));
        for (size_t i = 0; !bad && i < state->extra_count; i++)
            bad = set_string(meta, state->extra[i].key, state->extra[i].value);
    }
    free(rng_text);
    json_decref(rngs);
    if (bad) {
        json_decref(meta);
        /* json_string refuses invalid UTF-8, the only failure besides memory */
        return vtr_fail(err, VTR_ERR_INVALID, "%s: metadata is not valid UTF-8 or memory ran "
                        "out", path);
    }
    *out = meta;
    return VTR_OK;
}

vtr_status vtr_checkpoint_save(const char *path, const vtr_param_set *ps,
                               const vtr_optimizer *opt, const vtr_checkpoint_state *state,
                               vtr_error *err)
{
    const char **names = NULL;
    vtr_tensor *tensors = NULL;
    char **owned = NULL;
    json_t *meta = NULL;
    size_t n_owned = 0, count = 0;
    vtr_status st = VTR_OK;
    char a[SHOWN_MAX];

    if (!ps->finalized)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: the parameter set is not finalized", path);
    size_t trainable = 0;
    for (size_t i = 0; i < ps->count; i++) {
        if (strncmp(ps->entries[i].name, OPT_PREFIX, strlen(OPT_PREFIX)) == 0)
            return vtr_fail(err, VTR_ERR_INVALID, "%s: parameter name '%s' uses the reserved "
                            "prefix '" OPT_PREFIX "'", path, shown(ps->entries[i].name, a));
        trainable += ps->entries[i].trainable;
    }
    if (opt && opt->n != ps->n_trainable)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: the optimizer holds state for %zu values, "
                        "the parameter set has %zu trainable", path, opt->n, ps->n_trainable);
    if (state && (st = check_state(path, state, err)) != VTR_OK)
        return st;

    size_t total = ps->count + (opt ? 2 * trainable : 0);
    names = calloc(total ? total : 1, sizeof *names);
    tensors = calloc(total ? total : 1, sizeof *tensors);
    owned = calloc(total ? total : 1, sizeof *owned);
    if (!names || !tensors || !owned) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", path);
        goto end;
    }
    for (size_t i = 0; i < ps->count; i++) {
        names[count] = ps->entries[i].name;
        tensors[count++] = vtr_param_set_tensor(ps, i);
    }
    for (int moment = 0; opt && moment < 2; moment++) {
        const char *prefix = moment == 0 ? OPT_EXP_AVG : OPT_EXP_AVG_SQ;
        float *state_buf = moment == 0 ? opt->exp_avg : opt->exp_avg_sq;
        for (size_t i = 0; i < ps->count; i++) {
            const vtr_param_entry *e = &ps->entries[i];
            if (!e->trainable)
                continue;
            size_t len = strlen(prefix) + strlen(e->name) + 1;
            if (!(owned[n_owned] = malloc(len))) {
                st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", path);
                goto end;
            }
            snprintf(owned[n_owned], len, "%s%s", prefix, e->name);
            names[count] = owned[n_owned++];
            tensors[count] = vtr_param_set_tensor(ps, i);
            tensors[count++].data = state_buf + e->offset;
        }
    }
    if ((st = build_metadata(path, opt, state, &meta, err)) != VTR_OK)
        goto end;
    st = vtr_safetensors_save(path, count, names, tensors, meta, err);
end:
    json_decref(meta);
    for (size_t i = 0; owned && i < n_owned; i++)
        free(owned[i]);
    free(owned);
    free(names);
    free(tensors);
    return st;
}

/* ---- loading ---- */

vtr_status vtr_checkpoint_open(const char *path, unsigned flags, vtr_checkpoint *ck,
                               vtr_error *err)
{
    char a[SHOWN_MAX];
    memset(ck, 0, sizeof *ck);
    vtr_status st = vtr_safetensors_open(path, &ck->st, err);
    if (st != VTR_OK)
        return st;
    const char *format = vtr_safetensors_meta(&ck->st, "format");
    if (!format || strcmp(format, VTR_CHECKPOINT_FORMAT) != 0) {
        if (!(flags & VTR_CHECKPOINT_ALLOW_PLAIN)) {
            if (format)
                st = vtr_fail(err, VTR_ERR_FORMAT, "%s: not a vtr checkpoint (format '%s')",
                              path, shown(format, a));
            else
                st = vtr_fail(err, VTR_ERR_FORMAT, "%s: not a vtr checkpoint (no \"format\" "
                              "metadata; a converted state_dict must be opened as plain)", path);
            goto fail;
        }
        ck->plain = true;
    } else {
        const char *version = vtr_safetensors_meta(&ck->st, "version");
        if (!version || strcmp(version, VTR_CHECKPOINT_VERSION) != 0) {
            st = vtr_fail(err, VTR_ERR_UNSUPPORTED, "%s: checkpoint version '%s' is not "
                          "supported (this build reads version " VTR_CHECKPOINT_VERSION ")",
                          path, version ? shown(version, a) : "(none)");
            goto fail;
        }
    }
    if (!(ck->path = strdup(path))) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    return VTR_OK;
fail:
    vtr_checkpoint_close(ck);
    return st;
}

const char *vtr_checkpoint_meta(const vtr_checkpoint *ck, const char *key)
{
    return vtr_safetensors_meta(&ck->st, key);
}

void vtr_checkpoint_close(vtr_checkpoint *ck)
{
    vtr_safetensors_close(&ck->st);
    free(ck->path);
    memset(ck, 0, sizeof *ck);
}

/* The tensor `name` with the entry's shape and an accepted dtype, or an error. */
static vtr_status find_matching(const vtr_checkpoint *ck, const char *name,
                                const vtr_param_entry *e, bool allow_half,
                                const vtr_tensor **out, vtr_error *err)
{
    char a[SHOWN_MAX], have[128], want[128];
    const vtr_tensor *t = vtr_safetensors_find(&ck->st, name);
    if (!t)
        return vtr_fail(err, VTR_ERR_NOT_FOUND, "%s: tensor '%s' is missing", ck->path,
                        shown(name, a));
    bool dtype_ok = t->dtype == e->dtype ||
                    (allow_half && e->dtype == VTR_F32 &&
                     (t->dtype == VTR_F16 || t->dtype == VTR_BF16));
    if (!dtype_ok)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: tensor '%s' is %s, the model expects %s",
                        ck->path, shown(name, a), vtr_dtype_name(t->dtype),
                        vtr_dtype_name(e->dtype));
    if (!same_shape(t->ndim, t->shape, e->ndim, e->shape))
        return vtr_fail(err, VTR_ERR_INVALID, "%s: tensor '%s' has shape %s, the model expects %s",
                        ck->path, shown(name, a), vtr_shape_str(t->ndim, t->shape, have,
                                                                sizeof have),
                        vtr_shape_str(e->ndim, e->shape, want, sizeof want));
    *out = t;
    return VTR_OK;
}

/* Copies numel elements of t (which may be unaligned) to dst as float32. */
static void copy_as_float(float *dst, const vtr_tensor *t, size_t numel)
{
    const unsigned char *src = t->data;
    if (t->dtype == VTR_F32) {
        memcpy(dst, src, numel * sizeof *dst);
        return;
    }
    for (size_t i = 0; i < numel; i++) {
        uint16_t h;
        memcpy(&h, src + 2 * i, sizeof h);
        dst[i] = t->dtype == VTR_F16 ? vtr_half_to_float(h) : vtr_bf16_to_float(h);
    }
}

vtr_status vtr_checkpoint_check_params(const vtr_checkpoint *ck, const vtr_param_set *ps,
                                       unsigned flags, vtr_error *err)
{
    char a[SHOWN_MAX];
    vtr_status st;
    const vtr_tensor *t;
    for (size_t i = 0; i < ps->count; i++) {
        if ((st = find_matching(ck, ps->entries[i].name, &ps->entries[i], true, &t, err)) !=
            VTR_OK)
            return st;
        int64_t bad = vtr_tensor_first_non_finite(t);
        if (bad >= 0)
            return vtr_fail(err, VTR_ERR_INVALID, "%s: tensor '%s' has a non-finite value "
                            "(element %lld)", ck->path, shown(ps->entries[i].name, a),
                            (long long)bad);
    }
    if (!(flags & VTR_CHECKPOINT_ALLOW_EXTRA)) {
        size_t extras = 0;
        const char *first = NULL;
        for (size_t j = 0; j < ck->st.count; j++) {
            const char *name = ck->st.entries[j].name;
            if (!ck->plain && strncmp(name, OPT_PREFIX, strlen(OPT_PREFIX)) == 0)
                continue;
            if (!vtr_param_set_find(ps, name) && extras++ == 0)
                first = name;
        }
        if (extras == 1)
            return vtr_fail(err, VTR_ERR_INVALID, "%s: unexpected tensor '%s' not in the model",
                            ck->path, shown(first, a));
        if (extras > 1)
            return vtr_fail(err, VTR_ERR_INVALID, "%s: unexpected tensor '%s' (and %zu more) "
                            "not in the model", ck->path, shown(first, a), extras - 1);
    }
    return VTR_OK;
}

vtr_status vtr_checkpoint_load_params(const vtr_checkpoint *ck, vtr_param_set *ps,
                                      unsigned flags, vtr_error *err)
{
    if (!ps->finalized)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: the parameter set is not finalized",
                        ck->path);
    vtr_status st = vtr_checkpoint_check_params(ck, ps, flags, err);
    if (st != VTR_OK)
        return st;
    const vtr_tensor *t;
    for (size_t i = 0; i < ps->count; i++) {
        const vtr_param_entry *e = &ps->entries[i];
        t = vtr_safetensors_find(&ck->st, e->name);
        if (e->dtype == VTR_I64)
            memcpy(ps->idata + e->offset, t->data, e->numel * sizeof *ps->idata);
        else
            copy_as_float(ps->data + e->offset, t, e->numel);
    }
    return VTR_OK;
}

/* The name of entry e's state tensor for moment 0 (exp_avg) or 1 (exp_avg_sq). */
static void state_name(char *buf, size_t size, int moment, const char *name)
{
    snprintf(buf, size, "%s%s", moment == 0 ? OPT_EXP_AVG : OPT_EXP_AVG_SQ, name);
}

vtr_status vtr_checkpoint_load_optimizer(const vtr_checkpoint *ck, const vtr_param_set *ps,
                                         vtr_optimizer *opt, vtr_error *err)
{
    char a[SHOWN_MAX], name[VTR_PARAM_NAME_MAX + 32];
    vtr_status st;
    const char *kind = ck->plain ? NULL : vtr_checkpoint_meta(ck, "optimizer");
    if (!kind)
        return vtr_fail(err, VTR_ERR_NOT_FOUND, "%s: no optimizer state (a model-only "
                        "checkpoint)", ck->path);
    if (strcmp(kind, vtr_optim_kind_name(opt->hp.kind)) != 0)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: the optimizer state is %s's, this run uses %s",
                        ck->path, shown(kind, a), vtr_optim_kind_name(opt->hp.kind));
    int64_t step;
    if (!parse_count(vtr_checkpoint_meta(ck, "optimizer_step"), &step))
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: metadata optimizer_step is missing or not a "
                        "count", ck->path);
    if (!ps->finalized || opt->n != ps->n_trainable)
        return vtr_fail(err, VTR_ERR_INVALID, "%s: the optimizer was not made for this "
                        "parameter set", ck->path);
    const vtr_tensor *t;
    for (size_t i = 0; i < ps->count; i++) {
        const vtr_param_entry *e = &ps->entries[i];
        for (int moment = 0; e->trainable && moment < 2; moment++) {
            state_name(name, sizeof name, moment, e->name);
            if ((st = find_matching(ck, name, e, false, &t, err)) != VTR_OK)
                return st;
        }
    }
    for (size_t j = 0; j < ck->st.count; j++) {
        const char *n = ck->st.entries[j].name, *param = NULL;
        if (strncmp(n, OPT_EXP_AVG, strlen(OPT_EXP_AVG)) == 0)
            param = n + strlen(OPT_EXP_AVG);
        else if (strncmp(n, OPT_EXP_AVG_SQ, strlen(OPT_EXP_AVG_SQ)) == 0)
            param = n + strlen(OPT_EXP_AVG_SQ);
        else if (strncmp(n, OPT_PREFIX, strlen(OPT_PREFIX)) != 0)
            continue;
        const vtr_param_entry *e = param ? vtr_param_set_find(ps, param) : NULL;
        if (!e || !e->trainable)
            return vtr_fail(err, VTR_ERR_INVALID, "%s: unexpected optimizer tensor '%s' (no "
                            "such trainable parameter)", ck->path, shown(n, a));
    }
    for (size_t i = 0; i < ps->count; i++) {
        const vtr_param_entry *e = &ps->entries[i];
        for (int moment = 0; e->trainable && moment < 2; moment++) {
            state_name(name, sizeof name, moment, e->name);
            t = vtr_safetensors_find(&ck->st, name);
            copy_as_float((moment == 0 ? opt->exp_avg : opt->exp_avg_sq) + e->offset, t,
                          e->numel);
        }
    }
    opt->step = step;
    return VTR_OK;
}

/* One saved RNG state (an object of rng_json's form) into *out. */
static bool parse_rng(const json_t *obj, vtr_rng *out)
{
    json_t *used = json_object_get(obj, "used");
    vtr_rng r;
    memset(&r, 0, sizeof r);
    if (!json_is_object(obj) || json_object_size(obj) != 4 || !json_is_integer(used) ||
        !parse_hex64(json_string_value(json_object_get(obj, "seed")), &r.seed) ||
        !parse_hex64(json_string_value(json_object_get(obj, "stream")), &r.stream) ||
        !parse_hex64(json_string_value(json_object_get(obj, "counter")), &r.counter))
        return false;
    json_int_t u = json_integer_value(used);
    if (u < 0 || u > 4 || (u < 4 && r.counter == 0))
        return false;
    r.used = (uint32_t)u;
    /* the block in use is the last one generated, counter - 1 (none before the first) */
    if (r.counter > 0)
        vtr_philox_block(r.seed, r.stream, r.counter - 1, r.block);
    *out = r;
    return true;
}

vtr_status vtr_checkpoint_load_state(const vtr_checkpoint *ck, vtr_checkpoint_state *state,
                                     vtr_error *err)
{
    char a[SHOWN_MAX];
    json_t *rngs = NULL;
    vtr_rng *restored = NULL;
    vtr_status st = VTR_OK;
    const char *step_text = ck->plain ? NULL : vtr_checkpoint_meta(ck, "step");
    if (!step_text)
        return vtr_fail(err, VTR_ERR_NOT_FOUND, "%s: no training state (a model-only "
                        "checkpoint)", ck->path);
    int64_t step, epoch, iteration;
    if (!parse_count(step_text, &step) ||
        !parse_count(vtr_checkpoint_meta(ck, "epoch"), &epoch) ||
        !parse_count(vtr_checkpoint_meta(ck, "iteration"), &iteration))
        return vtr_fail(err, VTR_ERR_FORMAT, "%s: metadata step, epoch or iteration is missing "
                        "or not a count", ck->path);
    const char *rng_text = vtr_checkpoint_meta(ck, "rng");
    if (!rng_text || !(rngs = json_loads(rng_text, JSON_REJECT_DUPLICATES, NULL)) ||
        !json_is_object(rngs)) {
        st = vtr_fail(err, VTR_ERR_FORMAT, "%s: metadata rng is missing or not a JSON object",
                      ck->path);
        goto end;
    }
    if (state->rng_count &&
        !(restored = calloc(state->rng_count, sizeof *restored))) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", ck->path);
        goto end;
    }
    for (size_t i = 0; i < state->rng_count; i++) {
        const char *name = state->rngs[i].name;
        json_t *saved = json_object_get(rngs, name);
        if (!saved) {
            st = vtr_fail(err, VTR_ERR_NOT_FOUND, "%s: no saved state for rng '%s'", ck->path,
                          shown(name, a));
            goto end;
        }
        if (!parse_rng(saved, &restored[i])) {
            st = vtr_fail(err, VTR_ERR_FORMAT, "%s: the saved state of rng '%s' is malformed",
                          ck->path, shown(name, a));
            goto end;
        }
    }
    const char *key;
    json_t *value;
    json_object_foreach(rngs, key, value)
    {
        size_t i = 0;
        while (i < state->rng_count && strcmp(state->rngs[i].name, key) != 0)
            i++;
        if (i == state->rng_count) {
            st = vtr_fail(err, VTR_ERR_INVALID, "%s: the checkpoint has rng '%s', which this "
                          "run does not register", ck->path, shown(key, a));
            goto end;
        }
    }
    for (size_t i = 0; i < state->rng_count; i++)
        *state->rngs[i].rng = restored[i];
    state->step = step;
    state->epoch = epoch;
    state->iteration = iteration;
    state->config = vtr_checkpoint_meta(ck, "config");
    state->code_version = vtr_checkpoint_meta(ck, "code_version");
end:
    free(restored);
    json_decref(rngs);
    return st;
}
