/* vtr-serve as a library: a read-only HTTP server over one or more embedding indexes,
 * on libmicrohttpd (docs/serve.md). It serves
 *   GET /                       the search page (index/web_page.html)
 *   GET /api/indexes            the indexes served: name, items, generation, model,
 *                               whether they take image and video queries, whether text
 *                               queries go through the approximate index (and why not)
 *   GET /api/search             ?q=TEXT[&k=10][&offset=0][&index=NAME]: the results of
 *                               vtr-search --json (index/search_json.h) plus "index",
 *                               "generation", "offset", each result's "media" URL
 *   GET /api/similar            ?key=KEY[&k][&offset][&index]: "more like this", the items
 *                               nearest to an indexed one (index/item_search.h)
 *   POST /api/query-media       [?k][&offset][&index], the body an image or a short video
 *                               (at most max_upload bytes): its embedding by the index's
 *                               backbone and the model's visual side, searched as above
 *   GET /api/query-media        ?path=FILE...: the same for a file on the server's disk,
 *                               only when the server is bound to a loopback address
 *   GET /api/runs               the training runs under the run roots: name, epochs, the
 *                               last loss, the best validation RSUM, whether a checkpoint
 *                               with GPO can be plotted
 *   GET /plot/curves            ?runs=NAME[,NAME...][&separate=1][&format=svg|png]: their
 *                               training curves (match/training_curves.h)
 *   GET /plot/gpo               ?run=NAME[&format]: GPO's coefficients of the run's best
 *                               checkpoint (else its last; match/gpo_curves.h)
 *   GET /media                  ?key=KEY[&index]: the item's original file, with HTTP
 *                               range requests (a browser seeks in it); only the files
 *                               of the index's catalog records are ever served
 * Errors are JSON {"error": "one line"} with the HTTP status that fits (400 bad request,
 * 404 unknown item or index, 405 method, 413 upload too large, 414 query too long, 500).
 *
 * Updates: before a search, at most once a second, the server looks for a newer
 * generation of each index (vtr-index adding files while it serves) and searches that
 * from then on; a request always sees one committed generation.
 * Threads: one per connection (at most max_connections); the searches of one index take
 * its lock in turn (its model and catalog connection are not shared between threads),
 * media files are sent without it. */
#ifndef VTR_WEB_SERVER_H
#define VTR_WEB_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include "index/text_search.h"
#include "lib/error.h"

/* Caps on what a client may ask. */
#define VTR_SERVE_MAX_QUERY 1000        /* bytes of a text query */
#define VTR_SERVE_MAX_RESULTS 1000      /* offset + k */
#define VTR_SERVE_MAX_UPLOAD (64 << 20) /* default bytes of an uploaded query file */

typedef struct vtr_web_server vtr_web_server;

typedef struct vtr_served_index {
    const char *name; /* the name in URLs (index=NAME); NULL: the directory's base name */
    const char *dir;  /* the index directory */
} vtr_served_index;

typedef struct vtr_web_server_options {
    const vtr_served_index *indexes; /* n_indexes >= 1; the first is the default */
    int n_indexes;
    const char *model;   /* each index's checkpoint; NULL: the one it records */
    const char *vocab;   /* NULL: vtr_embedder_open's default */
    const char *address; /* IPv4 or IPv6 address to listen on; NULL: 127.0.0.1 */
    int port;            /* 0: any free port (vtr_web_server_port says which) */
    int threads;         /* the models' threads, 0: their default */
    int max_connections; /* 0: 64 */
    int64_t max_upload;  /* bytes, 0: VTR_SERVE_MAX_UPLOAD */
    vtr_approx_mode approx;  /* each index's approximate index: used from
                              * VTR_APPROX_MIN_ROWS items on (AUTO), never, or always (the
                              * start fails without one that fits) (index/text_search.h) */
    const char *const *runs; /* n_runs roots of training runs for the runs page
                              * (index/run_list.h), looked through at each request */
    int n_runs;
    /* VTR_DEVICE_CUDA: each index's rows copied to GPU device_index (after vtr_cuda_init),
     * again with each newer generation, and text queries searched exactly there
     * (index/text_search.h; no approximate index; VSE models only) */
    vtr_device device;
    int device_index;
} vtr_web_server_options;

/* Opens every index (as vtr_text_searcher_open: its model and its catalog) and starts
 * listening. Fails with the index's error (which names it), VTR_ERR_INVALID (no
 * index; two of the same name; an address that does not parse), VTR_ERR_IO (the port
 * cannot be bound: "127.0.0.1:8080: Address already in use"). *out is NULL on failure. */
vtr_status vtr_web_server_start(const vtr_web_server_options *o, vtr_web_server **out,
                                vtr_error *err);

/* The port it listens on. */
int vtr_web_server_port(const vtr_web_server *s);

/* Whether it listens on a loopback address only (127.0.0.0/8, ::1). */
bool vtr_web_server_loopback(const vtr_web_server *s);

/* Stops listening, waits for the requests in flight, closes the indexes. Safe on NULL. */
void vtr_web_server_stop(vtr_web_server *s);

#endif
