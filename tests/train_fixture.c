/* Synthetic training data (train_fixture.h). */
#include "train_fixture.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lib/catalog.h"
#include "lib/feature_store.h"
#include "lib/rng.h"

const char *const train_fixture_objects[24] = {
    "cat",  "dog",   "car",   "ball",  "tree",  "boat",   "bird", "horse",
    "chair", "guitar", "cake", "phone", "train", "plane",  "lamp", "shoe",
    "clock", "kite",  "apple", "bottle", "cup",  "fish",   "hat",  "book",
};

static const char *const templates[5] = {
    "a video of a %s", "there is a %s in the clip", "someone shows a %s",
    "the %s appears briefly", "we can see a %s here",
};

int train_fixture_second_object(const train_fixture_spec *sp, int i)
{
    int n = sp->n_objects;
    return (i % n + 1 + (i / n) % (n - 1)) % n;
}

/* Adds amplitude to dimension obj of `visible` frames of rows (frames, dim) drawn at
 * random (the first `visible` of a shuffle). */
static void show_object(float *rows, int *pos, const train_fixture_spec *sp, int obj,
                        vtr_rng *rng)
{
    int visible = sp->min_visible +
                  (int)vtr_rng_below(rng, (uint32_t)(sp->max_visible - sp->min_visible + 1));
    for (int f = 0; f < sp->frames; f++)
        pos[f] = f;
    for (int f = 0; f < visible; f++) {
        int j = f + (int)vtr_rng_below(rng, (uint32_t)(sp->frames - f));
        int t = pos[f];
        pos[f] = pos[j];
        pos[j] = t;
        rows[(size_t)pos[f] * (size_t)sp->dim + (size_t)obj] += sp->amplitude;
    }
}

void train_fixture_write(const char *dir, const train_fixture_spec *sp)
{
    vtr_error err;
    vtr_catalog *cat = NULL;
    vtr_feature_store_writer *w = NULL;
    char path[1024], key[64], text[128];
    CHECK(sp->n_objects >= 1 && sp->n_objects <= 24 && sp->dim >= sp->n_objects);
    CHECK(sp->captions_per_item >= 1 && sp->captions_per_item <= 5);
    CHECK(sp->objects_per_item >= 0 && sp->objects_per_item <= 2);
    bool two = sp->objects_per_item == 2;
    CHECK(!two || sp->n_objects >= 2);
    CHECK(sp->min_visible >= 0 && sp->min_visible <= sp->max_visible &&
          sp->max_visible <= sp->frames);

    snprintf(path, sizeof path, "%s/catalog.db", dir);
    CHECK_OK(vtr_catalog_open(path, &cat, &err));
    snprintf(path, sizeof path, "%s/features", dir);
    vtr_feature_store_options opt = {.dtype = VTR_F32, .dim = sp->dim, .extractor = "synthetic"};
    CHECK_OK(vtr_feature_store_writer_open(path, &opt, &w, &err));

    int64_t dataset;
    CHECK_OK(vtr_catalog_begin(cat, &err));
    CHECK_OK(vtr_catalog_add_dataset(cat, "synth", NULL, &dataset, &err));
    float *rows = malloc(sizeof(float) * (size_t)sp->frames * (size_t)sp->dim);
    int *pos = malloc(sizeof(int) * (size_t)sp->frames);
    CHECK(rows && pos);
    const char *const splits[3] = {"train", "val", "test"};
    const int counts[3] = {sp->train_items, sp->val_items, sp->test_items};
    vtr_rng rng;
    vtr_rng_init(&rng, sp->seed, 77);
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < counts[s]; i++) {
            int obj = i % sp->n_objects;
            snprintf(key, sizeof key, "%s%04d", splits[s], i);
            for (size_t k = 0; k < (size_t)sp->frames * (size_t)sp->dim; k++)
                rows[k] = sp->noise * vtr_rng_normal(&rng);
            int objs[2] = {obj, two ? train_fixture_second_object(sp, i) : obj};
            show_object(rows, pos, sp, objs[0], &rng);
            if (two)
                show_object(rows, pos, sp, objs[1], &rng);
            vtr_tensor t = {.dtype = VTR_F32, .ndim = 2, .shape = {sp->frames, sp->dim},
                            .data = rows};
            CHECK_OK(vtr_feature_store_writer_add(w, key, &t, &err));

            vtr_item it = {.dataset_id = dataset, .key = key, .size_bytes = -1,
                           .mtime_ns = -1, .duration_s = -1, .status = VTR_ITEM_OK};
            int64_t id;
            CHECK_OK(vtr_catalog_upsert_item(cat, &it, &id, &err));
            CHECK_OK(vtr_catalog_set_split(cat, id, splits[s], &err));
            int first = s == 2 ? 0 : (int)vtr_rng_below(&rng, 5);
            for (int c = 0; c < sp->captions_per_item; c++) {
                snprintf(text, sizeof text, templates[(first + c) % 5],
                         train_fixture_objects[objs[c % 2]]);
                CHECK_OK(vtr_catalog_add_caption(cat, id, -1, text, NULL, &err));
            }
        }
    }
    CHECK_OK(vtr_catalog_commit(cat, &err));
    CHECK_OK(vtr_feature_store_writer_finish(w, &err));
    vtr_catalog_close(cat);
    free(rows);
    free(pos);
}
