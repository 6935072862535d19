/* Synthetic captioned "videos" for the training tests, written in exactly the layout a
 * run reads (docs/training.md): a catalog (dataset "synth", splits train / val / test)
 * and a float32 feature store, made with the library APIs.
 *
 * Item i shows object o(i) = i mod n_objects. Each of its `frames` rows is Gaussian noise
 * (standard deviation `noise`) in all `dim` dimensions; in v of them, v drawn uniformly
 * from [min_visible, max_visible] at random positions, the object is visible: row[o] +=
 * amplitude. Its captions name the object through templates ("a video of a cat", "the cat
 * appears briefly", ...); the last split's items get the templates in a fixed order, so
 * that two items of the same object may share a caption text (HGR de-duplication).
 * Everything is drawn from lib/rng.h streams of `seed`.
 */
#ifndef VTR_TESTS_TRAIN_FIXTURE_H
#define VTR_TESTS_TRAIN_FIXTURE_H

#include <stdint.h>

typedef struct train_fixture_spec {
    int n_objects;         /* <= 24 (the object names) */
    int train_items, val_items, test_items;
    int captions_per_item; /* <= 5 (the templates) */
    int frames;            /* rows per item */
    int min_visible, max_visible;
    int dim;               /* >= n_objects */
    float amplitude, noise;
    uint64_t seed;
    int objects_per_item;  /* 0 or 1: one object; 2: item i also shows a second object
                              (train_fixture_second_object), in its own visible frames, and
                              caption c names the first object when c is even, the second
                              when odd */
} train_fixture_spec;

/* Writes DIR/catalog.db and the store DIR/features (DIR must exist); fails the test on any
 * error. */
void train_fixture_write(const char *dir, const train_fixture_spec *spec);

/* The second object of item i (objects_per_item 2): never the first (i % n_objects), and
 * varying with the item. */
int train_fixture_second_object(const train_fixture_spec *spec, int i);

/* The object names, for captions the tests write themselves. */
extern const char *const train_fixture_objects[24];

#endif
