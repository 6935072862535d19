/* A named parameter set: a model's tensors under their PyTorch state_dict names, held in
 * flat buffers so that an optimizer step, a gradient all-reduce or a checkpoint covers
 * them in one go (the llm.c layout).
 *
 * An entry is a name ("img_enc.fc.weight"), a shape (PyTorch layout: a Linear weight is
 * [out, in]), a dtype and a trainable flag:
 *   - F32 trainable: a parameter; its values live in `data`, its gradient in `grad`.
 *   - F32 buffer (not trainable): state that is saved but not trained, such as BatchNorm's
 *     running_mean / running_var; values in `data`, no gradient.
 *   - I64 buffer: integer state such as BatchNorm's num_batches_tracked (a 0-dimensional
 *     int64 in PyTorch); values in the separate flat array `idata`. I64 entries are never
 *     trainable.
 *
 * Layout (fixed by vtr_param_set_finalize): the trainable entries come first in `data`,
 * in the order they were added and without gaps, then the F32 buffers in the order added.
 * So elements [0, n_trainable) of `data` are exactly the trainable values, `grad` holds
 * n_trainable floats with the same offsets, and an optimizer or a clipper runs over one
 * contiguous range. Trainable entries added one after another form one contiguous block:
 * an op that takes a flat parameter block (the GRU's state_dict-ordered tensors,
 * lib/gru.h) gets the pointer of the block's first entry.
 *
 * Lifetime: zero-initialize (or vtr_param_set_init), add entries, finalize (allocates the
 * zeroed buffers), use, vtr_param_set_free. Entries cannot be added after finalize. The
 * pointers returned below stay valid until vtr_param_set_free. Lookups by name scan the
 * entries (a model has tens of them): resolve pointers once, not in the inner loop.
 * Not thread-safe for building; concurrent reads and writes of the buffers are the
 * caller's business.
 */
#ifndef VTR_PARAMS_H
#define VTR_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest entry name accepted, in bytes (PyTorch names are far shorter). */
#define VTR_PARAM_NAME_MAX 256

typedef struct vtr_param_entry {
    char *name;                   /* owned; the state_dict name */
    vtr_dtype dtype;              /* VTR_F32 or VTR_I64 */
    bool trainable;               /* only F32 entries may be trainable */
    int ndim;                     /* 0 .. VTR_MAX_DIMS; 0 is a scalar (one element) */
    int64_t shape[VTR_MAX_DIMS];
    size_t numel;                 /* product of shape (1 for a scalar) */
    size_t offset;                /* elements into data (and grad) for F32, into idata
                                     for I64; set by finalize */
    float lr_scale;               /* the optimizer's learning rate for it = lr x this (1;
                                     a torch parameter group's lr over the base lr) */
} vtr_param_entry;

typedef struct vtr_param_set {
    size_t count;                 /* entries, in the order added (state_dict order) */
    vtr_param_entry *entries;
    size_t capacity;
    bool finalized;
    float *data;                  /* n_data floats: trainable values, then F32 buffers */
    float *grad;                  /* n_trainable floats, parallel to data[0, n_trainable) */
    int64_t *idata;               /* n_idata int64 values of the I64 buffers */
    size_t n_data, n_trainable, n_idata;
} vtr_param_set;

/* Makes ps an empty set (the same as zero-initializing it). */
void vtr_param_set_init(vtr_param_set *ps);

/* Adds an entry. name: non-empty, at most VTR_PARAM_NAME_MAX bytes, unique in the set.
 * dtype VTR_F32 or VTR_I64; trainable only with VTR_F32. shape: ndim (0 .. VTR_MAX_DIMS)
 * non-negative dimensions, copied. Fails with VTR_ERR_INVALID naming the entry (after
 * finalize, a duplicate name, a bad dtype, dimension or size), VTR_ERR_NOMEM; on failure
 * the set is unchanged. */
vtr_status vtr_param_set_add(vtr_param_set *ps, const char *name, vtr_dtype dtype,
                             bool trainable, int ndim, const int64_t *shape, vtr_error *err);

/* Lays the entries out (see the top of this file) and allocates data, grad and idata,
 * zero-filled. Fails with VTR_ERR_INVALID when already finalized, VTR_ERR_NOMEM (the set
 * then stays unfinalized and can be freed). An empty set finalizes to NULL buffers. */
vtr_status vtr_param_set_finalize(vtr_param_set *ps, vtr_error *err);

/* Frees the names and buffers; leaves ps empty. Safe on an empty or freed set. */
void vtr_param_set_free(vtr_param_set *ps);

/* The entry called name, or NULL. */
const vtr_param_entry *vtr_param_set_find(const vtr_param_set *ps, const char *name);

/* Pointers into the flat buffers of a finalized set, for the entry called name: its
 * values (F32 entries), its gradient (trainable entries), its int64 values (I64
 * entries). NULL when there is no such entry, it has another kind, or the set is not
 * finalized. */
float *vtr_param_data(const vtr_param_set *ps, const char *name);
float *vtr_param_grad(const vtr_param_set *ps, const char *name);
int64_t *vtr_param_idata(const vtr_param_set *ps, const char *name);

/* The checked form of the lookups above, for code that builds a model from a set: *out
 * gets the entry called name, which must exist with this dtype and exactly this shape.
 * Fails with VTR_ERR_NOT_FOUND "no parameter 'x'" or VTR_ERR_INVALID naming the entry
 * and both shapes or dtypes. */
vtr_status vtr_param_set_expect(const vtr_param_set *ps, const char *name, vtr_dtype dtype,
                                int ndim, const int64_t *shape,
                                const vtr_param_entry **out, vtr_error *err);

/* A tensor view of entry i's values in a finalized set (data not owned). */
vtr_tensor vtr_param_set_tensor(const vtr_param_set *ps, size_t i);

/* Sets lr_scale to scale (> 0) for every entry whose name starts with prefix. */
void vtr_param_set_scale_lr(vtr_param_set *ps, const char *prefix, float scale);

/* Sets every gradient to zero (one memset over grad). */
void vtr_param_set_zero_grad(vtr_param_set *ps);

#ifdef __cplusplus
}
#endif

#endif
