/* Activation arenas; the contracts are in model_arena.h. */
#include "model_arena.h"

#include <stdlib.h>
#include <string.h>

#include "lib/nn.h"

void *vtr_arena_carve(char *base, size_t *off, size_t bytes)
{
    if (bytes == 0)
        return NULL;
    void *p = base ? base + *off : NULL;
    *off += vtr_workspace_align(bytes);
    return p;
}

vtr_status vtr_arena_alloc(void **arena, size_t bytes, const char *who, vtr_error *err)
{
    *arena = aligned_alloc(64, vtr_workspace_align(bytes));
    if (!*arena)
        return vtr_fail(err, VTR_ERR_NOMEM, "%s: cannot allocate %zu bytes of activations", who,
                        bytes);
    memset(*arena, 0, bytes);
    return VTR_OK;
}
