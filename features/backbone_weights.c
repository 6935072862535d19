/* Reading a backbone's weights by name (features/backbone_weights.h). */
#include "backbone_weights.h"

#include <stdlib.h>
#include <string.h>

#include "lib/tensor.h"

vtr_status vtr_backbone_weights_open(vtr_backbone_weights *w, const vtr_safetensors *st,
                                     const char *what, const char *arch, vtr_error *err)
{
    *w = (vtr_backbone_weights){.st = st, .what = what, .arch = arch};
    if (!(w->used = calloc(st->count ? st->count : 1, sizeof *w->used)))
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    return VTR_OK;
}

void vtr_backbone_weights_close(vtr_backbone_weights *w)
{
    free(w->used);
    w->used = NULL;
}

static int entry_cmp(const void *key, const void *elem)
{
    return strcmp(key, ((const vtr_safetensors_entry *)elem)->name);
}

static const vtr_safetensors_entry *find(const vtr_backbone_weights *w, const char *name)
{
    return bsearch(name, w->st->entries, w->st->count, sizeof *w->st->entries, entry_cmp);
}

bool vtr_backbone_weights_has(const vtr_backbone_weights *w, const char *name)
{
    return find(w, name) != NULL;
}

vtr_status vtr_backbone_weights_read(vtr_backbone_weights *w, const char *name, int ndim,
                                     const int64_t *shape, float **out, vtr_error *err)
{
    *out = NULL;
    const vtr_safetensors_entry *e = find(w, name);
    if (!e)
        return vtr_fail(err, VTR_ERR_NOT_FOUND, "weights %s: missing tensor '%s' (%s)", w->what,
                        name, w->arch);
    w->used[e - w->st->entries] = true;
    const vtr_tensor *t = &e->tensor;
    char got[96], want[96];
    if (t->ndim != ndim || memcmp(t->shape, shape, (size_t)ndim * sizeof *shape) != 0)
        return vtr_fail(err, VTR_ERR_FORMAT, "weights %s: tensor '%s' has shape %s, %s expects %s",
                        w->what, name, vtr_shape_str(t->ndim, t->shape, got, sizeof got),
                        w->arch, vtr_shape_str(ndim, shape, want, sizeof want));
    if (t->dtype != VTR_F32 && t->dtype != VTR_F16 && t->dtype != VTR_BF16)
        return vtr_fail(err, VTR_ERR_FORMAT, "weights %s: tensor '%s' is %s, not float32, "
                        "float16 or bfloat16", w->what, name, vtr_dtype_name(t->dtype));
    size_t n = (size_t)vtr_tensor_numel(t);
    float *f = malloc((n ? n : 1) * sizeof *f);
    if (!f)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for tensor '%s'", name);
    const unsigned char *src = t->data;
    if (t->dtype == VTR_F32) {
        memcpy(f, src, n * sizeof *f); /* the data may be unaligned (lib/safetensors.h) */
    } else {
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, src + 2 * i, 2);
            f[i] = t->dtype == VTR_F16 ? vtr_half_to_float(h) : vtr_bf16_to_float(h);
        }
    }
    vtr_tensor view = {.dtype = VTR_F32, .ndim = 1, .shape = {(int64_t)n}, .data = f};
    int64_t bad = vtr_tensor_first_non_finite(&view);
    if (bad >= 0) {
        free(f);
        return vtr_fail(err, VTR_ERR_FORMAT, "weights %s: tensor '%s' has a non-finite value "
                        "(element %lld)", w->what, name, (long long)bad);
    }
    *out = f;
    return VTR_OK;
}

vtr_status vtr_backbone_weights_check_all_used(const vtr_backbone_weights *w,
                                               bool (*ignore)(void *ctx, const char *name),
                                               void *ctx, vtr_error *err)
{
    for (size_t i = 0; i < w->st->count; i++) {
        const char *name = w->st->entries[i].name;
        if (w->used[i] || ignore(ctx, name))
            continue;
        char shown[96];
        return vtr_fail(err, VTR_ERR_FORMAT, "weights %s: unexpected tensor '%s' for %s "
                        "(weights of another architecture?)", w->what,
                        vtr_printable(name, strlen(name), shown, sizeof shown), w->arch);
    }
    return VTR_OK;
}
