/* Decoding files ahead of their use, on a thread of its own: while a program runs the
 * backbone and the model on one item, the next ones are being decoded (vtr-index,
 * index/archive_index.c). Items come out in the order of the list, each exactly as
 * vtr_decode_item gives it (the same frames, metadata and errors), at most `depth` of them
 * decoded and waiting at a time (their frames are the memory this costs). Depth 0 starts
 * no thread: each item is decoded when it is asked for, so that a caller has one way to
 * take its items whether it decodes ahead or not.
 *
 *   vtr_decode_ahead *d;
 *   vtr_decode_ahead_start(paths, n, &opts, 2, &d, &err);
 *   for (i = 0; i < n; i++) {
 *       vtr_decoded_item item;
 *       st = vtr_decode_ahead_next(d, &item, &err);   // item i, or its failure
 *       ...
 *   }
 *   vtr_decode_ahead_free(d);  // also early: stops the thread after its current file
 */
#ifndef VTR_DECODE_AHEAD_H
#define VTR_DECODE_AHEAD_H

#include <stddef.h>

#include "decode/decode_item.h"
#include "lib/error.h"

typedef struct vtr_decode_ahead vtr_decode_ahead;

/* Starts decoding paths[0 .. n) in order with o (both copied) on a new thread, keeping
 * at most depth decoded items waiting (depth 0: no thread, see above). VTR_ERR_INVALID for
 * depth < 0, VTR_ERR_NOMEM, VTR_ERR_IO when the thread cannot start. *out is NULL on
 * failure. */
vtr_status vtr_decode_ahead_start(const char *const *paths, size_t n,
                                  const vtr_decode_options *o, int depth,
                                  vtr_decode_ahead **out, vtr_error *err);

/* The next item in the list's order, waiting for it when it is not decoded yet (decoding
 * it here with depth 0): VTR_OK
 * with *item filled (the caller owns it: vtr_decoded_item_free), or the item's failure,
 * as vtr_decode_item returns it (*item zeroed, err its message). After the last item:
 * VTR_ERR_INVALID "no more items". */
vtr_status vtr_decode_ahead_next(vtr_decode_ahead *d, vtr_decoded_item *item, vtr_error *err);

/* Stops the thread (after the file it is decoding, if any), frees the items not taken
 * and d. NULL is allowed. */
void vtr_decode_ahead_free(vtr_decode_ahead *d);

#endif
