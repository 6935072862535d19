/* Fuzz target: the decode path (decode/decode_item.h) on arbitrary media, as vtr-decode
 * and vtr-index run it: the input, written to a scratch file (vtr_decode_item takes a
 * path), is demuxed, decoded, sampled and converted to 32x32 RGB frames. The input's
 * length picks the sampler (so that a seed keeps its bytes): length % 4 gives frames:4
 * (with seeks), fps:5, every:2 or keyframes; (length / 4) % 2 decodes straight (no jumps)
 * or not; (length / 8) % 2 also writes the audio track; (length / 16) % 2 gives one thread
 * or two (timed samplers: stretches of the file decoded at once). A failure
 * must come with one line (lib/error.h) starting with the path and leave nothing allocated
 * and no audio file; a success gives N <= MAX_FRAMES frames of 32x32x3 and metadata that
 * agree. The CI runs it with a per-input time limit (fuzz_decode.options): a slow input
 * is a finding. */
#include <jansson.h>
#include <libavutil/log.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode/decode_item.h"
#include "fuzz_util.h"

#define SIDE 32
#define MAX_FRAMES 20000 /* 61 MB of frames: a header declaring days fails, as it must */

static volatile unsigned sink; /* keeps the reads of the frames */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    av_log_set_level(AV_LOG_QUIET);
    fuzz_scratch();
    fuzz_write_file("media", data, size);
    char *path = fuzz_path("media"), *audio = fuzz_path("audio.wav");

    vtr_decode_options o;
    vtr_decode_options_defaults(&o);
    static const vtr_sampler samplers[] = {
        {.mode = VTR_SAMPLE_FRAMES, .n = 4},
        {.mode = VTR_SAMPLE_FPS, .fps_num = 5, .fps_den = 1},
        {.mode = VTR_SAMPLE_EVERY, .n = 2},
        {.mode = VTR_SAMPLE_KEYFRAMES},
    };
    o.sampler = samplers[size % 4];
    o.straight = (size / 4) % 2;
    o.geometry.width = o.geometry.height = SIDE;
    o.threads = 1 + (int)((size / 16) % 2);
    o.max_frames = MAX_FRAMES;
    bool with_audio = (size / 8) % 2;

    vtr_decoded_item item = {0};
    vtr_error err;
    vtr_status st = vtr_decode_item(path, &o, with_audio ? audio : NULL, &item, &err);
    if (st != VTR_OK) {
        fuzz_check_message(&err, path);
        if (item.frames.data || item.meta || fuzz_exists("audio.wav"))
            abort();
    } else {
        const vtr_tensor *f = &item.frames;
        if (f->dtype != VTR_U8 || f->ndim != 4 || f->shape[0] > MAX_FRAMES || f->shape[1] != SIDE ||
            f->shape[2] != SIDE || f->shape[3] != 3 ||
            json_integer_value(json_object_get(item.meta, "frames")) != f->shape[0] ||
            json_array_size(json_object_get(item.meta, "timestamps")) != (size_t)f->shape[0])
            abort();
        const unsigned char *p = f->data;
        unsigned sum = 0;
        for (size_t i = 0, n = vtr_tensor_nbytes(f); i < n; i++)
            sum += p[i];
        sink = sum;
        vtr_decoded_item_free(&item);
    }
    free(path);
    free(audio);
    return 0;
}
