/* One media file (a video, or an image as a one-frame video) to its embedding by a
 * trained model: N frames sampled uniformly (decode/decode_item.h, t_i = start + (i +
 * 0.5) * duration / N), CNN features of each frame (features/extractor.h), pooled and
 * projected by the model (index/embedder.h). What vtr-index does to each file of an
 * archive (index/archive_index.h), and vtr-serve to a query image or video. Each file
 * goes through the backbone alone, so that its embedding never depends on other files.
 *
 * Two kinds of failure. A failure of the file (it cannot be decoded, has no frames, gives
 * non-finite features) leaves the media embedder usable for the next file. A failure of
 * the backbone or the model (out of memory, a backend error) breaks it:
 * vtr_media_embedder_broken is then true and only free remains.
 */
#ifndef VTR_MEDIA_EMBEDDER_H
#define VTR_MEDIA_EMBEDDER_H

#include <stdbool.h>
#include <stdint.h>

#include "decode/decode_item.h"
#include "features/backbone.h"
#include "features/preprocess.h"
#include "index/embedder.h"
#include "lib/error.h"

typedef struct vtr_media_embedder vtr_media_embedder;

/* A media embedder over the model e and the backbone b (both borrowed: they must outlive
 * it; b's feature size must be e's, else VTR_ERR_INVALID), sampling frames (>= 1) frames
 * per video, preprocessing them with pre (every field set: vtr_preprocess_fill), decoding
 * with threads threads (0: one per core). VTR_ERR_NOMEM. *out is NULL on failure. */
vtr_status vtr_media_embedder_new(vtr_embedder *e, vtr_backbone *b,
                                  const vtr_preprocess_options *pre, int frames, int threads,
                                  vtr_media_embedder **out, vtr_error *err);

void vtr_media_embedder_free(vtr_media_embedder *m);

/* One file's embedding; every field is owned by the media embedder and valid until its
 * next call. */
typedef struct vtr_media_embedding {
    int64_t vectors;         /* rows of embedding: 1, or an HGR model's 1 + 2 x frames */
    const float *embedding;  /* (vectors, E) float32, as vtr_embedder_embed_sets gives it */
    double duration;         /* seconds; 0 for an image; -1 when unknown. Set once the file
                              * is decoded, also when a later step fails */
    const vtr_decoded_item *decoded; /* the sampled frames (uint8 (N, H, W, 3)) and their
                                      * metadata (timestamps, ...); NULL before decoding */
    const float *frame_vectors; /* (N, E): each frame's embedding alone, the model's first
                                 * vector of the one-frame set (where in a video a query
                                 * matches best) */
} vtr_media_embedding;

/* Decodes path, extracts and embeds it into *out (key names the item in the extractor
 * and in messages). The file's failures: those of vtr_decode_item, VTR_ERR_FORMAT "PATH:
 * no frames decoded", VTR_ERR_INVALID (frames the backbone cannot take; non-finite
 * features); failures that break m as above. VTR_ERR_INVALID on a broken m. */
vtr_status vtr_media_embedder_embed(vtr_media_embedder *m, const char *path, const char *key,
                                    vtr_media_embedding *out, vtr_error *err);

/* The decoding m does (vtr_decode_item's options): for decoding its files elsewhere,
 * e.g. ahead on another thread (decode/decode_ahead.h). Lives as long as m. */
const vtr_decode_options *vtr_media_embedder_decode_options(const vtr_media_embedder *m);

/* vtr_media_embedder_embed on frames decoded already, by vtr_decode_item with m's
 * options from path: *item is taken over (kept as out->decoded until m's next call; freed
 * by m), also on failure. The same results and failures, less decoding's. */
vtr_status vtr_media_embedder_embed_decoded(vtr_media_embedder *m, const char *path,
                                            const char *key, vtr_decoded_item *item,
                                            vtr_media_embedding *out, vtr_error *err);

/* Whether a failure of the backbone or the model ended m's use. */
bool vtr_media_embedder_broken(const vtr_media_embedder *m);

#endif
