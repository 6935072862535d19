/* Where a program writes its items: the one output layer of vtr-decode, vtr-features and
 * vtr-aggregate. An item is a key, an array (N, ...) and a metadata JSON object; the
 * destination is one of
 *   a record stream (lib/record.h): -o FILE, written atomically, or stdout (a pipe; each
 *     item flushed) through lib/record_output.h;
 *   a directory (--out-dir DIR, created with its parents): DIR/KEY.npy beside DIR/KEY.json
 *     per item, through lib/npy_item.h;
 *   a feature store (--store DIR, lib/feature_store.h), which keeps the rows of 2-D arrays;
 *   a sink that a later stage plugs in (vtr_item_sink: vtr-aggregate --index DIR, in
 *     index/embedding_index_output.h), which lib/ cannot name.
 * With half, float32 arrays are written as float16 (vtr_float_to_half); a feature store
 * stores float16 and converts the rows itself.
 *
 * An output takes each key once: an item whose key was written before in the run is
 * refused, naming both items' sources (the "source" of their metadata), so that two files
 * of one name in different folders (a/x.jpg, b/x.jpg: key x) never overwrite each other
 * in --out-dir (nor stand twice in a stream, a store or an index).
 *
 * An item can fail in two ways. A refused item (a key written before, a key that cannot
 * name a file or be a record's key, an array or metadata a record cannot hold, a file of
 * --out-dir that could not be written) leaves the output usable:
 * the program reports it and goes on. A broken output (a failed write of the record
 * stream, a store or sink that failed) takes no more items: the program stops, and close
 * leaves nothing half-written behind where the destination allows it (the record file,
 * the store). */
#ifndef VTR_ITEM_OUTPUT_H
#define VTR_ITEM_OUTPUT_H

#include <jansson.h>
#include <stdbool.h>

#include "lib/error.h"
#include "lib/feature_store.h"
#include "lib/tensor.h"

/* A destination that a stage after lib/ provides. add returns VTR_ERR_INVALID for an
 * item it refused (it stays usable), any other failure breaks it; commit publishes what
 * was added; close frees it, dropping what was not committed. */
typedef struct vtr_item_sink {
    vtr_status (*add)(void *ctx, const char *key, const vtr_tensor *t, const json_t *meta,
                      vtr_error *err);
    vtr_status (*commit)(void *ctx, vtr_error *err);
    void (*close)(void *ctx);
    void *ctx;
} vtr_item_sink;

/* The destination options of a program; at most one of dir, store and sink is set, and
 * none of them means the record stream at path. */
typedef struct vtr_item_output_options {
    const char *path;  /* -o FILE; NULL or "-": stdout, which must not be a terminal */
    const char *alternatives; /* the program's other outputs, for the terminal refusal
                                 ("-o FILE, --out-dir DIR or a pipe") */
    const char *dir;   /* --out-dir DIR */
    const char *store; /* --store DIR, opened with store_options (their dtype is set
                          from half) */
    const vtr_feature_store_options *store_options;
    const vtr_item_sink *sink; /* taken over: closed with the output, or at once when
                                  the open fails */
    bool half;         /* float32 arrays written as float16 */
} vtr_item_output_options;

typedef struct vtr_item_output vtr_item_output;

/* Opens the destination: the errors of vtr_record_output_open (a terminal, an .npy
 * path), vtr_make_dirs, vtr_feature_store_writer_open; VTR_ERR_NOMEM. *out is NULL on
 * failure. */
vtr_status vtr_item_output_open(const vtr_item_output_options *opt, vtr_item_output **out,
                                vtr_error *err);

/* Whether o takes an item under key, asked before the item is made (vtr-decode asks
 * before decoding, so that a refused item writes nothing, its audio included):
 * VTR_ERR_INVALID "KEY: SOURCE1 and SOURCE2 have the same key; the second is not written"
 * for a key written before (source, may be NULL, names the new item), and the refusals of
 * the destination's key check: vtr_key_check_file_name for --out-dir,
 * vtr_record_key_check for a record stream (a key that is not UTF-8, such as a file
 * name's). vtr_item_output_write checks the same. */
vtr_status vtr_item_output_check(const vtr_item_output *o, const char *key, const char *source,
                                 vtr_error *err);

/* Writes one item: key, its array t (read during the call only; float32 converted when
 * half) and meta (a JSON object, NULL: {}; its "source" names the item when a later one
 * has the same key). On failure err holds the refusal (vtr_item_output_check) or the
 * destination's message, and vtr_item_output_broken says whether the output can take
 * more items. A broken output fails every later write. */
vtr_status vtr_item_output_write(vtr_item_output *o, const char *key, const vtr_tensor *t,
                                 const json_t *meta, vtr_error *err);

/* Whether a write failed in a way that leaves the output unusable (see above). */
bool vtr_item_output_broken(const vtr_item_output *o);

/* Completes the output: commits the record file (or flushes stdout), finishes the store,
 * commits the sink; a directory's items are complete already. The destination's errors
 * (VTR_ERR_IO naming it). Only close remains afterwards, whatever the outcome. */
vtr_status vtr_item_output_commit(vtr_item_output *o, vtr_error *err);

/* Frees o, removing what was not committed: the record file, the store being built, the
 * sink's staged items (items already in --out-dir stay). Safe on NULL. */
void vtr_item_output_close(vtr_item_output *o);

#endif
