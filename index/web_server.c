/* vtr-serve's HTTP server (web_server.h, docs/serve.md). */
#define _GNU_SOURCE /* strdup, mkostemp */
#include "web_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "features/backbone.h"
#include "index/archive_index.h"
#include "index/embedder.h"
#include "index/embedding_index.h"
#include "index/http_range.h"
#include "index/item_search.h"
#include "index/media_embedder.h"
#include "index/run_list.h"
#include "index/search_json.h"
#include "index/text_search.h"
#include "index/web_page.h"
#include "lib/catalog.h"
#include "lib/file.h"
#include "lib/json.h"
#include "lib/plot.h"
#include "lib/tensor.h"
#include "match/gpo_curves.h"
#include "match/run_dir.h"
#include "match/training_curves.h"

/* Seconds between two looks for a newer generation of an index. */
#define REFRESH_S 1.0

/* One index served. */
typedef struct served {
    char *name, *dir;
    pthread_mutex_t lock;     /* everything below */
    vtr_text_searcher ts;     /* ts.ix: the newest generation seen */
    double checked;           /* when the last look for a newer generation was */
    vtr_archive_model rec;    /* the backbone and sampling vtr-index recorded */
    bool has_backbone;        /* rec was read: the index takes media queries */
    vtr_backbone *backbone;   /* loaded by the first media query */
    vtr_media_embedder *media;
    int device_index; /* ts.gpu's GPU, made current before a new generation is
                         copied there (cudaSetDevice is per thread) */
} served;

struct vtr_web_server {
    struct MHD_Daemon *daemon;
    char **runs; /* the run roots (copies) */
    int n_runs;
    served *idx;
    int n;
    int port;
    bool loopback;
    int64_t max_upload;
    int threads;
};

/* A POST's body, written to a temporary file as it arrives. */
typedef struct upload {
    int fd;
    char path[64];
    int64_t size;
    bool too_big, write_failed;
} upload;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- responses -------------------------------------------------------------------- */

static enum MHD_Result send_text(struct MHD_Connection *c, unsigned status, const char *type,
                                 const char *body, size_t n, enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(n, (void *)body, mode);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

/* Sends j (its reference taken) as the JSON body. */
static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, json_t *j)
{
    char *text = j ? json_dumps(j, VTR_JSON_FLAGS) : NULL;
    json_decref(j);
    if (!text) {
        static const char oom[] = "{\"error\":\"out of memory\"}";
        return send_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "application/json", oom,
                         sizeof oom - 1, MHD_RESPMEM_PERSISTENT);
    }
    return send_text(c, status, "application/json", text, strlen(text),
                     MHD_RESPMEM_MUST_FREE);
}

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *fmt,
                                  ...) __attribute__((format(printf, 3, 4)));

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *fmt,
                                  ...)
{
    char msg[VTR_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return send_json(c, status, json_pack("{s:s}", "error", msg));
}

/* The HTTP status of a failure of the library. */
static unsigned status_of(vtr_status st)
{
    switch (st) {
    case VTR_ERR_NOT_FOUND: return MHD_HTTP_NOT_FOUND;
    case VTR_ERR_INVALID:
    case VTR_ERR_FORMAT:
    case VTR_ERR_CODEC:
    case VTR_ERR_UNSUPPORTED: return MHD_HTTP_BAD_REQUEST;
    default: return MHD_HTTP_INTERNAL_SERVER_ERROR;
    }
}

static enum MHD_Result send_failure(struct MHD_Connection *c, const vtr_error *e)
{
    return send_error(c, status_of(e->status), "%s", e->msg);
}

/* ---- the indexes ------------------------------------------------------------------ */

static void served_close(served *s)
{
    vtr_media_embedder_free(s->media);
    vtr_backbone_free(s->backbone);
    vtr_archive_model_free(&s->rec);
    vtr_text_searcher_close(&s->ts);
    pthread_mutex_destroy(&s->lock);
    free(s->name);
    free(s->dir);
}

static vtr_status served_open(served *s, const vtr_served_index *si,
                              const vtr_web_server_options *o, vtr_error *err)
{
    pthread_mutex_init(&s->lock, NULL);
    char *copy = strdup(si->dir);
    s->dir = strdup(si->dir);
    s->name = si->name ? strdup(si->name) : copy ? strdup(basename(copy)) : NULL;
    free(copy);
    if (!s->dir || !s->name)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    vtr_text_searcher_options so = {.index = si->dir,
                                    .model = o->model,
                                    .vocab = o->vocab,
                                    .threads = o->threads,
                                    .approx = o->approx,
                                    .device = o->device,
                                    .device_index = o->device_index};
    s->device_index = o->device_index;
    vtr_status st = vtr_text_searcher_open(&so, &s->ts, err);
    if (st != VTR_OK)
        return st;
    s->checked = now_s();
    vtr_error none;
    /* an index of vtr-aggregate records no backbone: text queries only */
    s->has_backbone = vtr_archive_model_parse(vtr_embedding_index_model(s->ts.ix), &s->rec,
                                              &none) == VTR_OK;
    return VTR_OK;
}

/* Under s->lock: moves s to the index's newest generation when one was committed since
 * (looked for at most every REFRESH_S). A failure to open it keeps the one held. */
static void refresh(served *s)
{
    double t = now_s();
    if (t - s->checked < REFRESH_S)
        return;
    s->checked = t;
    vtr_embedding_index *ix;
    vtr_error e;
    if (vtr_embedding_index_open(s->dir, &ix, &e) != VTR_OK)
        return;
    vtr_topk_cuda *gpu = NULL; /* on the GPU: the new generation's rows there */
    if (vtr_embedding_index_generation(ix) == vtr_embedding_index_generation(s->ts.ix) ||
        vtr_text_search_check(s->ts.e, ix, &e) != VTR_OK ||
        (s->ts.gpu && (vtr_cuda_init(s->device_index, NULL, 0, &e) != VTR_OK ||
                       vtr_topk_cuda_new(vtr_embedding_index_matrix(ix), &gpu, &e) != VTR_OK))) {
        vtr_embedding_index_close(ix);
        return;
    }
    vtr_embedding_index_close(s->ts.ix);
    s->ts.ix = ix;
    if (gpu) {
        vtr_topk_cuda_free(s->ts.gpu);
        s->ts.gpu = gpu;
        return; /* no approximate index on the GPU */
    }
    /* the approximate index may have been updated with the index, or no longer fit it */
    if (vtr_text_searcher_reopen_approx(&s->ts, s->dir, &e) != VTR_OK) /* exact until it fits */
        snprintf(s->ts.approx_note, sizeof s->ts.approx_note, "%s", e.msg);
}

/* Under s->lock: the media embedder, loaded on first use. */
static vtr_status media_embedder(served *s, vtr_error *err)
{
    if (s->media && !vtr_media_embedder_broken(s->media))
        return VTR_OK;
    vtr_media_embedder_free(s->media);
    s->media = NULL;
    if (!s->has_backbone)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED, "index %s records no backbone (it was made "
                        "by vtr-aggregate): it takes text queries only", s->name);
    vtr_status st;
    if (!s->backbone) {
        vtr_backbone_arch arch;
        if ((st = vtr_backbone_arch_parse(s->rec.arch, &arch, err)) != VTR_OK ||
            (st = vtr_backbone_load(s->rec.weights, arch, VTR_DEVICE_CPU, &s->backbone,
                                    err)) != VTR_OK) {
            vtr_error_context(err, "index %s: its backbone", s->name);
            return st;
        }
    }
    vtr_preprocess_options pre, theirs;
    vtr_preprocess_unset(&pre);
    pre.resize = s->rec.resize;
    pre.crop = s->rec.crop;
    vtr_backbone_preprocess(s->backbone, &theirs);
    vtr_preprocess_fill(&pre, &theirs);
    return vtr_media_embedder_new(s->ts.e, s->backbone, &pre, s->rec.frames, 0, &s->media,
                                  err);
}

/* ---- requests --------------------------------------------------------------------- */

static const char *arg(struct MHD_Connection *c, const char *name)
{
    return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
}

/* The index a request names (index=NAME), else the first; NULL (a 404 sent, *ret its
 * result) when there is none of that name. */
static served *find_index(vtr_web_server *srv, struct MHD_Connection *c, enum MHD_Result *ret)
{
    const char *name = arg(c, "index");
    if (!name)
        return &srv->idx[0];
    for (int i = 0; i < srv->n; i++)
        if (strcmp(srv->idx[i].name, name) == 0)
            return &srv->idx[i];
    *ret = send_error(c, MHD_HTTP_NOT_FOUND, "no index named %s", name);
    return NULL;
}

/* Reads an integer argument in [lo, hi], def when absent; false (and an error sent)
 * when it is not one. */
static bool int_arg(struct MHD_Connection *c, const char *name, long long lo, long long hi,
                    long long def, long long *v, enum MHD_Result *ret)
{
    const char *s = arg(c, name);
    *v = def;
    if (!s)
        return true;
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno || end == s || *end || x < lo || x > hi) {
        *ret = send_error(c, MHD_HTTP_BAD_REQUEST, "%s wants an integer in [%lld, %lld]", name,
                          lo, hi);
        return false;
    }
    *v = x;
    return true;
}

/* The k and offset of a search request; false (an error sent) when they are bad. */
static bool page_args(struct MHD_Connection *c, long long *k, long long *offset,
                      enum MHD_Result *ret)
{
    if (!int_arg(c, "k", 1, VTR_SERVE_MAX_RESULTS, 10, k, ret) ||
        !int_arg(c, "offset", 0, VTR_SERVE_MAX_RESULTS - 1, 0, offset, ret))
        return false;
    if (*k + *offset > VTR_SERVE_MAX_RESULTS) {
        *ret = send_error(c, MHD_HTTP_BAD_REQUEST, "offset + k is at most %d",
                          VTR_SERVE_MAX_RESULTS);
        return false;
    }
    return true;
}

/* Percent-encodes s for a URL's query (malloc'ed). */
static char *url_encode(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    char *out = malloc(3 * strlen(s) + 1), *p = out;
    if (!out)
        return NULL;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            strchr("-_.~", ch)) {
            *p++ = (char)ch;
        } else {
            *p++ = '%';
            *p++ = hex[ch >> 4];
            *p++ = hex[ch & 15];
        }
    }
    *p = '\0';
    return out;
}

/* Whether the model's items begin with a global vector (VSE's only vector, HGR's global
 * one), which visual queries and the frames' vectors are compared with. A set model's
 * items are K slots, which only its smooth-Chamfer score against a text compares. */
static bool has_global_vector(const vtr_embedder *e)
{
    return vtr_embedder_levels(e) > 0 || vtr_embedder_item_vectors(e, 1) == 1;
}

/* Adds to result r (of item key; name and ekey its URL-encoded index name and key) what
 * the catalog keeps of its sampled frames: "frames" [{"time", "score", "thumb"}] (score:
 * the frame's own vector against q, null without q), "start" the time of the best frame
 * (where a video plays from), "thumb" its picture's URL (the first frame's without q).
 * An item without frames (indexed by an older vtr, or not by vtr-index) gets none of
 * them. False when out of memory. */
static bool add_frames(const served *s, json_t *r, const char *key, const char *name,
                       const char *ekey, const float *q)
{
    vtr_item item;
    vtr_item_frame_list fl = {0};
    vtr_error e;
    if (!s->ts.cat || vtr_catalog_find_item(s->ts.cat, s->ts.dataset_id, key, &item, &e))
        return true;
    vtr_status st = vtr_catalog_item_frames(s->ts.cat, item.id, &fl, &e);
    vtr_item_free(&item);
    if (st != VTR_OK || fl.n == 0) {
        vtr_item_frame_list_free(&fl);
        return st != VTR_ERR_NOMEM;
    }
    int64_t D = vtr_embedding_index_dim(s->ts.ix);
    json_t *frames = json_array();
    size_t best = 0;
    double best_score = -INFINITY;
    bool ok = frames != NULL;
    for (size_t i = 0; ok && i < fl.n; i++) {
        const vtr_item_frame *f = &fl.frames[i];
        double score = NAN;
        if (q && f->vector && f->dim == D) {
            score = 0;
            for (int64_t d = 0; d < D; d++)
                score += (double)q[d] * vtr_half_to_float(f->vector[d]);
            if (score > best_score) {
                best_score = score;
                best = i;
            }
        }
        char *thumb = NULL;
        if (f->jpeg_size > 0 &&
            asprintf(&thumb, "/thumb?index=%s&key=%s&frame=%zu", name, ekey, i) < 0)
            thumb = NULL;
        ok = (f->jpeg_size == 0 || thumb) &&
             json_array_append_new(
                 frames, json_pack("{s:o, s:o, s:o}", "time",
                                   f->time_s >= 0 ? json_real(f->time_s) : json_null(), "score",
                                   isnan(score) ? json_null() : json_real(score), "thumb",
                                   thumb ? json_string(thumb) : json_null())) == 0;
        free(thumb);
    }
    const json_t *b = json_array_get(frames, best);
    ok = ok && json_object_set_new(r, "start", json_deep_copy(json_object_get(b, "time"))) == 0 &&
         json_object_set_new(r, "thumb", json_deep_copy(json_object_get(b, "thumb"))) == 0 &&
         json_object_set(r, "frames", frames) == 0;
    json_decref(frames);
    vtr_item_frame_list_free(&fl);
    return ok;
}

/* The result object `out` of a search, with the server's fields added: the index, its
 * generation, the offset, each result's media URL and frames (add_frames; q the query's
 * unit vector, NULL when the model has no global vector). Takes out's reference. */
static enum MHD_Result send_results(struct MHD_Connection *c, const served *s, json_t *out,
                                    long long offset, const float *q)
{
    char *name = url_encode(s->name);
    json_t *list = json_object_get(out, "results");
    bool ok = name && list &&
              json_object_set_new(out, "index", json_string(s->name)) == 0 &&
              json_object_set_new(out, "generation",
                                  json_integer(vtr_embedding_index_generation(s->ts.ix))) == 0 &&
              json_object_set_new(out, "offset", json_integer(offset)) == 0;
    size_t i;
    json_t *r;
    json_array_foreach(list, i, r) {
        const char *path = json_string_value(json_object_get(r, "path"));
        const char *raw = json_string_value(json_object_get(r, "key"));
        char *key = url_encode(raw);
        char *url = NULL;
        if (key && path && asprintf(&url, "/media?index=%s&key=%s", name, key) < 0)
            url = NULL;
        ok = ok && key && (!path || url) &&
             json_object_set_new(r, "media", url ? json_string(url) : json_null()) == 0 &&
             add_frames(s, r, raw, name, key, q);
        free(key);
        free(url);
    }
    free(name);
    if (!ok) {
        json_decref(out);
        return send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    }
    return send_json(c, MHD_HTTP_OK, out);
}

static enum MHD_Result api_indexes(vtr_web_server *srv, struct MHD_Connection *c)
{
    json_t *list = json_array();
    for (int i = 0; list && i < srv->n; i++) {
        served *s = &srv->idx[i];
        pthread_mutex_lock(&s->lock);
        refresh(s);
        json_t *o = json_pack("{s:s, s:I, s:I, s:s, s:b, s:s?, s:b, s:s?}", "name", s->name,
                              "items", (json_int_t)vtr_embedding_index_live_rows(s->ts.ix),
                              "generation", (json_int_t)vtr_embedding_index_generation(s->ts.ix),
                              "model", vtr_embedder_checkpoint(s->ts.e), "media_queries",
                              s->has_backbone, "backbone", s->has_backbone ? s->rec.arch : NULL,
                              "approximate", s->ts.approx != NULL, "approx_note",
                              s->ts.approx_note[0] ? s->ts.approx_note : NULL);
        pthread_mutex_unlock(&s->lock);
        if (json_array_append_new(list, o) != 0) {
            json_decref(list);
            list = NULL;
        }
    }
    json_t *out = list ? json_pack("{s:o, s:b}", "indexes", list, "path_queries",
                                   srv->loopback)
                       : NULL;
    return send_json(c, MHD_HTTP_OK, out);
}

static enum MHD_Result api_search(vtr_web_server *srv, struct MHD_Connection *c)
{
    enum MHD_Result ret;
    served *s = find_index(srv, c, &ret);
    const char *q = arg(c, "q");
    long long k, offset;
    if (!s)
        return ret;
    if (!q)
        return send_error(c, MHD_HTTP_BAD_REQUEST, "no query: give q=TEXT");
    if (strlen(q) > VTR_SERVE_MAX_QUERY)
        return send_error(c, MHD_HTTP_URI_TOO_LONG, "the query has %zu bytes; at most %d",
                          strlen(q), VTR_SERVE_MAX_QUERY);
    if (!page_args(c, &k, &offset, &ret))
        return ret;
    int64_t n = offset + k, found = 0;
    vtr_search_result *res = calloc((size_t)n, sizeof *res);
    if (!res)
        return send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    vtr_error e;
    int words[2] = {0, 0}, phrases[2] = {0, 0};
    pthread_mutex_lock(&s->lock);
    refresh(s);
    const char *queries[1] = {q};
    vtr_status st = vtr_embedder_check_text(s->ts.e, q, &words[0], &words[1], &e);
    if (st == VTR_OK)
        st = vtr_text_search(s->ts.e, s->ts.ix, s->ts.approx, s->ts.gpu, s->ts.cat, s->ts.dataset_id, 1,
                             queries, NULL, n, 0, res, &found, phrases, &e);
    bool hgr = vtr_embedder_levels(s->ts.e) > 0;
    json_t *out = NULL;
    /* the text's global vector, for the frames of the results */
    int64_t E = vtr_embedder_dim(s->ts.e), per = vtr_embedder_text_vectors(s->ts.e);
    float *tq = NULL;
    if (st == VTR_OK && has_global_vector(s->ts.e) &&
        (!(tq = malloc((size_t)(per * E) * sizeof *tq)) ||
         vtr_embedder_embed_texts(s->ts.e, 1, queries, NULL, tq, NULL, &e) != VTR_OK)) {
        free(tq);
        tq = NULL;
    }
    if (st == VTR_OK) {
        int64_t shown = found > offset ? found - offset : 0;
        out = vtr_search_json(q, words, res + offset, shown, offset + 1, hgr ? phrases : NULL);
        if (!out)
            vtr_fail(&e, st = VTR_ERR_NOMEM, "out of memory");
    }
    ret = st == VTR_OK ? send_results(c, s, out, offset, tq) : send_failure(c, &e);
    pthread_mutex_unlock(&s->lock);
    vtr_search_results_free(res, n);
    free(res);
    free(tq);
    return ret;
}

/* Searches s with the visual vector q (s->lock held) and sends the results, query
 * described by what (a JSON object). */
static enum MHD_Result vector_results(struct MHD_Connection *c, served *s, const float *q,
                                      const char *exclude, long long k, long long offset,
                                      json_t *what)
{
    if (!has_global_vector(s->ts.e)) {
        json_decref(what);
        return send_error(c, MHD_HTTP_BAD_REQUEST, "%s is a set model: its items are sets of "
                          "slots, compared with texts only (query with text)",
                          vtr_embedder_checkpoint(s->ts.e));
    }
    int64_t n = offset + k, found = 0, D = vtr_embedding_index_dim(s->ts.ix);
    vtr_search_result *res = calloc((size_t)n, sizeof *res);
    float *unit = malloc((size_t)D * sizeof *unit);
    vtr_error e;
    vtr_status st = res && unit ? vtr_item_search(s->ts.ix, s->ts.cat, s->ts.dataset_id, q, n,
                                                  exclude, res, &found, &e)
                                : vtr_fail(&e, VTR_ERR_NOMEM, "out of memory");
    double norm = 0;
    for (int64_t d = 0; st == VTR_OK && d < D; d++)
        norm += (double)q[d] * q[d];
    for (int64_t d = 0; st == VTR_OK && d < D; d++)
        unit[d] = (float)(q[d] / sqrt(norm));
    json_t *list = json_array();
    for (int64_t j = offset; st == VTR_OK && list && j < found; j++)
        if (json_array_append_new(list, vtr_search_result_json(&res[j], j + 1, NULL)) != 0) {
            json_decref(list);
            list = NULL;
        }
    enum MHD_Result ret;
    if (st != VTR_OK) {
        json_decref(list);
        json_decref(what);
        ret = send_failure(c, &e);
    } else if (!list || json_object_set_new(what, "results", list) != 0) {
        json_decref(what);
        ret = send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    } else {
        ret = send_results(c, s, what, offset, unit);
    }
    if (res)
        vtr_search_results_free(res, n);
    free(res);
    free(unit);
    return ret;
}

static enum MHD_Result api_similar(vtr_web_server *srv, struct MHD_Connection *c)
{
    enum MHD_Result ret;
    served *s = find_index(srv, c, &ret);
    const char *key = arg(c, "key");
    long long k, offset;
    if (!s)
        return ret;
    if (!key)
        return send_error(c, MHD_HTTP_BAD_REQUEST, "no item: give key=KEY");
    if (!page_args(c, &k, &offset, &ret))
        return ret;
    pthread_mutex_lock(&s->lock);
    refresh(s);
    float *q = malloc((size_t)vtr_embedding_index_dim(s->ts.ix) * sizeof *q);
    vtr_error e;
    vtr_status st = q ? vtr_item_search_vector(s->ts.ix, key, q, &e)
                      : vtr_fail(&e, VTR_ERR_NOMEM, "out of memory");
    if (st != VTR_OK)
        ret = send_failure(c, &e);
    else
        ret = vector_results(c, s, q, key, k, offset, json_pack("{s:s}", "similar_to", key));
    pthread_mutex_unlock(&s->lock);
    free(q);
    return ret;
}

/* Embeds the file at path with s's backbone and model and sends its results; name is how
 * the answer calls the query (the uploaded file's name, or the path). */
static enum MHD_Result media_query(struct MHD_Connection *c, served *s, const char *path,
                                   const char *name, long long k, long long offset)
{
    enum MHD_Result ret;
    vtr_error e;
    vtr_media_embedding me;
    pthread_mutex_lock(&s->lock);
    refresh(s);
    vtr_status st = media_embedder(s, &e);
    if (st == VTR_OK)
        st = vtr_media_embedder_embed(s->media, path, name, &me, &e);
    if (st != VTR_OK)
        ret = send_failure(c, &e);
    else
        ret = vector_results(c, s, me.embedding, NULL, k, offset,
                             json_pack("{s:s, s:o}", "media", name, "duration",
                                       me.duration >= 0 ? json_real(me.duration)
                                                        : json_null()));
    pthread_mutex_unlock(&s->lock);
    return ret;
}

static enum MHD_Result api_query_path(vtr_web_server *srv, struct MHD_Connection *c)
{
    enum MHD_Result ret;
    served *s = find_index(srv, c, &ret);
    const char *path = arg(c, "path");
    long long k, offset;
    if (!s)
        return ret;
    if (!srv->loopback)
        return send_error(c, MHD_HTTP_FORBIDDEN, "queries by a path on the server are taken "
                          "only when it listens on a loopback address: upload the file");
    if (!path)
        return send_error(c, MHD_HTTP_BAD_REQUEST, "no file: give path=FILE, or POST it");
    if (!page_args(c, &k, &offset, &ret))
        return ret;
    return media_query(c, s, path, path, k, offset);
}

static enum MHD_Result api_query_upload(vtr_web_server *srv, struct MHD_Connection *c,
                                        upload *u)
{
    enum MHD_Result ret;
    served *s = find_index(srv, c, &ret);
    long long k, offset;
    if (!s)
        return ret;
    if (u->too_big)
        return send_error(c, MHD_HTTP_CONTENT_TOO_LARGE, "the file is larger than %lld bytes",
                          (long long)srv->max_upload);
    if (u->write_failed)
        return send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "the upload could not be stored "
                          "in a temporary file (%s)", u->path);
    if (u->size == 0)
        return send_error(c, MHD_HTTP_BAD_REQUEST, "no file: POST an image or a video as the "
                          "request's body");
    if (!page_args(c, &k, &offset, &ret))
        return ret;
    const char *name = arg(c, "name");
    return media_query(c, s, u->path, name ? name : "uploaded file", k, offset);
}

/* The Content-Type of a media file, from its extension. */
static const char *media_type(const char *path)
{
    static const char *const types[][2] = {
        {".mp4", "video/mp4"},   {".m4v", "video/mp4"},        {".mov", "video/quicktime"},
        {".webm", "video/webm"}, {".mkv", "video/x-matroska"}, {".ogv", "video/ogg"},
        {".ogg", "video/ogg"},   {".avi", "video/x-msvideo"},  {".jpg", "image/jpeg"},
        {".jpeg", "image/jpeg"}, {".png", "image/png"},        {".gif", "image/gif"},
        {".webp", "image/webp"}, {".bmp", "image/bmp"},
    };
    const char *dot = strrchr(path, '.');
    for (size_t i = 0; dot && i < sizeof types / sizeof *types; i++)
        if (strcasecmp(dot, types[i][0]) == 0)
            return types[i][1];
    return "application/octet-stream";
}

static enum MHD_Result media(vtr_web_server *srv, struct MHD_Connection *c)
{
    enum MHD_Result ret;
    served *s = find_index(srv, c, &ret);
    const char *key = arg(c, "key");
    if (!s)
        return ret;
    if (!key)
        return send_error(c, MHD_HTTP_BAD_REQUEST, "no item: give key=KEY");
    /* only a live item of the index whose catalog record names its file */
    vtr_item item = {0};
    vtr_error e;
    int64_t first;
    pthread_mutex_lock(&s->lock);
    refresh(s);
    vtr_status st = vtr_embedding_index_find(s->ts.ix, key, &first, NULL, &e);
    if (st == VTR_OK && !s->ts.cat)
        st = vtr_fail(&e, VTR_ERR_NOT_FOUND, "index %s has no catalog of files", s->name);
    if (st == VTR_OK)
        st = vtr_catalog_find_item(s->ts.cat, s->ts.dataset_id, key, &item, &e);
    if (st == VTR_OK && !item.path)
        st = vtr_fail(&e, VTR_ERR_NOT_FOUND, "item %s has no file", key);
    char *path = st == VTR_OK ? strdup(item.path) : NULL;
    vtr_item_free(&item);
    pthread_mutex_unlock(&s->lock);
    if (st == VTR_ERR_NOT_FOUND)
        return send_error(c, MHD_HTTP_NOT_FOUND, "no item %s in index %s", key, s->name);
    if (st != VTR_OK)
        return send_failure(c, &e);
    if (!path)
        return send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        int code = errno;
        if (fd >= 0)
            close(fd);
        ret = send_error(c, MHD_HTTP_NOT_FOUND, "item %s: %s: %s", key, path,
                                         fd >= 0 ? "not a file" : strerror(code));
        free(path);
        return ret;
    }
    int64_t start, length;
    vtr_http_range_kind kind = vtr_http_range_parse(
        MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_RANGE), sb.st_size,
        &start, &length);
    char range[96];
    if (kind == VTR_RANGE_UNSATISFIABLE) {
        close(fd);
        snprintf(range, sizeof range, "bytes */%lld", (long long)sb.st_size);
        struct MHD_Response *r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_RANGE, range);
        ret = MHD_queue_response(c, MHD_HTTP_RANGE_NOT_SATISFIABLE, r);
        MHD_destroy_response(r);
    } else {
        /* the response owns fd from here on */
        struct MHD_Response *r =
            MHD_create_response_from_fd_at_offset64((uint64_t)length, fd, (uint64_t)start);
        if (!r) {
            close(fd);
            free(path);
            return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, media_type(path));
        MHD_add_response_header(r, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes");
        MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
        if (kind == VTR_RANGE_PARTIAL) {
            snprintf(range, sizeof range, "bytes %lld-%lld/%lld", (long long)start,
                     (long long)(start + length - 1), (long long)sb.st_size);
            MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_RANGE, range);
        }
        ret = MHD_queue_response(c, kind == VTR_RANGE_PARTIAL ? MHD_HTTP_PARTIAL_CONTENT
                                                              : MHD_HTTP_OK, r);
        MHD_destroy_response(r);
    }
    free(path);
    return ret;
}

static enum MHD_Result thumb(vtr_web_server *srv, struct MHD_Connection *c)
{
    enum MHD_Result ret;
    served *s = find_index(srv, c, &ret);
    const char *key = arg(c, "key");
    long long frame;
    if (!s)
        return ret;
    if (!key)
        return send_error(c, MHD_HTTP_BAD_REQUEST, "no item: give key=KEY");
    if (!int_arg(c, "frame", 0, INT32_MAX, 0, &frame, &ret))
        return ret;
    vtr_item item;
    vtr_error e;
    void *jpeg = NULL;
    size_t size = 0;
    pthread_mutex_lock(&s->lock);
    vtr_status st = s->ts.cat ? vtr_catalog_find_item(s->ts.cat, s->ts.dataset_id, key, &item, &e)
                              : vtr_fail(&e, VTR_ERR_NOT_FOUND, "no catalog");
    if (st == VTR_OK) {
        st = vtr_catalog_item_frame_jpeg(s->ts.cat, item.id, frame, &jpeg, &size, &e);
        vtr_item_free(&item);
    }
    pthread_mutex_unlock(&s->lock);
    if (st == VTR_ERR_NOT_FOUND)
        return send_error(c, MHD_HTTP_NOT_FOUND, "no picture of frame %lld of item %s in index "
                          "%s", frame, key, s->name);
    if (st != VTR_OK)
        return send_failure(c, &e);
    struct MHD_Response *r = MHD_create_response_from_buffer(size, jpeg, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(jpeg);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "image/jpeg");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "max-age=60");
    ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* ---- the runs page ------------------------------------------------------------------ */

/* cairo and fontconfig draw one figure at a time. */
static pthread_mutex_t plot_lock = PTHREAD_MUTEX_INITIALIZER;

static enum MHD_Result api_runs(vtr_web_server *srv, struct MHD_Connection *c)
{
    vtr_run_list l;
    vtr_error e;
    if (vtr_run_list_scan((const char *const *)srv->runs, (size_t)srv->n_runs, &l, &e) != VTR_OK)
        return send_failure(c, &e);
    json_t *list = json_array();
    for (size_t i = 0; list && i < l.n; i++) {
        vtr_run_metrics m;
        vtr_error me;
        json_t *o;
        if (vtr_run_metrics_read(l.dirs[i], &m, &me) != VTR_OK) {
            o = json_pack("{s:s, s:s}", "name", l.names[i], "error", me.msg);
        } else {
            double best = NAN;
            for (size_t j = 0; j < m.n; j++)
                if (!isnan(m.rsum[j]) && !(m.rsum[j] <= best))
                    best = m.rsum[j];
            double loss = m.loss[m.n - 1];
            o = json_pack("{s:s, s:I, s:o, s:o}", "name", l.names[i], "epochs",
                          (json_int_t)m.n, "last_loss",
                          isnan(loss) ? json_null() : json_real(loss), "best_rsum",
                          isnan(best) ? json_null() : json_real(best));
            vtr_run_metrics_free(&m);
        }
        if (json_array_append_new(list, o) != 0) {
            json_decref(list);
            list = NULL;
        }
    }
    vtr_run_list_free(&l);
    return send_json(c, MHD_HTTP_OK, list ? json_pack("{s:o}", "runs", list) : NULL);
}

/* Sends a rendered figure (freeing it). */
static enum MHD_Result send_plot(struct MHD_Connection *c, vtr_plot_format fmt,
                                 unsigned char *data, size_t size)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(size, data, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(data);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, vtr_plot_format_mime(fmt));
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* The format a plot request asks for (format=svg|png, default svg); false (an error
 * sent) when it is neither. */
static bool plot_format(struct MHD_Connection *c, vtr_plot_format *fmt, enum MHD_Result *ret)
{
    const char *f = arg(c, "format");
    vtr_error e;
    *fmt = VTR_PLOT_SVG;
    if (f && vtr_plot_format_parse(f, fmt, &e) != VTR_OK) {
        *ret = send_failure(c, &e);
        return false;
    }
    return true;
}

/* What a plot request names: the value of its argument param (the run or runs), its
 * format, and the runs there are (*l, to free); NULL (an error sent, *ret its result) when
 * the argument is missing, the format unknown or the runs cannot be listed. */
static const char *plot_request(vtr_web_server *srv, struct MHD_Connection *c,
                                const char *param, vtr_plot_format *fmt, vtr_run_list *l,
                                enum MHD_Result *ret)
{
    const char *v = arg(c, param);
    vtr_error e;
    if (!v || !*v) {
        *ret = send_error(c, MHD_HTTP_BAD_REQUEST, "no run: give %s=NAME", param);
        return NULL;
    }
    if (!plot_format(c, fmt, ret))
        return NULL;
    if (vtr_run_list_scan((const char *const *)srv->runs, (size_t)srv->n_runs, l, &e)) {
        *ret = send_failure(c, &e);
        return NULL;
    }
    return v;
}

static enum MHD_Result plot_curves(vtr_web_server *srv, struct MHD_Connection *c)
{
    vtr_plot_format fmt;
    vtr_run_list l;
    enum MHD_Result ret;
    const char *names = plot_request(srv, c, "runs", &fmt, &l, &ret);
    if (!names)
        return ret;
    vtr_error e;
    char *copy = strdup(names), *save = NULL;
    const char **dirs = calloc(l.n + 1, sizeof *dirs);
    size_t n = 0;
    vtr_status st = copy && dirs ? VTR_OK : vtr_fail(&e, VTR_ERR_NOMEM, "out of memory");
    for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; st == VTR_OK && t;
         t = strtok_r(NULL, ",", &save)) {
        const char *dir = vtr_run_list_find(&l, t);
        if (!dir)
            st = vtr_fail(&e, VTR_ERR_NOT_FOUND, "no run named %s", t);
        else if (n < l.n)
            dirs[n++] = dir;
    }
    unsigned char *data = NULL;
    size_t size = 0;
    if (st == VTR_OK) {
        vtr_training_curves tc;
        vtr_curves_options co = {.separate = arg(c, "separate") != NULL};
        pthread_mutex_lock(&plot_lock);
        if ((st = vtr_training_curves_build(dirs, n, &co, &tc, &e)) == VTR_OK) {
            st = vtr_plot_render(&tc.plot, fmt, &data, &size, &e);
            vtr_training_curves_free(&tc);
        }
        pthread_mutex_unlock(&plot_lock);
    }
    free(copy);
    free(dirs);
    vtr_run_list_free(&l);
    return st == VTR_OK ? send_plot(c, fmt, data, size) : send_failure(c, &e);
}

static enum MHD_Result plot_gpo(vtr_web_server *srv, struct MHD_Connection *c)
{
    vtr_plot_format fmt;
    vtr_run_list l;
    enum MHD_Result ret;
    const char *name = plot_request(srv, c, "run", &fmt, &l, &ret);
    if (!name)
        return ret;
    vtr_error e;
    const char *dir = vtr_run_list_find(&l, name);
    char *ckpt = dir ? vtr_path_join(dir, VTR_RUN_BEST) : NULL;
    if (ckpt && access(ckpt, R_OK) != 0) {
        free(ckpt);
        ckpt = vtr_path_join(dir, VTR_RUN_LAST);
    }
    vtr_status st = !dir    ? vtr_fail(&e, VTR_ERR_NOT_FOUND, "no run named %s", name)
                    : !ckpt ? vtr_fail(&e, VTR_ERR_NOMEM, "out of memory")
                            : VTR_OK;
    unsigned char *data = NULL;
    size_t size = 0;
    char title[600];
    snprintf(title, sizeof title, "GPO's pooling coefficients: %s", name);
    vtr_gpo_curves_options go = {.title = title};
    if (st == VTR_OK) {
        vtr_gpo_curves gc;
        pthread_mutex_lock(&plot_lock);
        if ((st = vtr_gpo_curves_build(ckpt, &go, &gc, &e)) == VTR_OK) {
            st = vtr_plot_render(&gc.plot, fmt, &data, &size, &e);
            vtr_gpo_curves_free(&gc);
        }
        pthread_mutex_unlock(&plot_lock);
    }
    free(ckpt);
    vtr_run_list_free(&l);
    return st == VTR_OK ? send_plot(c, fmt, data, size) : send_failure(c, &e);
}

/* Takes a chunk of a POST's body into u (its temporary file created on the first). */
static void upload_chunk(vtr_web_server *srv, upload *u, const char *data, size_t n)
{
    if (u->too_big || u->write_failed)
        return;
    if ((int64_t)n > srv->max_upload - u->size) {
        u->too_big = true;
        return;
    }
    if (u->fd < 0) {
        const char *tmp = getenv("TMPDIR");
        snprintf(u->path, sizeof u->path, "%.40s/vtr-serve-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if ((u->fd = mkostemp(u->path, O_CLOEXEC)) < 0) {
            u->write_failed = true;
            return;
        }
    }
    for (size_t done = 0; done < n;) {
        ssize_t w = write(u->fd, data + done, n - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            u->write_failed = true;
            return;
        }
        done += (size_t)w;
    }
    u->size += (int64_t)n;
}

/* *req_cls of a request other than an upload, between the first call of its handler (the
 * headers) and the second: answering in the first call would make libmicrohttpd close
 * the connection (it cannot know there is no body), losing keep-alive. */
static char seen_headers;

static void request_done(void *cls, struct MHD_Connection *c, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
    upload *u = *req_cls;
    if (!u || *req_cls == &seen_headers)
        return;
    if (u->fd >= 0) {
        close(u->fd);
        unlink(u->path);
    }
    free(u);
    *req_cls = NULL;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *data,
                              size_t *data_size, void **req_cls)
{
    vtr_web_server *srv = cls;
    bool get = strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
               strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
    bool post = strcmp(method, MHD_HTTP_METHOD_POST) == 0;
    if (post && strcmp(url, "/api/query-media") == 0) {
        upload *u = *req_cls;
        if (!u) { /* the headers: refuse a declared size over the cap before the body */
            const char *len = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                          MHD_HTTP_HEADER_CONTENT_LENGTH);
            if (len && strtoll(len, NULL, 10) > srv->max_upload)
                return send_error(c, MHD_HTTP_CONTENT_TOO_LARGE, "the file is larger than "
                                  "%lld bytes", (long long)srv->max_upload);
            if (!(u = calloc(1, sizeof *u)))
                return MHD_NO;
            u->fd = -1;
            *req_cls = u;
            return MHD_YES;
        }
        if (*data_size > 0) {
            upload_chunk(srv, u, data, *data_size);
            *data_size = 0;
            return MHD_YES;
        }
        return api_query_upload(srv, c, u);
    }
    if (!*req_cls) {
        *req_cls = &seen_headers;
        return MHD_YES;
    }
    if (*data_size > 0) { /* a body on another request: read and ignored */
        *data_size = 0;
        return MHD_YES;
    }
    if (!get)
        return send_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "%s is not served here (a read-only "
                          "server: GET, HEAD, and POST of a query file)", method);
    if (strcmp(url, "/") == 0 || strcmp(url, "/index.html") == 0 || strcmp(url, "/runs") == 0)
        return send_text(c, MHD_HTTP_OK, "text/html; charset=utf-8", vtr_web_page,
                         vtr_web_page_size(), MHD_RESPMEM_PERSISTENT);
    if (strcmp(url, "/api/indexes") == 0)
        return api_indexes(srv, c);
    if (strcmp(url, "/api/search") == 0)
        return api_search(srv, c);
    if (strcmp(url, "/api/similar") == 0)
        return api_similar(srv, c);
    if (strcmp(url, "/api/query-media") == 0)
        return api_query_path(srv, c);
    if (strcmp(url, "/media") == 0)
        return media(srv, c);
    if (strcmp(url, "/thumb") == 0)
        return thumb(srv, c);
    if (strcmp(url, "/api/runs") == 0)
        return api_runs(srv, c);
    if (strcmp(url, "/plot/curves") == 0)
        return plot_curves(srv, c);
    if (strcmp(url, "/plot/gpo") == 0)
        return plot_gpo(srv, c);
    return send_error(c, MHD_HTTP_NOT_FOUND, "nothing at %.200s", url);
}

/* ---- starting and stopping -------------------------------------------------------- */

void vtr_web_server_stop(vtr_web_server *s)
{
    if (!s)
        return;
    if (s->daemon)
        MHD_stop_daemon(s->daemon);
    for (int i = 0; i < s->n; i++)
        served_close(&s->idx[i]);
    for (int i = 0; i < s->n_runs; i++)
        free(s->runs[i]);
    free(s->runs);
    free(s->idx);
    free(s);
}

int vtr_web_server_port(const vtr_web_server *s)
{
    return s->port;
}

bool vtr_web_server_loopback(const vtr_web_server *s)
{
    return s->loopback;
}

vtr_status vtr_web_server_start(const vtr_web_server_options *o, vtr_web_server **out,
                                vtr_error *err)
{
    *out = NULL;
    if (!o || o->n_indexes < 1)
        return vtr_fail(err, VTR_ERR_INVALID, "no index to serve");
    if (o->port < 0 || o->port > 65535)
        return vtr_fail(err, VTR_ERR_INVALID, "port %d is not in [0, 65535]", o->port);
    const char *address = o->address ? o->address : "127.0.0.1";
    struct sockaddr_storage sa;
    memset(&sa, 0, sizeof sa);
    struct sockaddr_in *v4 = (struct sockaddr_in *)&sa;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&sa;
    bool loopback;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD;
    if (inet_pton(AF_INET, address, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)o->port);
        loopback = (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
    } else if (inet_pton(AF_INET6, address, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)o->port);
        loopback = IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr);
        flags |= MHD_USE_IPv6;
    } else {
        return vtr_fail(err, VTR_ERR_INVALID, "address '%s' is not an IPv4 or IPv6 address",
                        address);
    }
    vtr_web_server *s = calloc(1, sizeof *s);
    if (!s || !(s->idx = calloc((size_t)o->n_indexes, sizeof *s->idx))) {
        free(s);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    s->loopback = loopback;
    if (o->n_runs > 0 && !(s->runs = calloc((size_t)o->n_runs, sizeof *s->runs))) {
        vtr_web_server_stop(s);
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < o->n_runs; i++)
        if ((s->runs[s->n_runs++] = strdup(o->runs[i])) == NULL) {
            vtr_web_server_stop(s);
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        }
    s->max_upload = o->max_upload > 0 ? o->max_upload : VTR_SERVE_MAX_UPLOAD;
    s->threads = o->threads;
    vtr_status st = VTR_OK;
    for (int i = 0; i < o->n_indexes && st == VTR_OK; i++) {
        s->n = i + 1;
        st = served_open(&s->idx[i], &o->indexes[i], o, err); /* its errors name the index */
        for (int j = 0; j < i && st == VTR_OK; j++)
            if (strcmp(s->idx[j].name, s->idx[i].name) == 0)
                st = vtr_fail(err, VTR_ERR_INVALID, "two indexes are named %s: name them "
                              "(NAME=DIR)", s->idx[i].name);
    }
    if (st != VTR_OK) {
        vtr_web_server_stop(s);
        return st;
    }
    s->daemon = MHD_start_daemon(
        flags, (uint16_t)o->port, NULL, NULL, handle, s, MHD_OPTION_SOCK_ADDR,
        (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)(o->max_connections > 0 ? o->max_connections : 64),
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60, MHD_OPTION_NOTIFY_COMPLETED,
        request_done, s, MHD_OPTION_END);
    if (!s->daemon) {
        int code = errno;
        vtr_web_server_stop(s);
        return vtr_fail(err, VTR_ERR_IO, "cannot listen on %s port %d: %s", address, o->port,
                        code ? strerror(code) : "libmicrohttpd refused");
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : o->port;
    *out = s;
    return VTR_OK;
}
