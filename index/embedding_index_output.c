/* An embedding index as an item output (embedding_index_output.h). */
#define _XOPEN_SOURCE 700
#include "index/embedding_index_output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "index/embedding_index.h"
#include "index/text_search.h"
#include "lib/file.h"

static vtr_status add_item(void *ctx, const char *key, const vtr_tensor *t, const json_t *meta,
                           vtr_error *err)
{
    (void)meta; /* the index keeps vectors only */
    vtr_embedding_index_writer *w = ctx;
    vtr_status st = vtr_embedding_index_writer_add(w, key, t, err);
    if (st == VTR_OK &&
        vtr_embedding_index_writer_pending_rows(w) >= VTR_EMBEDDING_INDEX_OUTPUT_COMMIT)
        st = vtr_embedding_index_writer_commit(w, err);
    return st;
}

static vtr_status commit(void *ctx, vtr_error *err)
{
    return vtr_embedding_index_writer_commit(ctx, err);
}

static void close_writer(void *ctx)
{
    vtr_embedding_index_writer_close(ctx); /* uncommitted rows are dropped */
}

/* The model text for dir: an existing index's, once e is found to be its model; a new
 * index's, naming the checkpoint. *text is malloc'ed. */
static vtr_status model_text(const char *dir, const vtr_embedder *e, const char *checkpoint,
                             char **text, vtr_error *err)
{
    *text = NULL;
    char *manifest = vtr_path_join(dir, "index.sqlite");
    vtr_status st = VTR_OK;
    if (!manifest)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    if (access(manifest, F_OK) == 0) {
        vtr_embedding_index *ix = NULL;
        if ((st = vtr_embedding_index_open(dir, &ix, err)) == VTR_OK &&
            (st = vtr_text_search_check(e, ix, err)) == VTR_OK &&
            !(*text = strdup(vtr_embedding_index_model(ix))))
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        if (st == VTR_ERR_INVALID) {
            char why[sizeof err->msg];
            snprintf(why, sizeof why, "%s", err->msg);
            vtr_fail(err, st, "index %s: %s: use a new --index DIR", dir, why);
        }
        vtr_embedding_index_close(ix);
    } else {
        char *abs = realpath(checkpoint, NULL);
        if (!(*text = vtr_index_model_text(VTR_EMBEDDING_INDEX_OUTPUT_FORMAT,
                                           vtr_embedder_model_id(e), abs ? abs : checkpoint)))
            st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        free(abs);
    }
    free(manifest);
    return st;
}

vtr_status vtr_embedding_index_output_open(const char *dir, const vtr_embedder *e,
                                           const char *checkpoint, vtr_item_sink *sink,
                                           vtr_error *err)
{
    memset(sink, 0, sizeof *sink);
    char *text;
    vtr_status st = model_text(dir, e, checkpoint, &text, err);
    if (st != VTR_OK)
        return st;
    vtr_embedding_index_options io = {.dim = vtr_embedder_dim(e), .model = text};
    vtr_embedding_index_writer *w;
    st = vtr_embedding_index_writer_open(dir, &io, &w, err);
    free(text);
    if (st != VTR_OK)
        return st;
    *sink = (vtr_item_sink){.add = add_item, .commit = commit, .close = close_writer, .ctx = w};
    return VTR_OK;
}
