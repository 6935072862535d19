/* Decoding ahead on a thread (decode/decode_ahead.h): items come out in the list's order,
 * each exactly as vtr_decode_item gives it (frames, metadata, failures and their
 * messages), whatever the depth (0: no thread, each decoded when asked for); freeing early
 * stops the thread and frees what it had decoded (the sanitizer build checks the leaks); a
 * negative depth is refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "decode/decode_ahead.h"
#include "test_decode_fixtures.h"

/* a video, a missing file, another codec, an image, a file that is not media, the first
 * video again */
static void list(const char *paths[6])
{
    static char garbage[1024];
    snprintf(garbage, sizeof garbage, "%s", test_path("not_media.mp4"));
    FILE *f = fopen(garbage, "wb");
    CHECK(f);
    fputs("this is not a video\n", f);
    fclose(f);
    paths[0] = fixture_get("h264")->path;
    paths[1] = test_path("no_such_file.mp4");
    paths[2] = fixture_get("vp9")->path;
    paths[3] = fixture_get("png")->path;
    paths[4] = garbage;
    paths[5] = fixture_get("h264")->path;
}

static void options(vtr_decode_options *o)
{
    vtr_decode_options_defaults(o);
    o->sampler.mode = VTR_SAMPLE_FRAMES;
    o->sampler.n = 4;
    o->threads = 1;
}

TEST(decode_ahead_gives_what_decode_item_gives)
{
    fixture_quiet();
    const char *paths[6];
    list(paths);
    vtr_decode_options o;
    options(&o);
    for (int depth = 0; depth <= 3; depth++) { /* 0: each decoded when asked for */
        vtr_decode_ahead *d = NULL;
        vtr_error err, want_err;
        CHECK_OK(vtr_decode_ahead_start(paths, 6, &o, depth, &d, &err));
        for (int i = 0; i < 6; i++) {
            vtr_decoded_item got, want;
            memset(&want, 0, sizeof want);
            vtr_error_clear(&err);
            vtr_error_clear(&want_err);
            vtr_status st = vtr_decode_ahead_next(d, &got, &err);
            vtr_status want_st = vtr_decode_item(paths[i], &o, NULL, &want, &want_err);
            CHECK_MSG(st == want_st, "depth %d item %d: status %d, decode_item %d", depth, i,
                      (int)st, (int)want_st);
            if (st != VTR_OK) {
                CHECK(strcmp(err.msg, want_err.msg) == 0);
                continue;
            }
            CHECK(i != 1 && i != 4); /* the missing and the garbage file fail */
            CHECK_EQ_INT(got.frames.shape[0], want.frames.shape[0]);
            CHECK(memcmp(got.frames.data, want.frames.data,
                         (size_t)vtr_tensor_numel(&got.frames)) == 0);
            CHECK(json_equal(json_object_get(got.meta, "timestamps"),
                             json_object_get(want.meta, "timestamps")));
            vtr_decoded_item_free(&got);
            vtr_decoded_item_free(&want);
        }
        vtr_decoded_item none;
        CHECK_FAILS(vtr_decode_ahead_next(d, &none, &err), VTR_ERR_INVALID, "no more items");
        vtr_decode_ahead_free(d);
    }
}

TEST(decode_ahead_freed_early)
{
    fixture_quiet();
    const char *paths[6];
    list(paths);
    vtr_decode_options o;
    options(&o);
    vtr_error err;
    for (int taken = 0; taken <= 2; taken++) {
        vtr_decode_ahead *d = NULL;
        CHECK_OK(vtr_decode_ahead_start(paths, 6, &o, taken == 1 ? 0 : 3, &d, &err));
        for (int i = 0; i < taken; i++) {
            vtr_decoded_item item;
            vtr_status st = vtr_decode_ahead_next(d, &item, &err);
            if (st == VTR_OK)
                vtr_decoded_item_free(&item);
        }
        vtr_decode_ahead_free(d); /* with items decoded and not taken */
    }
    vtr_decode_ahead *d = NULL;
    CHECK_OK(vtr_decode_ahead_start(paths, 0, &o, 1, &d, &err)); /* nothing to decode */
    vtr_decoded_item none;
    CHECK_FAILS(vtr_decode_ahead_next(d, &none, &err), VTR_ERR_INVALID, "no more items");
    vtr_decode_ahead_free(d);
    vtr_decode_ahead_free(NULL);
    CHECK_FAILS(vtr_decode_ahead_start(paths, 6, &o, -1, &d, &err), VTR_ERR_INVALID, "depth -1");
    CHECK(d == NULL);
}
