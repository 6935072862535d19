/* The SQLite catalog (lib/catalog.c) and the file hash (lib/hash.c). */
#include "check.h"

#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/catalog.h"
#include "lib/hash.h"

/* A fresh catalog path per test (the name must be unique within the run). */
static const char *db_path(const char *name)
{
    return test_path(name);
}

/* Runs a one-value query on a separate, raw SQLite connection; returns the text of the
 * first column in a static buffer ("" when there is no row). */
static const char *raw_query(const char *path, const char *sql)
{
    static char result[256];
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    result[0] = '\0';
    CHECK_EQ_INT(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    int rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
    CHECK_MSG(rc == SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(db));
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW && sqlite3_column_text(s, 0))
        snprintf(result, sizeof result, "%s", (const char *)sqlite3_column_text(s, 0));
    else
        CHECK_MSG(rc == SQLITE_ROW || rc == SQLITE_DONE, "%s: %s", sql, sqlite3_errmsg(db));
    sqlite3_finalize(s);
    sqlite3_close(db);
    return result;
}

/* An item of dataset ds with the given key and plausible file facts. */
static vtr_item item_of(int64_t ds, const char *key)
{
    vtr_item it = {0};
    it.dataset_id = ds;
    it.key = key;
    it.path = "/data/videos/x.mp4";
    it.size_bytes = 1234;
    it.mtime_ns = 1700000000123456789LL;
    it.duration_s = 12.5;
    it.status = VTR_ITEM_PENDING;
    return it;
}

TEST(catalog_open_creates_schema_version_3_in_wal_mode)
{
    vtr_error err;
    const char *path = db_path("new.db");
    vtr_catalog *cat = NULL;
    CHECK_OK(vtr_catalog_open(path, &cat, &err));
    CHECK(cat != NULL);
    vtr_catalog_close(cat);
    CHECK_STR(raw_query(path, "PRAGMA user_version"), "3");
    CHECK_STR(raw_query(path, "PRAGMA journal_mode"), "wal");
    CHECK_STR(raw_query(path, "PRAGMA application_id"), "1987342881");
    CHECK_STR(raw_query(path, "SELECT group_concat(name, ',') FROM (SELECT name FROM "
                              "sqlite_master WHERE type = 'table' ORDER BY name)"),
              "caption_graphs,captions,datasets,feature_stores,item_frames,items,runs,splits,"
              "vocabularies");
    /* reopening an up-to-date catalog changes nothing */
    CHECK_OK(vtr_catalog_open(path, &cat, &err));
    vtr_catalog_close(cat);
    CHECK_STR(raw_query(path, "PRAGMA user_version"), "3");
}

TEST(catalog_open_existing_creates_nothing)
{
    vtr_error err;
    const char *path = db_path("absent.db");
    vtr_catalog *cat = NULL;
    CHECK_FAILS(vtr_catalog_open_existing(path, &cat, &err), VTR_ERR_NOT_FOUND,
                "absent.db does not exist (vtr-import fills one)");
    CHECK(cat == NULL && access(path, F_OK) != 0);
    CHECK_OK(vtr_catalog_open(path, &cat, &err));
    vtr_catalog_close(cat);
    CHECK_OK(vtr_catalog_open_existing(path, &cat, &err));
    CHECK(cat != NULL);
    vtr_catalog_close(cat);
    /* an empty file, and an SQLite database of no schema, stay as they are */
    const char *empty = db_path("empty.db");
    FILE *f = fopen(empty, "w");
    CHECK(f && fclose(f) == 0);
    CHECK_FAILS(vtr_catalog_open_existing(empty, &cat, &err), VTR_ERR_FORMAT,
                "empty.db is empty, not a vtr catalog");
    struct stat sb;
    CHECK(cat == NULL && stat(empty, &sb) == 0 && sb.st_size == 0);
    const char *bare = db_path("bare.db");
    sqlite3 *db;
    CHECK(sqlite3_open(bare, &db) == SQLITE_OK &&
          sqlite3_exec(db, "CREATE TABLE notes (x)", NULL, NULL, NULL) == SQLITE_OK);
    sqlite3_close(db);
    CHECK_FAILS(vtr_catalog_open_existing(bare, &cat, &err), VTR_ERR_UNSUPPORTED,
                "not a vtr catalog");
    CHECK_STR(raw_query(bare, "SELECT group_concat(name) FROM sqlite_master"), "notes");
}

TEST(catalog_reopen_keeps_data)
{
    vtr_error err;
    const char *path = db_path("reopen.db");
    vtr_catalog *cat = NULL;
    int64_t ds = 0, id = 0;
    CHECK_OK(vtr_catalog_open(path, &cat, &err));
    CHECK_OK(vtr_catalog_add_dataset(cat, "msrvtt", "/data/msrvtt", &ds, &err));
    vtr_item it = item_of(ds, "video7010");
    CHECK_OK(vtr_catalog_upsert_item(cat, &it, &id, &err));
    CHECK_OK(vtr_catalog_add_caption(cat, id, -1, "a man is singing", NULL, &err));
    vtr_catalog_close(cat);

    CHECK_OK(vtr_catalog_open(path, &cat, &err));
    int64_t ds2 = 0;
    CHECK_OK(vtr_catalog_find_dataset(cat, "msrvtt", &ds2, &err));
    CHECK_EQ_INT(ds2, ds);
    vtr_item found;
    CHECK_OK(vtr_catalog_find_item(cat, ds, "video7010", &found, &err));
    CHECK_EQ_INT(found.id, id);
    CHECK_STR(found.path, "/data/videos/x.mp4");
    vtr_item_free(&found);
    vtr_caption_list caps;
    CHECK_OK(vtr_catalog_item_captions(cat, id, &caps, &err));
    CHECK_EQ_INT(caps.n, 1);
    CHECK_STR(caps.captions[0].text, "a man is singing");
    vtr_caption_list_free(&caps);
    vtr_catalog_close(cat);
}

TEST(catalog_newer_or_negative_schema_version_is_refused)
{
    vtr_error err;
    const char *path = db_path("newer.db");
    vtr_catalog *cat = NULL;
    CHECK_OK(vtr_catalog_open(path, &cat, &err));
    vtr_catalog_close(cat);
    raw_query(path, "PRAGMA user_version = 4");
    char want[600];
    snprintf(want, sizeof want, "catalog %s has schema version 4; this vtr knows up to 3",
             path);
    CHECK_FAILS(vtr_catalog_open(path, &cat, &err), VTR_ERR_UNSUPPORTED, want);
    CHECK(cat == NULL);
    CHECK_STR(raw_query(path, "PRAGMA user_version"), "4");
    /* a negative version (a damaged header; no vtr writes one) once indexed the
     * migrations before their start (found while writing fuzz_catalog) */
    raw_query(path, "PRAGMA user_version = -1");
    snprintf(want, sizeof want, "catalog %s has schema version -1 (corrupt?)", path);
    CHECK_FAILS(vtr_catalog_open_existing(path, &cat, &err), VTR_ERR_FORMAT, want);
    CHECK_FAILS(vtr_catalog_open(path, &cat, &err), VTR_ERR_FORMAT, want);
    CHECK(cat == NULL);
    CHECK_STR(raw_query(path, "PRAGMA user_version"), "-1");
}

/* A catalog of schema version 1 (what vtr wrote before role graphs): version 2's objects
 * dropped again, data in the version 1 tables. */
static void write_version_1_catalog(const char *path, int64_t *caption_id)
{
    vtr_error err;
    vtr_catalog *cat = NULL;
    int64_t ds = 0, id = 0;
    CHECK_OK(vtr_catalog_open(path, &cat, &err));
    CHECK_OK(vtr_catalog_add_dataset(cat, "msrvtt", NULL, &ds, &err));
    vtr_item it = item_of(ds, "video1");
    CHECK_OK(vtr_catalog_upsert_item(cat, &it, &id, &err));
    CHECK_OK(vtr_catalog_add_caption(cat, id, -1, "a man sings", caption_id, &err));
    CHECK_OK(vtr_catalog_set_split(cat, id, "train", &err));
    vtr_catalog_close(cat);
    raw_query(path, "DROP TRIGGER caption_graphs_follow_text");
    raw_query(path, "DROP TABLE caption_graphs");
    raw_query(path, "DROP TABLE vocabularies");
    raw_query(path, "DROP TABLE item_frames");
    raw_query(path, "PRAGMA user_version = 1");
}

TEST(catalog_version_1_migrates_to_the_newest_keeping_its_data)
{
    vtr_error err;
    const char *path = db_path("v1.db");
    int64_t caption = 0;
    write_version_1_catalog(path, &caption);
    CHECK_STR(raw_query(path, "SELECT count(*) FROM sqlite_master WHERE name IN "
                              "('caption_graphs', 'vocabularies')"),
              "0");
    /* opening for reading migrates too */
    vtr_catalog *cat = NULL;
    CHECK_OK(vtr_catalog_open_existing(path, &cat, &err));
    CHECK_STR(raw_query(path, "PRAGMA user_version"), "3");
    int64_t ds = 0;
    CHECK_OK(vtr_catalog_find_dataset(cat, "msrvtt", &ds, &err));
    vtr_item_ref_list refs;
    CHECK_OK(vtr_catalog_split_items(cat, ds, "train", &refs, &err));
    CHECK_EQ_INT(refs.n, 1);
    vtr_item_ref_list_free(&refs);
    char *graph = NULL;
    CHECK_FAILS(vtr_catalog_caption_graph(cat, caption, &graph, &err), VTR_ERR_NOT_FOUND,
                "no role graph of caption");
    CHECK_OK(vtr_catalog_set_caption_graph(cat, caption, "[{},[]]", &err));
    CHECK_OK(vtr_catalog_caption_graph(cat, caption, &graph, &err));
    CHECK_STR(graph, "[{},[]]");
    free(graph);
    vtr_catalog_close(cat);
}

/* Collects what vtr_catalog_split_caption_graphs hands over, one line per caption. */
typedef struct walk_log {
    char text[1024];
    int calls, stop_after;
} walk_log;

static vtr_status log_caption(void *ctx, const vtr_split_caption *c, vtr_error *err)
{
    walk_log *log = ctx;
    size_t used = strlen(log->text);
    snprintf(log->text + used, sizeof log->text - used, "%s/%lld %s %s\n", c->key,
             (long long)c->ordinal, c->text, c->graph ? c->graph : "-");
    if (++log->calls == log->stop_after)
        return vtr_fail(err, VTR_ERR_INVALID, "stopped at %s", c->text);
    return VTR_OK;
}

TEST(catalog_caption_graphs_set_get_and_walk_a_split)
{
    vtr_error err;
    vtr_catalog *cat = NULL;
    CHECK_OK(vtr_catalog_open(db_path("graphs.db"), &cat, &err));
    int64_t ds = 0, a = 0, b = 0, c = 0, a0 = 0, a1 = 0, b0 = 0, c0 = 0;
    CHECK_OK(vtr_catalog_add_dataset(cat, "msrvtt", NULL, &ds, &err));
    vtr_item it = item_of(ds, "b-first");
    CHECK_OK(vtr_catalog_upsert_item(cat, &it, &b, &err));
    it.key = "a-second";
    CHECK_OK(vtr_catalog_upsert_item(cat, &it, &a, &err));
    it.key = "c-test";
    CHECK_OK(vtr_catalog_upsert_item(cat, &it, &c, &err));
    CHECK_OK(vtr_catalog_begin(cat, &err));
    CHECK_OK(vtr_catalog_add_caption(cat, a, 1, "a one", &a1, &err));
    CHECK_OK(vtr_catalog_add_caption(cat, a, 0, "a zero", &a0, &err));
    CHECK_OK(vtr_catalog_add_caption(cat, b, -1, "b zero", &b0, &err));
    CHECK_OK(vtr_catalog_add_caption(cat, c, -1, "c zero", &c0, &err));
    CHECK_OK(vtr_catalog_set_caption_graph(cat, a0, "[{\"ROOT\":{}},[]]", &err));
    CHECK_OK(vtr_catalog_set_caption_graph(cat, b0, "[1]", &err));
    CHECK_OK(vtr_catalog_set_caption_graph(cat, b0, "[2]", &err)); /* replaces */
    CHECK_OK(vtr_catalog_set_caption_graph(cat, c0, "[3]", &err));
    CHECK_OK(vtr_catalog_set_split(cat, b, "train", &err));
    CHECK_OK(vtr_catalog_set_split(cat, a, "train", &err));
    CHECK_OK(vtr_catalog_set_split(cat, c, "test", &err));
    CHECK_OK(vtr_catalog_commit(cat, &err));

    /* the split's order (item ids), then ordinals; a caption without a graph has NULL */
    walk_log log = {0};
    CHECK_OK(vtr_catalog_split_caption_graphs(cat, ds, "train", log_caption, &log, &err));
    CHECK_STR(log.text, "b-first/0 b zero [2]\n"
                        "a-second/0 a zero [{\"ROOT\":{}},[]]\n"
                        "a-second/1 a one -\n");
    /* the callback's failure ends the walk and comes back */
    log = (walk_log){.stop_after = 2};
    CHECK_FAILS(vtr_catalog_split_caption_graphs(cat, ds, "train", log_caption, &log, &err),
                VTR_ERR_INVALID, "stopped at a zero");
    CHECK_EQ_INT(log.calls, 2);
    log = (walk_log){0};
    CHECK_OK(vtr_catalog_split_caption_graphs(cat, ds, "nosuch", log_caption, &log, &err));
    CHECK_EQ_INT(log.calls, 0);

    /* bad input */
    CHECK_FAILS(vtr_catalog_set_caption_graph(cat, a1, "{\"ROOT\": 1}", &err), VTR_ERR_INVALID,
                "role graph of caption");
    CHECK_FAILS(vtr_catalog_set_caption_graph(cat, a1, "[1", &err), VTR_ERR_INVALID, "bad JSON");
    CHECK_FAILS(vtr_catalog_set_caption_graph(cat, 9999, "[1]", &err), VTR_ERR_NOT_FOUND,
                "role graph of caption 9999");
    CHECK_FAILS(vtr_catalog_set_caption_graph(cat, 9999, NULL, &err), VTR_ERR_NOT_FOUND,
                "no caption with id 9999");

    /* removing, and a new caption text removes the graph; the same text keeps it */
    CHECK_OK(vtr_catalog_set_caption_graph(cat, c0, NULL, &err));
    CHECK_OK(vtr_catalog_set_caption_graph(cat, c0, NULL, &err));
    char *graph = NULL;
    CHECK_FAILS(vtr_catalog_caption_graph(cat, c0, &graph, &err), VTR_ERR_NOT_FOUND,
                "no role graph of caption");
    CHECK(graph == NULL);
    CHECK_OK(vtr_catalog_add_caption(cat, a, 0, "a zero", NULL, &err));
    CHECK_OK(vtr_catalog_caption_graph(cat, a0, &graph, &err));
    free(graph);
    CHECK_OK(vtr_catalog_add_caption(cat, a, 0, "a zero, edited", NULL, &err));
    CHECK_FAILS(vtr_catalog_caption_graph(cat, a0, &graph, &err), VTR_ERR_NOT_FOUND,
                "no role graph of caption");
    /* deleting the item deletes its captions' graphs */
    CHECK_OK(vtr_catalog_delete_item(cat, b, &err));
    CHECK_FAILS(vtr_catalog_caption_graph(cat, b0, &graph, &err), VTR_ERR_NOT_FOUND,
                "no role graph of caption");
    vtr_catalog_close(cat);
    CHECK_STR(raw_query(db_path("graphs.db"), "SELECT count(*) FROM caption_graphs"), "0");
}

TEST(catalog_vocabulary_round_trip)
{
    vtr_error err;
    vtr_catalog *cat = NULL;
    CHECK_OK(vtr_catalog_open(db_path("vocab.db"), &cat, &err));
    int64_t ds = 0;
    CHECK_OK(vtr_catalog_add_dataset(cat, "msrvtt", NULL, &ds, &err));
    vtr_word_list list;
    CHECK_FAILS(vtr_catalog_get_vocabulary(cat, ds, "hgr", &list, &err), VTR_ERR_NOT_FOUND,
                "no vocabulary \"hgr\"");
    const char *words[] = {"<BOS>", "<EOS>", "<UNK>", "caf\xc3\xa9", "\"quoted\""};
    CHECK_OK(vtr_catalog_put_vocabulary(cat, ds, "hgr", words, 5, &err));
    CHECK_OK(vtr_catalog_put_vocabulary(cat, ds, "hgr", words, 4, &err)); /* replaces */
    CHECK_OK(vtr_catalog_get_vocabulary(cat, ds, "hgr", &list, &err));
    CHECK_EQ_INT(list.n, 4);
    CHECK_STR(list.words[0], "<BOS>");
    CHECK_STR(list.words[3], "caf\xc3\xa9");
    vtr_word_list_free(&list);
    vtr_word_list_free(&list);
    CHECK_OK(vtr_catalog_put_vocabulary(cat, ds, "q", words + 4, 1, &err));
    CHECK_OK(vtr_catalog_get_vocabulary(cat, ds, "q", &list, &err));
    CHECK_STR(list.words[0], "\"quoted\"");
    vtr_word_list_free(&list);

    const char *bad[] = {"a", "", "\xff"};
    CHECK_FAILS(vtr_catalog_put_vocabulary(cat, ds, "hgr", bad, 2, &err), VTR_ERR_INVALID,
                "word 1 is empty");
    CHECK_FAILS(vtr_catalog_put_vocabulary(cat, ds, "hgr", bad + 2, 1, &err), VTR_ERR_INVALID,
                "word 0 is not valid UTF-8");
    CHECK_FAILS(vtr_catalog_put_vocabulary(cat, ds, "hgr", words, 0, &err), VTR_ERR_INVALID,
                "has no words");
    CHECK_FAILS(vtr_catalog_put_vocabulary(cat, 999, "hgr", words, 1, &err), VTR_ERR_NOT_FOUND,
                "dataset 999");
    vtr_catalog_close(cat);
    raw_query(db_path("vocab.db"), "UPDATE vocabularies SET words = '{\"a\": 1}'");
    CHECK_OK(vtr_catalog_open(db_path("vocab.db"), &cat, &err));
    CHECK_FAILS(vtr_catalog_get_vocabulary(cat, ds, "hgr", &list, &err), VTR_ERR_FORMAT,
                "not a JSON array of words");
    CHECK(list.n == 0 && list.words == NULL);
    vtr_catalog_close(cat);
}

/* A NULL in a NOT NULL column (a damaged or hand-edited file) is an error, not a NULL
 * string in a returned record (vtr_catalog_dataset_items gave an item whose key was NULL)
 * or "out of memory" (the split walk). Found by fuzz_catalog; the file is made so here by
 * editing its schema text. */
TEST(catalog_null_in_a_not_null_column_is_a_format_error)
{
    vtr_error err;
    const char *path = db_path("null_key.db");
    vtr_catalog *cat = NULL;
    int64_t ds = 0;
    CHECK_OK(vtr_catalog_open(path, &cat, &err));
    CHECK_OK(vtr_catalog_add_dataset(cat, "d", NULL, &ds, &err));
    vtr_item it = item_of(ds, "video1");
    int64_t id = 0;
    CHECK_OK(vtr_catalog_upsert_item(cat, &it, &id, &err));
    CHECK_OK(vtr_catalog_add_caption(cat, id, -1, "a man sings", NULL, &err));
    CHECK_OK(vtr_catalog_set_split(cat, id, "train", &err));
    vtr_catalog_close(cat);
    sqlite3 *db = NULL;
    CHECK_EQ_INT(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_exec(db, "PRAGMA writable_schema = ON; UPDATE sqlite_master SET sql = "
                                  "replace(sql, 'key        TEXT NOT NULL', 'key TEXT') "
                                  "WHERE name = 'items'",
                              NULL, NULL, NULL),
                 SQLITE_OK);
    sqlite3_close(db);
    raw_query(path, "UPDATE items SET key = NULL");
    CHECK_OK(vtr_catalog_open_existing(path, &cat, &err));
    vtr_item_list items;
    char want[600];
    snprintf(want, sizeof want, "catalog %s: a row without its key (a damaged database?)", path);
    CHECK_FAILS(vtr_catalog_dataset_items(cat, ds, &items, &err), VTR_ERR_FORMAT, want);
    CHECK(items.n == 0 && items.items == NULL);
    /* the split walk said "out of memory" */
    walk_log log = {0};
    CHECK_FAILS(vtr_catalog_split_caption_graphs(cat, ds, "train", log_caption, &log, &err),
                VTR_ERR_FORMAT, want);
    vtr_catalog_close(cat);
}

TEST(catalog_non_database_file_is_a_db_error_naming_the_path)
{
    vtr_error err;
    const char *path = db_path("notadb.db");
    test_write_text(path, "not a db");
    vtr_catalog *cat = NULL;
    CHECK_FAILS(vtr_catalog_open(path, &cat, &err), VTR_ERR_DB, path);
    CHECK(strstr(err.msg, "not a database") != NULL);
    CHECK(strchr(err.msg, '\n') == NULL);
    CHECK(cat == NULL);

    CHECK_FAILS(vtr_catalog_open(db_path("no/such/dir/x.db"), &cat, &err), VTR_ERR_DB,
                "no/such/dir/x.db");
}

TEST(catalog_another_applications_database_is_refused)
{
    vtr_error err;
    const char *path = db_path("foreign.db");
    sqlite3 *db = NULL;
    CHECK_EQ_INT(sqlite3_open(path, &db), SQLITE_OK);
    CHECK_EQ_INT(sqlite3_exec(db, "CREATE TABLE notes (t TEXT)", NULL, NULL, NULL),
                 SQLITE_OK);
    sqlite3_close(db);
    vtr_catalog *cat = NULL;
    CHECK_FAILS(vtr_catalog_open(path, &cat, &err), VTR_ERR_UNSUPPORTED, "not a vtr catalog");
    CHECK_STR(raw_query(path, "SELECT count(*) FROM sqlite_master"), "1");
}

TEST(catalog_datasets_items_captions_splits_round_trip)
{
    vtr_error err;
    vtr_catalog *cat = NULL;
    CHECK_OK(vtr_catalog_open(db_path("roundtrip.db"), &cat, &err));
    int64_t ds = 0, again = 0, other = 0;
    CHECK_OK(vtr_catalog_add_dataset(cat, "coco", "/data/coco", &ds, &err));
    CHECK_OK(vtr_catalog_add_dataset(cat, "coco", "/elsewhere", &again, &err));
    CHECK_EQ_INT(again, ds);
    CHECK_OK(vtr_catalog_add_dataset(cat, "f30k", NULL, &other, &err));
    CHECK(other != ds);
    CHECK_FAILS(vtr_catalog_find_dataset(cat, "vatex", &again, &err), VTR_ERR_NOT_FOUND,
                "vatex");
    CHECK_FAILS(vtr_catalog_add_dataset(cat, "", NULL, &again, &err), VTR_ERR_INVALID,
                "dataset name");

    /* insert in an order that is not the keys' order: the split keeps insertion order */
    const char *keys[] = {"img_30", "img_4", "img_100", "img_2"};
    const char *splits[] = {"test", "train", "test", "test"};
    int64_t ids[4];
    CHECK_OK(vtr_catalog_begin(cat, &err));
    for (int i = 0; i < 4; i++) {
        vtr_item it = item_of(ds, keys[i]);
        it.duration_s = 0;
        it.status = VTR_ITEM_OK;
        CHECK_OK(vtr_catalog_upsert_item(cat, &it, &ids[i], &err));
        CHECK_OK(vtr_catalog_set_split(cat, ids[i], splits[i], &err));
        for (int c = 0; c < 3; c++) {
            char text[64];
            snprintf(text, sizeof text, "caption %d of %s", c, keys[i]);
            CHECK_OK(vtr_catalog_add_caption(cat, ids[i], -1, text, NULL, &err));
        }
    }
    /* the same key in another dataset is another item */
    vtr_item same_key = item_of(other, "img_30");
    int64_t other_id = 0;
    CHECK_OK(vtr_catalog_upsert_item(cat, &same_key, &other_id, &err));
    CHECK(other_id != ids[0]);
    CHECK_OK(vtr_catalog_set_split(cat, other_id, "test", &err));
    /* an item may be in several splits; setting the same split twice is a no-op */
    CHECK_OK(vtr_catalog_set_split(cat, ids[0], "test1k_fold0", &err));
    CHECK_OK(vtr_catalog_set_split(cat, ids[0], "test", &err));
    CHECK_OK(vtr_catalog_commit(cat, &err));

    vtr_item_ref_list test;
    CHECK_OK(vtr_catalog_split_items(cat, ds, "test", &test, &err));
    CHECK_EQ_INT(test.n, 3);
    CHECK_EQ_INT(test.items[0].id, ids[0]);
    CHECK_STR(test.items[0].key, "img_30");
    CHECK_STR(test.items[1].key, "img_100");
    CHECK_STR(test.items[2].key, "img_2");
    vtr_item_ref_list_free(&test);
    vtr_item_ref_list_free(&test); /* safe twice */
    vtr_item_ref_list train, none;
    CHECK_OK(vtr_catalog_split_items(cat, ds, "train", &train, &err));
    CHECK_EQ_INT(train.n, 1);
    CHECK_STR(train.items[0].key, "img_4");
    vtr_item_ref_list_free(&train);
    CHECK_OK(vtr_catalog_split_items(cat, ds, "tset", &none, &err));
    CHECK_EQ_INT(none.n, 0);
    vtr_item_ref_list_free(&none);

    vtr_item found;
    CHECK_OK(vtr_catalog_find_item(cat, ds, "img_4", &found, &err));
    CHECK_EQ_INT(found.id, ids[1]);
    CHECK_EQ_INT(found.dataset_id, ds);
    CHECK_STR(found.key, "img_4");
    CHECK_EQ_INT(found.size_bytes, 1234);
    CHECK_EQ_INT(found.mtime_ns, 1700000000123456789LL);
    CHECK(found.duration_s == 0);
    CHECK_EQ_INT(found.status, VTR_ITEM_OK);
    CHECK(found.error == NULL);
    CHECK(found.updated_at && strlen(found.updated_at) == 24 && found.updated_at[10] == 'T' &&
          found.updated_at[23] == 'Z');
    vtr_item_free(&found);
    CHECK_FAILS(vtr_catalog_find_item(cat, ds, "img_5", &found, &err), VTR_ERR_NOT_FOUND,
                "img_5");
    CHECK(found.storage == NULL && found.key == NULL);

    vtr_caption_list caps;
    CHECK_OK(vtr_catalog_item_captions(cat, ids[2], &caps, &err));
    CHECK_EQ_INT(caps.n, 3);
    for (size_t c = 0; c < caps.n; c++) {
        char text[64];
        snprintf(text, sizeof text, "caption %d of img_100", (int)c);
        CHECK_EQ_INT(caps.captions[c].ordinal, c);
        CHECK_STR(caps.captions[c].text, text);
    }
    vtr_caption_list_free(&caps);

    /* a caption at an explicit ordinal replaces that caption's text, keeping its id */
    int64_t cap_id = 0, cap_id2 = 0;
    CHECK_OK(vtr_catalog_add_caption(cat, ids[2], 1, "replaced", &cap_id, &err));
    CHECK_OK(vtr_catalog_add_caption(cat, ids[2], 1, "replaced again", &cap_id2, &err));
    CHECK_EQ_INT(cap_id, cap_id2);
    CHECK_OK(vtr_catalog_add_caption(cat, ids[2], 7, "sparse", NULL, &err));
    CHECK_OK(vtr_catalog_add_caption(cat, ids[2], -1, "appended", NULL, &err));
    CHECK_OK(vtr_catalog_item_captions(cat, ids[2], &caps, &err));
    CHECK_EQ_INT(caps.n, 5);
    CHECK_STR(caps.captions[1].text, "replaced again");
    CHECK_EQ_INT(caps.captions[1].id, cap_id);
    CHECK_EQ_INT(caps.captions[3].ordinal, 7);
    CHECK_EQ_INT(caps.captions[4].ordinal, 8);
    CHECK_STR(caps.captions[4].text, "appended");
    vtr_caption_list_free(&caps);

    /* references to rows that do not exist */
    CHECK_FAILS(vtr_catalog_add_caption(cat, 999, -1, "orphan", NULL, &err),
                VTR_ERR_NOT_FOUND, "item 999");
    CHECK_FAILS(vtr_catalog_set_split(cat, 999, "test", &err), VTR_ERR_NOT_FOUND, "999");
    vtr_item orphan = item_of(999, "x");
    CHECK_FAILS(vtr_catalog_upsert_item(cat, &orphan, NULL, &err), VTR_ERR_NOT_FOUND,
                "dataset 999");
    CHECK_OK(vtr_catalog_item_captions(cat, 999, &caps, &err));
    CHECK_EQ_INT(caps.n, 0);
    vtr_caption_list_free(&caps);
    vtr_catalog_close(cat);
}

TEST(catalog_upsert_updates_the_row_instead_of_duplicating)
{
    vtr_error err;
    const char *path = db_path("upsert.db");
    vtr_catalog *cat = NULL;
    CHECK_OK(vtr_catalog_open(path, &cat, &err));
    int64_t ds = 0, id1 = 0, id2 = 0;
    CHECK_OK(vtr_catalog_add_dataset(cat, "archive", "/videos", &ds, &err));
    vtr_item it = item_of(ds, "holiday.mp4");
    CHECK_OK(vtr_catalog_upsert_item(cat, &it, &id1, &err));
    CHECK_OK(vtr_catalog_add_caption(cat, id1, -1, "kept", NULL, &err));
    CHECK_OK(vtr_catalog_set_split(cat, id1, "all", &err));

    /* the file changed and failed to decode */
    it.path = "/videos/holiday.mp4";
    it.size_bytes = 999;
    it.mtime_ns = -1;
    it.duration_s = -1;
    it.status = VTR_ITEM_FAILED;
    it.error = "holiday.mp4: truncated moov atom";
    CHECK_OK(vtr_catalog_upsert_item(cat, &it, &id2, &err));
    CHECK_EQ_INT(id2, id1);
    CHECK_STR(raw_query(path, "SELECT count(*) FROM items"), "1");

    vtr_item found;
    CHECK_OK(vtr_catalog_find_item(cat, ds, "holiday.mp4", &found, &err));
    CHECK_STR(found.path, "/videos/holiday.mp4");
    CHECK_EQ_INT(found.size_bytes, 999);
    CHECK_EQ_INT(found.mtime_ns, -1);
    CHECK(found.duration_s == -1);
    CHECK_EQ_INT(found.status, VTR_ITEM_FAILED);
    CHECK_STR(found.error, "holiday.mp4: truncated moov atom");
    vtr_item_free(&found);
    /* captions and splits survive the update (no delete + insert underneath) */
    vtr_caption_list caps;
    CHECK_OK(vtr_catalog_item_captions(cat, id1, &caps, &err));
    CHECK_EQ_INT(caps.n, 1);
    vtr_caption_list_free(&caps);
    vtr_item_ref_list all;
    CHECK_OK(vtr_catalog_split_items(cat, ds, "all", &all, &err));
    CHECK_EQ_INT(all.n, 1);
    vtr_item_ref_list_free(&all);

    /* status helper */
    CHECK_OK(vtr_catalog_set_item_status(cat, id1, VTR_ITEM_OK, NULL, &err));
    CHECK_OK(vtr_catalog_find_item(cat, ds, "holiday.mp4", &found, &err));
    CHECK_EQ_INT(found.status, VTR_ITEM_OK);
    CHECK(found.error == NULL);
    vtr_item_free(&found);
    CHECK_FAILS(vtr_catalog_set_item_status(cat, 12345, VTR_ITEM_OK, NULL, &err),
                VTR_ERR_NOT_FOUND, "12345");
    CHECK_FAILS(vtr_catalog_set_item_status(cat, id1, (vtr_item_status)7, NULL, &err),
                VTR_ERR_INVALID, "bad status");
    vtr_catalog_close(cat);
}

TEST(catalog_lists_and_deletes_the_items_of_a_dataset)
{
    vtr_error err;
    const char *path = db_path("list_delete.db");
    vtr_catalog *cat = NULL;
    CHECK_OK(vtr_catalog_open(path, &cat, &err));
    int64_t a = 0, b = 0, id[3];
    CHECK_OK(vtr_catalog_add_dataset(cat, "a", NULL, &a, &err));
    CHECK_OK(vtr_catalog_add_dataset(cat, "b", NULL, &b, &err));
    const char *keys[3] = {"z.mp4", "x/y.webm", "m.png"};
    for (int i = 0; i < 3; i++) {
        vtr_item it = item_of(a, keys[i]);
        it.size_bytes = 10 + i;
        it.status = i == 1 ? VTR_ITEM_FAILED : VTR_ITEM_OK;
        it.error = i == 1 ? "x/y.webm: invalid data" : NULL;
        CHECK_OK(vtr_catalog_upsert_item(cat, &it, &id[i], &err));
    }
    vtr_item other = item_of(b, "z.mp4");
    CHECK_OK(vtr_catalog_upsert_item(cat, &other, NULL, &err));
    CHECK_OK(vtr_catalog_add_caption(cat, id[0], -1, "goes with its item", NULL, &err));
    CHECK_OK(vtr_catalog_set_split(cat, id[0], "all", &err));

    vtr_item_list list;
    CHECK_OK(vtr_catalog_dataset_items(cat, a, &list, &err));
    CHECK_EQ_INT(list.n, 3);
    for (int i = 0; i < 3; i++) { /* id order, every field */
        CHECK_EQ_INT(list.items[i].id, id[i]);
        CHECK_STR(list.items[i].key, keys[i]);
        CHECK_EQ_INT(list.items[i].size_bytes, 10 + i);
        CHECK_EQ_INT(list.items[i].mtime_ns, 1700000000123456789LL);
        CHECK(list.items[i].duration_s == 12.5);
    }
    CHECK_EQ_INT(list.items[1].status, VTR_ITEM_FAILED);
    CHECK_STR(list.items[1].error, "x/y.webm: invalid data");
    vtr_item_list_free(&list);
    vtr_item_list_free(&list); /* safe twice */

    CHECK_OK(vtr_catalog_delete_item(cat, id[0], &err));
    CHECK_FAILS(vtr_catalog_delete_item(cat, id[0], &err), VTR_ERR_NOT_FOUND, "no item");
    CHECK_STR(raw_query(path, "SELECT count(*) FROM captions"), "0");
    CHECK_STR(raw_query(path, "SELECT count(*) FROM splits"), "0");
    CHECK_OK(vtr_catalog_dataset_items(cat, a, &list, &err));
    CHECK_EQ_INT(list.n, 2);
    CHECK_STR(list.items[0].key, "x/y.webm");
    vtr_item_list_free(&list);
    CHECK_OK(vtr_catalog_dataset_items(cat, b, &list, &err)); /* the other dataset's own */
    CHECK_EQ_INT(list.n, 1);
    vtr_item_list_free(&list);
    CHECK_OK(vtr_catalog_dataset_items(cat, 999, &list, &err));
    CHECK_EQ_INT(list.n, 0);
    vtr_item_list_free(&list);
    vtr_catalog_close(cat);
}

TEST(catalog_rolled_back_transaction_leaves_nothing)
{
    vtr_error err;
    const char *path = db_path("rollback.db");
    vtr_catalog *cat = NULL;
    CHECK_OK(vtr_catalog_open(path, &cat, &err));
    CHECK_OK(vtr_catalog_rollback(cat, &err)); /* none open: a no-op */
    CHECK_FAILS(vtr_catalog_commit(cat, &err), VTR_ERR_INVALID, "no transaction");

    CHECK_OK(vtr_catalog_begin(cat, &err));
    CHECK_FAILS(vtr_catalog_begin(cat, &err), VTR_ERR_INVALID, "already open");
    int64_t ds = 0, id = 0, run = 0;
    CHECK_OK(vtr_catalog_add_dataset(cat, "tmp", NULL, &ds, &err));
    vtr_item it = item_of(ds, "a");
    CHECK_OK(vtr_catalog_upsert_item(cat, &it, &id, &err));
    CHECK_OK(vtr_catalog_add_caption(cat, id, -1, "gone", NULL, &err));
    CHECK_OK(vtr_catalog_set_split(cat, id, "test", &err));
    vtr_run r = {.kind = "index", .config = "", .code_version = "test"};
    CHECK_OK(vtr_catalog_begin_run(cat, &r, &run, &err));
    CHECK_OK(vtr_catalog_rollback(cat, &err));

    CHECK_FAILS(vtr_catalog_find_dataset(cat, "tmp", &ds, &err), VTR_ERR_NOT_FOUND, "tmp");
    const char *tables[] = {"datasets", "items", "captions", "splits", "runs"};
    for (int i = 0; i < 5; i++) {
        char sql[64];
        snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", tables[i]);
        CHECK_STR(raw_query(path, sql), "0");
    }
    vtr_catalog_close(cat);
}

TEST(catalog_reader_sees_committed_state_during_a_write)
{
    vtr_error err;
    const char *path = db_path("concurrent.db");
    vtr_catalog *writer = NULL, *reader = NULL;
    CHECK_OK(vtr_catalog_open(path, &writer, &err));
    int64_t ds = 0, id = 0;
    CHECK_OK(vtr_catalog_add_dataset(writer, "archive", NULL, &ds, &err));
    vtr_item it = item_of(ds, "committed");
    CHECK_OK(vtr_catalog_upsert_item(writer, &it, &id, &err));
    CHECK_OK(vtr_catalog_set_split(writer, id, "all", &err));

    CHECK_OK(vtr_catalog_begin(writer, &err));
    it.key = "uncommitted";
    CHECK_OK(vtr_catalog_upsert_item(writer, &it, &id, &err));
    CHECK_OK(vtr_catalog_set_split(writer, id, "all", &err));
    it.key = "committed";
    it.status = VTR_ITEM_FAILED;
    CHECK_OK(vtr_catalog_upsert_item(writer, &it, NULL, &err));

    /* a second connection, opened while the write transaction is open */
    CHECK_OK(vtr_catalog_open(path, &reader, &err));
    vtr_item_ref_list all;
    CHECK_OK(vtr_catalog_split_items(reader, ds, "all", &all, &err));
    CHECK_EQ_INT(all.n, 1);
    CHECK_STR(all.items[0].key, "committed");
    vtr_item_ref_list_free(&all);
    vtr_item found;
    CHECK_OK(vtr_catalog_find_item(reader, ds, "committed", &found, &err));
    CHECK_EQ_INT(found.status, VTR_ITEM_PENDING);
    vtr_item_free(&found);
    CHECK_FAILS(vtr_catalog_find_item(reader, ds, "uncommitted", &found, &err),
                VTR_ERR_NOT_FOUND, "uncommitted");

    CHECK_OK(vtr_catalog_commit(writer, &err));
    CHECK_OK(vtr_catalog_split_items(reader, ds, "all", &all, &err));
    CHECK_EQ_INT(all.n, 2);
    vtr_item_ref_list_free(&all);
    CHECK_OK(vtr_catalog_find_item(reader, ds, "committed", &found, &err));
    CHECK_EQ_INT(found.status, VTR_ITEM_FAILED);
    vtr_item_free(&found);
    vtr_catalog_close(reader);
    vtr_catalog_close(writer);
}

TEST(catalog_runs_round_trip)
{
    vtr_error err;
    vtr_catalog *cat = NULL;
    CHECK_OK(vtr_catalog_open(db_path("runs.db"), &cat, &err));
    const char *config = "model:\n  pooler: gpo\n  embed_dim: 1024\ntrain:\n  lr: 0.0002\n";
    const char *hashes = "{\"msrvtt/train_features.npy\": \"ba7816bf8f01cfea414140de5dae2223"
                         "b00361a396177a9cb410ff61f20015ad\"}";
    vtr_run r = {
        .kind = "train",
        .config = config,
        .seed = -42,
        .code_version = "0.1.0-3-gabc1234",
        .data_hashes = hashes,
        .host = "gpu-box",
    };
    int64_t id = 0, id2 = 0;
    CHECK_OK(vtr_catalog_begin_run(cat, &r, &id, &err));

    vtr_run got;
    CHECK_OK(vtr_catalog_get_run(cat, id, &got, &err));
    CHECK_EQ_INT(got.id, id);
    CHECK_STR(got.kind, "train");
    CHECK_STR(got.config, config);
    CHECK_EQ_INT(got.seed, -42);
    CHECK_STR(got.code_version, "0.1.0-3-gabc1234");
    CHECK_STR(got.data_hashes, hashes);
    CHECK_STR(got.host, "gpu-box");
    CHECK_EQ_INT(got.status, VTR_RUN_RUNNING);
    CHECK(got.started_at && got.started_at[23] == 'Z');
    CHECK(got.finished_at == NULL && got.result == NULL);
    vtr_run_free(&got);

    const char *result = "{\"rsum\": 174.7, \"t2v_r1\": 8.7}";
    CHECK_OK(vtr_catalog_finish_run(cat, id, VTR_RUN_DONE, result, &err));
    CHECK_OK(vtr_catalog_get_run(cat, id, &got, &err));
    CHECK_EQ_INT(got.status, VTR_RUN_DONE);
    CHECK_STR(got.result, result);
    CHECK(got.finished_at && strcmp(got.finished_at, got.started_at) >= 0);
    vtr_run_free(&got);
    CHECK_FAILS(vtr_catalog_finish_run(cat, id, VTR_RUN_FAILED, NULL, &err), VTR_ERR_INVALID,
                "already finished (done)");
    CHECK_FAILS(vtr_catalog_finish_run(cat, 777, VTR_RUN_DONE, NULL, &err), VTR_ERR_NOT_FOUND,
                "777");
    CHECK_FAILS(vtr_catalog_get_run(cat, 777, &got, &err), VTR_ERR_NOT_FOUND, "777");

    /* defaults: no hashes -> {}, no host -> this machine's name; finish without result */
    vtr_run minimal = {.kind = "eval", .config = "x: 1\n", .code_version = "v"};
    CHECK_OK(vtr_catalog_begin_run(cat, &minimal, &id2, &err));
    CHECK(id2 != id);
    CHECK_FAILS(vtr_catalog_finish_run(cat, id2, VTR_RUN_RUNNING, NULL, &err),
                VTR_ERR_INVALID, "done or failed");
    CHECK_FAILS(vtr_catalog_finish_run(cat, id2, VTR_RUN_DONE, "{\"rsum\": ", &err),
                VTR_ERR_INVALID, "bad JSON");
    CHECK_OK(vtr_catalog_finish_run(cat, id2, VTR_RUN_FAILED, NULL, &err));
    CHECK_OK(vtr_catalog_get_run(cat, id2, &got, &err));
    CHECK_STR(got.data_hashes, "{}");
    CHECK(got.host != NULL);
    CHECK_EQ_INT(got.status, VTR_RUN_FAILED);
    CHECK(got.result == NULL);
    vtr_run_free(&got);

    /* the data hashes must be an object of strings */
    minimal.data_hashes = "[\"abc\"]";
    CHECK_FAILS(vtr_catalog_begin_run(cat, &minimal, &id2, &err), VTR_ERR_INVALID,
                "not a JSON object");
    minimal.data_hashes = "{\"a\": 1}";
    CHECK_FAILS(vtr_catalog_begin_run(cat, &minimal, &id2, &err), VTR_ERR_INVALID,
                "\"a\" is not a string");
    minimal.data_hashes = NULL;
    minimal.code_version = NULL;
    CHECK_FAILS(vtr_catalog_begin_run(cat, &minimal, &id2, &err), VTR_ERR_INVALID,
                "code version");
    vtr_catalog_close(cat);
}

TEST(catalog_injection_looking_text_is_stored_verbatim)
{
    vtr_error err;
    const char *path = db_path("injection.db");
    vtr_catalog *cat = NULL;
    CHECK_OK(vtr_catalog_open(path, &cat, &err));
    const char *evil = "x'); DROP TABLE items;--";
    const char *evil2 = "\"; DELETE FROM datasets; SELECT \"";
    int64_t ds = 0, id = 0;
    CHECK_OK(vtr_catalog_add_dataset(cat, evil2, evil, &ds, &err));
    vtr_item it = item_of(ds, evil);
    it.path = evil2;
    it.error = evil;
    CHECK_OK(vtr_catalog_upsert_item(cat, &it, &id, &err));
    CHECK_OK(vtr_catalog_add_caption(cat, id, -1, evil, NULL, &err));
    CHECK_OK(vtr_catalog_set_split(cat, id, evil, &err));

    int64_t ds2 = 0;
    CHECK_OK(vtr_catalog_find_dataset(cat, evil2, &ds2, &err));
    CHECK_EQ_INT(ds2, ds);
    vtr_item found;
    CHECK_OK(vtr_catalog_find_item(cat, ds, evil, &found, &err));
    CHECK_STR(found.key, evil);
    CHECK_STR(found.path, evil2);
    CHECK_STR(found.error, evil);
    vtr_item_free(&found);
    vtr_item_ref_list refs;
    CHECK_OK(vtr_catalog_split_items(cat, ds, evil, &refs, &err));
    CHECK_EQ_INT(refs.n, 1);
    CHECK_STR(refs.items[0].key, evil);
    vtr_item_ref_list_free(&refs);
    vtr_caption_list caps;
    CHECK_OK(vtr_catalog_item_captions(cat, id, &caps, &err));
    CHECK_STR(caps.captions[0].text, evil);
    vtr_caption_list_free(&caps);
    vtr_catalog_close(cat);
    CHECK_STR(raw_query(path, "SELECT key FROM items"), evil);
    CHECK_STR(raw_query(path, "SELECT root FROM datasets"), evil);
}

TEST(catalog_feature_store_add_and_replace)
{
    vtr_error err;
    vtr_catalog *cat = NULL;
    CHECK_OK(vtr_catalog_open(db_path("stores.db"), &cat, &err));
    int64_t ds = 0, id = 0, id2 = 0;
    CHECK_OK(vtr_catalog_add_dataset(cat, "msrvtt", NULL, &ds, &err));
    vtr_feature_store fs = {
        .dataset_id = ds,
        .name = "resnet152",
        .path = "features/msrvtt-resnet152",
        .extractor = "resnet152/avgpool",
        .dim = 2048,
        .dtype = VTR_F32,
        .rows = 1000,
        .items = 10,
        .config = "{\"every\": 16}",
    };
    CHECK_OK(vtr_catalog_put_feature_store(cat, &fs, &id, &err));
    fs.dtype = VTR_F16;
    fs.rows = 2000;
    fs.items = 20;
    fs.config = NULL;
    CHECK_OK(vtr_catalog_put_feature_store(cat, &fs, &id2, &err));
    CHECK_EQ_INT(id2, id);

    vtr_feature_store got;
    CHECK_OK(vtr_catalog_find_feature_store(cat, ds, "resnet152", &got, &err));
    CHECK_EQ_INT(got.id, id);
    CHECK_EQ_INT(got.dataset_id, ds);
    CHECK_STR(got.path, "features/msrvtt-resnet152");
    CHECK_STR(got.extractor, "resnet152/avgpool");
    CHECK_EQ_INT(got.dim, 2048);
    CHECK_EQ_INT(got.dtype, VTR_F16);
    CHECK_EQ_INT(got.rows, 2000);
    CHECK_EQ_INT(got.items, 20);
    CHECK(got.config == NULL);
    CHECK(got.created_at != NULL);
    vtr_feature_store_free(&got);
    CHECK_FAILS(vtr_catalog_find_feature_store(cat, ds, "i3d", &got, &err),
                VTR_ERR_NOT_FOUND, "i3d");
    fs.dim = 0;
    CHECK_FAILS(vtr_catalog_put_feature_store(cat, &fs, NULL, &err), VTR_ERR_INVALID,
                "resnet152");
    vtr_catalog_close(cat);
}

TEST(catalog_file_sha256_known_digests)
{
    vtr_error err;
    char hex[VTR_SHA256_HEX_SIZE];
    const char *abc = test_path("abc.txt");
    test_write_text(abc, "abc");
    CHECK_OK(vtr_file_sha256(abc, hex, &err));
    CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *empty = test_path("empty.txt");
    test_write_text(empty, "");
    CHECK_OK(vtr_file_sha256(empty, hex, &err));
    CHECK_STR(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    /* larger than one read chunk: 3 MiB + 1 of 'a' */
    const char *big = test_path("big.bin");
    FILE *fp = fopen(big, "wb");
    CHECK(fp != NULL);
    for (long i = 0; i < 3L * 1024 * 1024 + 1; i++)
        fputc('a', fp);
    fclose(fp);
    CHECK_OK(vtr_file_sha256(big, hex, &err));
    CHECK_EQ_INT(strlen(hex), 64);
    CHECK_EQ_INT(test_run("test \"$(sha256sum '%s' | cut -c1-64)\" = '%s'", big, hex), 0);
    CHECK_FAILS(vtr_file_sha256(test_path("missing.bin"), hex, &err), VTR_ERR_IO,
                "missing.bin");
    CHECK_STR(hex, "");
}

TEST(catalog_item_frames_replace_read_and_cascade)
{
    vtr_error err;
    vtr_catalog *cat = NULL;
    CHECK_OK(vtr_catalog_open(db_path("frames.db"), &cat, &err));
    int64_t ds = 0, id = 0, other = 0;
    CHECK_OK(vtr_catalog_add_dataset(cat, "archive", "/data", &ds, &err));
    vtr_item it = item_of(ds, "a.mp4");
    CHECK_OK(vtr_catalog_upsert_item(cat, &it, &id, &err));
    it.key = "b.mp4";
    CHECK_OK(vtr_catalog_upsert_item(cat, &it, &other, &err));
    const unsigned char jpeg[] = {0xff, 0xd8, 0xff, 0xe0, 1, 2, 3, 0xff, 0xd9};
    const uint16_t v0[3] = {0x3c00, 0x0000, 0xbc00}, v1[3] = {0x0000, 0x3c00, 0x3800};
    vtr_item_frame frames[3] = {
        {.time_s = 0.25, .jpeg = jpeg, .jpeg_size = sizeof jpeg, .vector = v0, .dim = 3},
        {.time_s = -1, .jpeg = NULL, .vector = v1, .dim = 3},
        {.time_s = 2.5, .jpeg = jpeg, .jpeg_size = 4, .vector = NULL},
    };
    CHECK_OK(vtr_catalog_put_item_frames(cat, id, 3, frames, &err));
    CHECK_OK(vtr_catalog_put_item_frames(cat, other, 1, frames, &err));
    vtr_item_frame_list list;
    CHECK_OK(vtr_catalog_item_frames(cat, id, &list, &err));
    CHECK(list.n == 3);
    CHECK(list.frames[0].time_s == 0.25 && list.frames[1].time_s == -1 &&
          list.frames[2].time_s == 2.5);
    CHECK(list.frames[0].jpeg_size == sizeof jpeg && list.frames[1].jpeg_size == 0 &&
          list.frames[2].jpeg_size == 4);
    CHECK(list.frames[0].dim == 3 && memcmp(list.frames[0].vector, v0, sizeof v0) == 0);
    CHECK(list.frames[1].dim == 3 && memcmp(list.frames[1].vector, v1, sizeof v1) == 0);
    CHECK(list.frames[2].vector == NULL && list.frames[2].dim == 0);
    vtr_item_frame_list_free(&list);
    void *pic = NULL;
    size_t n = 0;
    CHECK_OK(vtr_catalog_item_frame_jpeg(cat, id, 0, &pic, &n, &err));
    CHECK(n == sizeof jpeg && memcmp(pic, jpeg, n) == 0);
    free(pic);
    CHECK_FAILS(vtr_catalog_item_frame_jpeg(cat, id, 1, &pic, &n, &err), VTR_ERR_NOT_FOUND,
                "no picture of frame 1 of item");
    CHECK_FAILS(vtr_catalog_item_frame_jpeg(cat, id, 7, &pic, &n, &err), VTR_ERR_NOT_FOUND,
                "no picture of frame 7");
    /* a second put replaces: fewer frames leave no old ones behind */
    CHECK_OK(vtr_catalog_put_item_frames(cat, id, 1, frames + 2, &err));
    CHECK_OK(vtr_catalog_item_frames(cat, id, &list, &err));
    CHECK(list.n == 1 && list.frames[0].time_s == 2.5);
    vtr_item_frame_list_free(&list);
    /* deleting an item deletes its frames, and only its own */
    CHECK_OK(vtr_catalog_delete_item(cat, id, &err));
    CHECK_OK(vtr_catalog_item_frames(cat, id, &list, &err));
    CHECK(list.n == 0);
    vtr_item_frame_list_free(&list);
    CHECK_OK(vtr_catalog_item_frames(cat, other, &list, &err));
    CHECK(list.n == 1);
    vtr_item_frame_list_free(&list);
    /* an unknown item: the foreign key says so */
    vtr_status st = vtr_catalog_put_item_frames(cat, 999, 1, frames, &err);
    CHECK_MSG(st == VTR_ERR_NOT_FOUND, "status %d: %s", (int)st, err.msg);
    vtr_catalog_close(cat);
}
