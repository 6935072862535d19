/* The items of a vtr-decode run, decoded one after the other (decode/decode_item.h) into
 * a program's item output (lib/item_output.h), each with its audio where asked. */
#ifndef VTR_DECODE_ITEMS_H
#define VTR_DECODE_ITEMS_H

#include "decode/decode_item.h"
#include "lib/error.h"
#include "lib/item_output.h"
#include "lib/keyed_files.h"
#include "lib/log.h"

/* Where the items' audio tracks go: nowhere (all NULL), file (the one item's), or
 * dir/KEY.ext (dir must exist; a key that cannot name a file there,
 * vtr_key_check_file_name, fails its item before it is decoded). */
typedef struct vtr_decode_audio {
    const char *file;
    const char *dir;
    const char *ext; /* "wav" or "flac", with dir */
} vtr_decode_audio;

/* Decodes each item (its path, under its key) with o and writes its frames (N, H, W, 3)
 * and metadata, with "decoder": "vtr-decode VERSION" added, to out. report->item is told
 * about every item: written, or failed (refused by out, asked before it is decoded:
 * vtr_item_output_check; cannot be decoded), in which case
 * nothing of it is left (the audio file it wrote removed; no other file is) and the others
 * still go. When out
 * breaks, that item is reported as failed and the run stops: the status of the failure
 * is returned (the items not reached are not reported). VTR_OK otherwise. */
vtr_status vtr_decode_items(const vtr_keyed_files *items, const vtr_decode_options *o,
                            const vtr_decode_audio *audio, vtr_item_output *out,
                            const vtr_item_report *report);

#endif
