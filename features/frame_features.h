/* vtr-features without --audio: record streams of frames -> CNN feature sets
 * (features/extractor.h) written to a program's item output (lib/item_output.h). Each
 * item keeps its key and metadata, with "extractor" added: the run's provenance (below)
 * and, for grid features, "grid_size" [gh, gw]. */
#ifndef VTR_FRAME_FEATURES_H
#define VTR_FRAME_FEATURES_H

#include <jansson.h>
#include <stdbool.h>

#include "features/backbone.h"
#include "features/extractor.h"
#include "lib/error.h"
#include "lib/item_output.h"
#include "lib/log.h"
#include "lib/shard.h"

typedef struct vtr_frame_features vtr_frame_features;

/* A run over backbone b (borrowed; it must outlive the run), loaded as arch from weights
 * whose SHA-256 (hex) is sha256, with extractor options xo; half: the output writes
 * float16. vtr_extractor_new's errors; VTR_ERR_NOMEM. *out is NULL on failure. */
vtr_status vtr_frame_features_new(vtr_backbone *b, vtr_backbone_arch arch, const char *weights,
                                  const char *sha256, const vtr_extractor_options *xo, bool half,
                                  vtr_frame_features **out, vtr_error *err);

/* Frees f; safe on NULL. */
void vtr_frame_features_free(vtr_frame_features *f);

/* The run's provenance (borrowed, lives as long as f): {"arch", "weights" (the path),
 * "sha256", "grid", "dtype" ("float32" or "float16"), "dim", "preprocess": {"resize",
 * "crop", "mean": [3], "std": [3]} (as given, to 7 significant digits), "version"}. */
const json_t *vtr_frame_features_provenance(const vtr_frame_features *f);

/* Reads the n named record streams one after the other (none: stdin; "-": stdin), runs
 * the frames uint8 (N, H, W, 3) of every item that shard takes (lib/shard.h: the records
 * at positions p, counted over all streams, with vtr_shard_takes) through the backbone
 * and writes its features to out; the other records are skipped. report->item is told about every item written or refused by out; report->error
 * about a stream that cannot be opened or read (key NULL) and a record that is not
 * frames (its key); the others still go. When out or the backbone breaks, report->error
 * is told (with the key of the record being added, NULL at the end) and its status is
 * returned: the run stops. VTR_OK otherwise. */
vtr_status vtr_frame_features_run(vtr_frame_features *f, char *const *inputs, int n,
                                  const vtr_shard *shard, vtr_item_output *out,
                                  const vtr_item_report *report);

#endif
