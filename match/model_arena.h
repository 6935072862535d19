/* The activation arena of a matching model (vse_model.h, hgr_model.h): one allocation,
 * sized once for the largest batch, carved into the model's buffers. A model lays its
 * buffers out with one function called twice: with base NULL to measure, then with the
 * allocated arena to point every buffer into it.
 */
#ifndef VTR_MODEL_ARENA_H
#define VTR_MODEL_ARENA_H

#include <stddef.h>

#include "lib/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The next region of `bytes` at base + *off (NULL when bytes is 0, or base is NULL: then it
 * only measures); advances *off by bytes rounded up to 64 (vtr_workspace_align). */
void *vtr_arena_carve(char *base, size_t *off, size_t bytes);

/* *arena = bytes of zeroed, 64-aligned memory; release with free(). Fails with
 * VTR_ERR_NOMEM "<who>: cannot allocate N bytes of activations". */
vtr_status vtr_arena_alloc(void **arena, size_t bytes, const char *who, vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
