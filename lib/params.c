/* Named parameter sets; the layout and contracts are in params.h. */
#include "params.h"

#include <stdlib.h>
#include <string.h>

void vtr_param_set_init(vtr_param_set *ps)
{
    memset(ps, 0, sizeof *ps);
}

const vtr_param_entry *vtr_param_set_find(const vtr_param_set *ps, const char *name)
{
    for (size_t i = 0; i < ps->count; i++)
        if (strcmp(ps->entries[i].name, name) == 0)
            return &ps->entries[i];
    return NULL;
}

vtr_status vtr_param_set_add(vtr_param_set *ps, const char *name, vtr_dtype dtype,
                             bool trainable, int ndim, const int64_t *shape, vtr_error *err)
{
    char shown[96];
    size_t len = name ? strlen(name) : 0;
    if (len == 0)
        return vtr_fail(err, VTR_ERR_INVALID, "parameter set: empty parameter name");
    vtr_printable(name, len, shown, sizeof shown);
    if (len > VTR_PARAM_NAME_MAX)
        return vtr_fail(err, VTR_ERR_INVALID, "parameter '%s': name longer than %d bytes",
                        shown, VTR_PARAM_NAME_MAX);
    if (ps->finalized)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "parameter '%s': the set is already finalized", shown);
    if (vtr_param_set_find(ps, name))
        return vtr_fail(err, VTR_ERR_INVALID, "parameter '%s' added twice", shown);
    if (dtype != VTR_F32 && dtype != VTR_I64)
        return vtr_fail(err, VTR_ERR_INVALID, "parameter '%s': dtype %s (only float32 and "
                        "int64 are supported)", shown,
                        (unsigned)dtype < VTR_DTYPE_COUNT ? vtr_dtype_name(dtype) : "?");
    if (trainable && dtype != VTR_F32)
        return vtr_fail(err, VTR_ERR_INVALID, "parameter '%s': an int64 entry cannot be "
                        "trainable", shown);
    if (ndim < 0 || ndim > VTR_MAX_DIMS || (ndim > 0 && !shape))
        return vtr_fail(err, VTR_ERR_INVALID, "parameter '%s': %d dimensions", shown, ndim);
    size_t nbytes;
    vtr_error shape_err;
    if (vtr_shape_nbytes(dtype, ndim, shape, SIZE_MAX / 4, &nbytes, &shape_err) != VTR_OK)
        return vtr_fail(err, VTR_ERR_INVALID, "parameter '%s': %s", shown, shape_err.msg);

    if (ps->count == ps->capacity) {
        size_t cap = ps->capacity ? 2 * ps->capacity : 16;
        vtr_param_entry *grown = realloc(ps->entries, cap * sizeof *grown);
        if (!grown)
            return vtr_fail(err, VTR_ERR_NOMEM, "parameter '%s': out of memory", shown);
        ps->entries = grown;
        ps->capacity = cap;
    }
    vtr_param_entry *e = &ps->entries[ps->count];
    memset(e, 0, sizeof *e);
    if (!(e->name = malloc(len + 1)))
        return vtr_fail(err, VTR_ERR_NOMEM, "parameter '%s': out of memory", shown);
    memcpy(e->name, name, len + 1);
    e->dtype = dtype;
    e->trainable = trainable;
    e->lr_scale = 1.0f;
    e->ndim = ndim;
    for (int d = 0; d < ndim; d++)
        e->shape[d] = shape[d];
    e->numel = nbytes / vtr_dtype_size(dtype);
    ps->count++;
    return VTR_OK;
}

vtr_status vtr_param_set_finalize(vtr_param_set *ps, vtr_error *err)
{
    if (ps->finalized)
        return vtr_fail(err, VTR_ERR_INVALID, "parameter set: already finalized");
    size_t n_trainable = 0, n_data = 0, n_idata = 0;
    for (size_t i = 0; i < ps->count; i++) {
        vtr_param_entry *e = &ps->entries[i];
        if (e->trainable) {
            e->offset = n_trainable;
            n_trainable += e->numel;
        }
    }
    n_data = n_trainable;
    for (size_t i = 0; i < ps->count; i++) {
        vtr_param_entry *e = &ps->entries[i];
        if (e->dtype == VTR_F32 && !e->trainable) {
            e->offset = n_data;
            n_data += e->numel;
        } else if (e->dtype == VTR_I64) {
            e->offset = n_idata;
            n_idata += e->numel;
        }
    }
    float *data = n_data ? calloc(n_data, sizeof *data) : NULL;
    float *grad = n_trainable ? calloc(n_trainable, sizeof *grad) : NULL;
    int64_t *idata = n_idata ? calloc(n_idata, sizeof *idata) : NULL;
    if ((n_data && !data) || (n_trainable && !grad) || (n_idata && !idata)) {
        free(data);
        free(grad);
        free(idata);
        return vtr_fail(err, VTR_ERR_NOMEM, "parameter set: out of memory for %zu floats",
                        n_data + n_trainable);
    }
    ps->data = data;
    ps->grad = grad;
    ps->idata = idata;
    ps->n_data = n_data;
    ps->n_trainable = n_trainable;
    ps->n_idata = n_idata;
    ps->finalized = true;
    return VTR_OK;
}

void vtr_param_set_free(vtr_param_set *ps)
{
    for (size_t i = 0; i < ps->count; i++)
        free(ps->entries[i].name);
    free(ps->entries);
    free(ps->data);
    free(ps->grad);
    free(ps->idata);
    vtr_param_set_init(ps);
}

float *vtr_param_data(const vtr_param_set *ps, const char *name)
{
    const vtr_param_entry *e = vtr_param_set_find(ps, name);
    return ps->finalized && e && e->dtype == VTR_F32 ? ps->data + e->offset : NULL;
}

float *vtr_param_grad(const vtr_param_set *ps, const char *name)
{
    const vtr_param_entry *e = vtr_param_set_find(ps, name);
    return ps->finalized && e && e->trainable ? ps->grad + e->offset : NULL;
}

int64_t *vtr_param_idata(const vtr_param_set *ps, const char *name)
{
    const vtr_param_entry *e = vtr_param_set_find(ps, name);
    return ps->finalized && e && e->dtype == VTR_I64 ? ps->idata + e->offset : NULL;
}

vtr_status vtr_param_set_expect(const vtr_param_set *ps, const char *name, vtr_dtype dtype,
                                int ndim, const int64_t *shape,
                                const vtr_param_entry **out, vtr_error *err)
{
    char shown[96], want[128], have[128];
    const vtr_param_entry *e = vtr_param_set_find(ps, name);
    *out = NULL;
    vtr_printable(name, strlen(name), shown, sizeof shown);
    if (!e)
        return vtr_fail(err, VTR_ERR_NOT_FOUND, "no parameter '%s'", shown);
    if (e->dtype != dtype)
        return vtr_fail(err, VTR_ERR_INVALID, "parameter '%s' is %s, expected %s", shown,
                        vtr_dtype_name(e->dtype), vtr_dtype_name(dtype));
    bool same = e->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = e->shape[d] == shape[d];
    if (!same)
        return vtr_fail(err, VTR_ERR_INVALID, "parameter '%s' has shape %s, expected %s", shown,
                        vtr_shape_str(e->ndim, e->shape, have, sizeof have),
                        vtr_shape_str(ndim, shape, want, sizeof want));
    *out = e;
    return VTR_OK;
}

vtr_tensor vtr_param_set_tensor(const vtr_param_set *ps, size_t i)
{
    const vtr_param_entry *e = &ps->entries[i];
    vtr_tensor t = {.dtype = e->dtype, .ndim = e->ndim};
    for (int d = 0; d < e->ndim; d++)
        t.shape[d] = e->shape[d];
    if (ps->finalized)
        t.data = e->dtype == VTR_I64 ? (void *)(ps->idata + e->offset)
                                     : (void *)(ps->data + e->offset);
    return t;
}

void vtr_param_set_zero_grad(vtr_param_set *ps)
{
    if (ps->grad)
        memset(ps->grad, 0, ps->n_trainable * sizeof *ps->grad);
}

void vtr_param_set_scale_lr(vtr_param_set *ps, const char *prefix, float scale)
{
    size_t n = strlen(prefix);
    for (size_t i = 0; i < ps->count; i++)
        if (strncmp(ps->entries[i].name, prefix, n) == 0)
            ps->entries[i].lr_scale = scale;
}
