/* Tests for lib/config: defaults, YAML merges, --set, every error path, dump/reload. */
#define _POSIX_C_SOURCE 200809L
#include "check.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "lib/config.h"

/* Mirrors a training config. train.lr_factors comes last on purpose: the dump must still
 * group it under train. */
static const vtr_config_field schema[] = {
    {"seed", VTR_CONFIG_INT, "0", "RNG seed"},
    {"train.lr", VTR_CONFIG_FLOAT, "5e-4", "AdamW learning rate"},
    {"train.epochs", VTR_CONFIG_INT, "25", "epochs"},
    {"train.batch_size", VTR_CONFIG_INT, "128", "batch size"},
    {"train.margin", VTR_CONFIG_FLOAT, "0.2", "hinge margin"},
    {"train.lr_decay_epochs", VTR_CONFIG_INT_LIST, "[15]", "epochs where lr *= 0.1"},
    {"train.max_violation", VTR_CONFIG_BOOL, "true", "hardest negative only"},
    {"model.pooler", VTR_CONFIG_STRING, "gpo", "set pooler"},
    {"model.gpo.d_pe", VTR_CONFIG_INT, "32", "positional encoding size"},
    {"model.gpo.temperature", VTR_CONFIG_FLOAT, "0.1", "softmax temperature"},
    {"data.splits", VTR_CONFIG_STRING_LIST, "[train, val, test]", "splits"},
    {"data.features", VTR_CONFIG_STRING, "''", "feature store"},
    {"train.lr_factors", VTR_CONFIG_FLOAT_LIST, "[]", "per-stage lr factors"},
};
#define N_FIELDS (sizeof schema / sizeof schema[0])

static vtr_config *new_config(void)
{
    vtr_error err;
    vtr_config *cfg = NULL;
    CHECK_OK(vtr_config_new(schema, N_FIELDS, &cfg, &err));
    CHECK(cfg != NULL);
    return cfg;
}

/* Writes len bytes to a file in the test directory; returns its path. */
static const char *write_bytes(const char *name, const char *data, size_t len)
{
    const char *path = test_path(name);
    test_write_file(path, data, len);
    return path;
}

static const char *write_text(const char *name, const char *text)
{
    return write_bytes(name, text, strlen(text));
}

/* Loads text as a file named cfg.yaml into a fresh config; expects it to fail with
 * status and a message containing needle. */
static void check_load_fails(const char *text, vtr_status status, const char *needle)
{
    vtr_error err;
    vtr_config *cfg = new_config();
    CHECK_FAILS(vtr_config_load_string(cfg, "cfg.yaml", text, strlen(text), &err), status,
                needle);
    CHECK_MSG(strchr(err.msg, '\n') == NULL, "message has a newline: %s", err.msg);
    vtr_config_free(cfg);
}

TEST(config_defaults)
{
    vtr_config *cfg = new_config();
    size_t n;
    CHECK_EQ_INT(vtr_config_int(cfg, "seed"), 0);
    CHECK(vtr_config_float(cfg, "train.lr") == 5e-4);
    CHECK_EQ_INT(vtr_config_int(cfg, "train.epochs"), 25);
    CHECK(vtr_config_float(cfg, "train.margin") == 0.2);
    const int64_t *decay = vtr_config_int_list(cfg, "train.lr_decay_epochs", &n);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(decay[0], 15);
    CHECK(vtr_config_bool(cfg, "train.max_violation"));
    CHECK_STR(vtr_config_string(cfg, "model.pooler"), "gpo");
    CHECK_EQ_INT(vtr_config_int(cfg, "model.gpo.d_pe"), 32);
    const char *const *splits = vtr_config_string_list(cfg, "data.splits", &n);
    CHECK_EQ_INT(n, 3);
    CHECK_STR(splits[0], "train");
    CHECK_STR(splits[2], "test");
    CHECK_STR(vtr_config_string(cfg, "data.features"), "");
    CHECK(vtr_config_float_list(cfg, "train.lr_factors", &n) == NULL);
    CHECK_EQ_INT(n, 0);
    CHECK_STR(vtr_config_source(cfg, "train.lr"), "default");
    vtr_error err;
    CHECK_OK(vtr_config_check_required(cfg, &err));
    vtr_config_free(cfg);
    vtr_config_free(NULL);
}

TEST(config_schema_errors)
{
    vtr_error err;
    vtr_config *cfg = (vtr_config *)&err; /* must be reset to NULL on failure */
    const vtr_config_field bad_default[] = {{"train.lr", VTR_CONFIG_FLOAT, "fast", NULL}};
    CHECK_FAILS(vtr_config_new(bad_default, 1, &cfg, &err), VTR_ERR_INVALID,
                "schema: key 'train.lr': expected a number, got 'fast'");
    CHECK(cfg == NULL);
    const vtr_config_field dup[] = {{"a.b", VTR_CONFIG_INT, "1", NULL},
                                    {"a.b", VTR_CONFIG_INT, "2", NULL}};
    CHECK_FAILS(vtr_config_new(dup, 2, &cfg, &err), VTR_ERR_INVALID,
                "schema: duplicate key 'a.b'");
    const vtr_config_field below[] = {{"a", VTR_CONFIG_INT, "1", NULL},
                                      {"a.b", VTR_CONFIG_INT, "2", NULL}};
    CHECK_FAILS(vtr_config_new(below, 2, &cfg, &err), VTR_ERR_INVALID,
                "key 'a.b' is below key 'a', which holds a value");
    const vtr_config_field group[] = {{"a.b", VTR_CONFIG_INT, "1", NULL},
                                      {"a", VTR_CONFIG_INT, "2", NULL}};
    CHECK_FAILS(vtr_config_new(group, 2, &cfg, &err), VTR_ERR_INVALID,
                "key 'a' is also a group of keys");
    const char *malformed[] = {"", "a..b", ".a", "a.", "1a", "a b", "a.b:c"};
    for (size_t k = 0; k < sizeof malformed / sizeof *malformed; k++) {
        const vtr_config_field f[] = {{malformed[k], VTR_CONFIG_INT, "1", NULL}};
        CHECK_FAILS(vtr_config_new(f, 1, &cfg, &err), VTR_ERR_INVALID, "malformed key");
    }
    const vtr_config_field bad_type[] = {{"a", (vtr_config_type)42, "1", NULL}};
    CHECK_FAILS(vtr_config_new(bad_type, 1, &cfg, &err), VTR_ERR_INVALID, "unknown type 42");
    CHECK(cfg == NULL);
    /* an empty schema is fine, and so is an empty file for it */
    CHECK_OK(vtr_config_new(NULL, 0, &cfg, &err));
    CHECK_OK(vtr_config_load_string(cfg, "e.yaml", "", 0, &err));
    vtr_config_free(cfg);
}

TEST(config_file_overrides)
{
    vtr_error err;
    vtr_config *cfg = new_config();
    const char *path = write_text("over.yaml", "# experiment\n"
                                               "seed: 7\n"
                                               "train:\n"
                                               "  lr: 1e-4\n"
                                               "  epochs: 35\n"
                                               "model:\n"
                                               "  pooler: 'max'\n");
    CHECK_OK(vtr_config_load_file(cfg, path, &err));
    CHECK_EQ_INT(vtr_config_int(cfg, "seed"), 7);
    CHECK(vtr_config_float(cfg, "train.lr") == 1e-4);
    CHECK_EQ_INT(vtr_config_int(cfg, "train.epochs"), 35);
    CHECK_EQ_INT(vtr_config_int(cfg, "train.batch_size"), 128); /* untouched */
    CHECK_STR(vtr_config_string(cfg, "model.pooler"), "max");
    char want[600];
    snprintf(want, sizeof want, "%s:4", path);
    CHECK_STR(vtr_config_source(cfg, "train.lr"), want);
    CHECK_STR(vtr_config_source(cfg, "train.batch_size"), "default");

    /* a second file merges over the first */
    CHECK_OK(vtr_config_load_string(cfg, "b.yaml", "train: {epochs: 50}\n", 20, &err));
    CHECK_EQ_INT(vtr_config_int(cfg, "train.epochs"), 50);
    CHECK(vtr_config_float(cfg, "train.lr") == 1e-4);
    CHECK_STR(vtr_config_source(cfg, "train.epochs"), "b.yaml:1");

    CHECK_FAILS(vtr_config_load_file(cfg, test_path("missing.yaml"), &err), VTR_ERR_IO,
                "missing.yaml: No such file");
    CHECK_FAILS(vtr_config_load_file(cfg, test_tmpdir(), &err), VTR_ERR_IO, test_tmpdir());

    /* a config of 16 MiB is the most load_file reads */
    const char *big = test_path("big.yaml");
    FILE *fp = fopen(big, "wb");
    CHECK(fp != NULL);
    CHECK(fseek(fp, (16L << 20) - 1, SEEK_SET) == 0);
    CHECK(fputc('\n', fp) == '\n');
    CHECK(fclose(fp) == 0);
    CHECK_FAILS(vtr_config_load_file(cfg, big, &err), VTR_ERR_FORMAT, "control characters");
    CHECK(truncate(big, (16L << 20) + 1) == 0);
    CHECK_FAILS(vtr_config_load_file(cfg, big, &err), VTR_ERR_INVALID,
                "big.yaml: over 16 MiB, too large for a config");
    vtr_config_free(cfg);
}

TEST(config_empty_inputs)
{
    const char *empties[] = {"", "\n\n", "# only a comment\n", "---\n", "--- ~\n", "{}\n",
                             "---\n...\n"};
    for (size_t k = 0; k < sizeof empties / sizeof *empties; k++) {
        vtr_error err;
        vtr_config *cfg = new_config();
        CHECK_OK(vtr_config_load_string(cfg, "e.yaml", empties[k], strlen(empties[k]), &err));
        CHECK(vtr_config_float(cfg, "train.lr") == 5e-4);
        CHECK_STR(vtr_config_source(cfg, "train.lr"), "default");
        vtr_config_free(cfg);
    }
    vtr_error err;
    vtr_config *cfg = new_config();
    CHECK_OK(vtr_config_load_file(cfg, write_text("empty.yaml", ""), &err));
    /* a group with nothing under it is an empty mapping */
    CHECK_OK(vtr_config_load_string(cfg, "g.yaml", "train:\nmodel:\n  gpo:\n", 21, &err));
    CHECK_EQ_INT(vtr_config_int(cfg, "train.epochs"), 25);
    vtr_config_free(cfg);
}

TEST(config_nested_keys)
{
    vtr_error err;
    vtr_config *cfg = new_config();
    const char *text = "model:\n"
                       "  gpo:\n"
                       "    d_pe: 16\n"
                       "  pooler: gpo\n"
                       "train.margin: 0.1\n"         /* a dotted key at the top level */
                       "model.gpo.temperature: 0.5\n" /* same group, split over two forms */
                       "data: {features: \"feats/msrvtt\", splits: [a]}\n";
    CHECK_OK(vtr_config_load_string(cfg, "n.yaml", text, strlen(text), &err));
    CHECK_EQ_INT(vtr_config_int(cfg, "model.gpo.d_pe"), 16);
    CHECK(vtr_config_float(cfg, "train.margin") == 0.1);
    CHECK(vtr_config_float(cfg, "model.gpo.temperature") == 0.5);
    CHECK_STR(vtr_config_string(cfg, "data.features"), "feats/msrvtt");
    CHECK_STR(vtr_config_source(cfg, "model.gpo.d_pe"), "n.yaml:3");
    CHECK_STR(vtr_config_source(cfg, "model.gpo.temperature"), "n.yaml:6");
    vtr_config_free(cfg);
}

TEST(config_lists)
{
    vtr_error err;
    vtr_config *cfg = new_config();
    const char *text = "train:\n"
                       "  lr_decay_epochs:\n"
                       "    - 15\n"
                       "    - -3\n"
                       "    - 9223372036854775807\n"
                       "  lr_factors: [1, 0.1, 1e-2]\n"
                       "data:\n"
                       "  splits: [\"a b\", 'c', d e, 'yes', \"\"]\n";
    CHECK_OK(vtr_config_load_string(cfg, "l.yaml", text, strlen(text), &err));
    size_t n;
    const int64_t *ints = vtr_config_int_list(cfg, "train.lr_decay_epochs", &n);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(ints[0], 15);
    CHECK_EQ_INT(ints[1], -3);
    CHECK(ints[2] == INT64_MAX);
    const double *floats = vtr_config_float_list(cfg, "train.lr_factors", &n);
    CHECK_EQ_INT(n, 3);
    CHECK(floats[0] == 1.0 && floats[1] == 0.1 && floats[2] == 1e-2);
    const char *const *strs = vtr_config_string_list(cfg, "data.splits", &n);
    CHECK_EQ_INT(n, 5);
    CHECK_STR(strs[0], "a b");
    CHECK_STR(strs[1], "c");
    CHECK_STR(strs[2], "d e");
    CHECK_STR(strs[3], "yes");
    CHECK_STR(strs[4], "");
    /* and back to empty */
    CHECK_OK(vtr_config_load_string(cfg, "l2.yaml", "train: {lr_decay_epochs: []}", 28, &err));
    CHECK(vtr_config_int_list(cfg, "train.lr_decay_epochs", &n) == NULL);
    CHECK_EQ_INT(n, 0);
    vtr_config_free(cfg);
}

TEST(config_scalar_forms)
{
    vtr_error err;
    vtr_config *cfg = new_config();
    const struct {
        const char *set;
        const char *key;
        double value;
    } floats[] = {{"train.lr=1e-4", "train.lr", 1e-4},    {"train.lr=5", "train.lr", 5.0},
                  {"train.lr=-0.5", "train.lr", -0.5},    {"train.lr=+.5", "train.lr", 0.5},
                  {"train.lr=1E3", "train.lr", 1000.0},   {"train.lr= 2.5 ", "train.lr", 2.5},
                  {"train.lr=1e-400", "train.lr", 0.0}};
    for (size_t k = 0; k < sizeof floats / sizeof *floats; k++) {
        CHECK_OK(vtr_config_set(cfg, floats[k].set, &err));
        CHECK_MSG(vtr_config_float(cfg, floats[k].key) == floats[k].value, "%s", floats[k].set);
    }
    const struct {
        const char *set;
        bool value;
    } bools[] = {{"train.max_violation=false", false}, {"train.max_violation=yes", true},
                 {"train.max_violation=no", false},    {"train.max_violation=true", true}};
    for (size_t k = 0; k < sizeof bools / sizeof *bools; k++) {
        CHECK_OK(vtr_config_set(cfg, bools[k].set, &err));
        CHECK(vtr_config_bool(cfg, "train.max_violation") == bools[k].value);
    }
    CHECK_OK(vtr_config_set(cfg, "seed=-9223372036854775808", &err));
    CHECK(vtr_config_int(cfg, "seed") == INT64_MIN);
    CHECK_OK(vtr_config_set(cfg, "seed=+007", &err));
    CHECK_EQ_INT(vtr_config_int(cfg, "seed"), 7);
    /* strings take any scalar text, and keep quotes' content exactly */
    const struct {
        const char *set, *value;
    } strs[] = {{"model.pooler=123", "123"},          {"model.pooler=true", "true"},
                {"model.pooler='it''s'", "it's"},     {"model.pooler=\"tab\\there\"", "tab\there"},
                {"model.pooler=''", ""},              {"model.pooler=a=b", "a=b"},
                {"model.pooler=caf\xc3\xa9", "caf\xc3\xa9"}};
    for (size_t k = 0; k < sizeof strs / sizeof *strs; k++) {
        CHECK_OK(vtr_config_set(cfg, strs[k].set, &err));
        CHECK_STR(vtr_config_string(cfg, "model.pooler"), strs[k].value);
    }
    vtr_config_free(cfg);
}

TEST(config_set_each_type)
{
    vtr_error err;
    vtr_config *cfg = new_config();
    size_t n;
    CHECK_OK(vtr_config_set(cfg, "train.max_violation=false", &err));
    CHECK(!vtr_config_bool(cfg, "train.max_violation"));
    CHECK_OK(vtr_config_set(cfg, "train.epochs=35", &err));
    CHECK_EQ_INT(vtr_config_int(cfg, "train.epochs"), 35);
    CHECK_OK(vtr_config_set(cfg, "train.lr=1e-4", &err));
    CHECK(vtr_config_float(cfg, "train.lr") == 1e-4);
    CHECK_OK(vtr_config_set(cfg, "model.pooler=avg", &err));
    CHECK_STR(vtr_config_string(cfg, "model.pooler"), "avg");
    CHECK_OK(vtr_config_set(cfg, "train.lr_decay_epochs=[15, 25]", &err));
    const int64_t *ints = vtr_config_int_list(cfg, "train.lr_decay_epochs", &n);
    CHECK(n == 2 && ints[0] == 15 && ints[1] == 25);
    CHECK_OK(vtr_config_set(cfg, "train.lr_factors=[0.5]", &err));
    const double *floats = vtr_config_float_list(cfg, "train.lr_factors", &n);
    CHECK(n == 1 && floats[0] == 0.5);
    CHECK_OK(vtr_config_set(cfg, "data.splits=[tst]", &err));
    const char *const *strs = vtr_config_string_list(cfg, "data.splits", &n);
    CHECK(n == 1);
    CHECK_STR(strs[0], "tst");
    CHECK_OK(vtr_config_set(cfg, "data.splits=[]", &err));
    CHECK(vtr_config_string_list(cfg, "data.splits", &n) == NULL && n == 0);
    CHECK_STR(vtr_config_source(cfg, "train.lr"), "--set");
    /* --set after a file wins; the same key twice is fine (last wins) */
    CHECK_OK(vtr_config_load_string(cfg, "f.yaml", "seed: 1\n", 8, &err));
    CHECK_OK(vtr_config_set(cfg, "seed=2", &err));
    CHECK_OK(vtr_config_set(cfg, "seed=3", &err));
    CHECK_EQ_INT(vtr_config_int(cfg, "seed"), 3);
    vtr_config_free(cfg);
}

TEST(config_set_errors)
{
    vtr_error err;
    vtr_config *cfg = new_config();
    CHECK_FAILS(vtr_config_set(cfg, "train.lr", &err), VTR_ERR_INVALID,
                "--set: expected KEY=VALUE, got 'train.lr'");
    CHECK_FAILS(vtr_config_set(cfg, "train.lrr=1", &err), VTR_ERR_INVALID,
                "--set: unknown key 'train.lrr'");
    CHECK_FAILS(vtr_config_set(cfg, "=1", &err), VTR_ERR_INVALID, "--set: unknown key ''");
    CHECK_FAILS(vtr_config_set(cfg, "train.lr.x=1", &err), VTR_ERR_INVALID,
                "--set: unknown key 'train.lr.x'");
    CHECK_FAILS(vtr_config_set(cfg, "train=1", &err), VTR_ERR_INVALID,
                "--set: 'train' is a group of keys; set one of them, e.g. 'train.lr'");
    CHECK_FAILS(vtr_config_set(cfg, "train.lr=abc", &err), VTR_ERR_INVALID,
                "--set: key 'train.lr': expected a number, got 'abc'");
    CHECK_FAILS(vtr_config_set(cfg, "train.lr=", &err), VTR_ERR_INVALID,
                "--set: key 'train.lr': expected a number, got an empty value");
    CHECK_FAILS(vtr_config_set(cfg, "model.pooler=", &err), VTR_ERR_INVALID,
                "--set: key 'model.pooler': expected a string, got an empty value");
    CHECK_FAILS(vtr_config_set(cfg, "train.epochs=2.5", &err), VTR_ERR_INVALID,
                "--set: key 'train.epochs': expected an integer, got '2.5'");
    CHECK_FAILS(vtr_config_set(cfg, "train.max_violation=True", &err), VTR_ERR_INVALID,
                "expected a boolean (true/false/yes/no), got 'True'");
    CHECK_FAILS(vtr_config_set(cfg, "train.lr_decay_epochs=15", &err), VTR_ERR_INVALID,
                "--set: key 'train.lr_decay_epochs': expected a list of integers, got '15'");
    CHECK_FAILS(vtr_config_set(cfg, "train.lr_decay_epochs=[15, x]", &err), VTR_ERR_INVALID,
                "--set: key 'train.lr_decay_epochs' item 2: expected an integer, got 'x'");
    CHECK_FAILS(vtr_config_set(cfg, "train.lr_decay_epochs=[15", &err), VTR_ERR_FORMAT,
                "--set: did not find expected ',' or ']'");
    CHECK_FAILS(vtr_config_set(cfg, "train.lr=[1]", &err), VTR_ERR_INVALID,
                "expected a number, got a list");
    CHECK_FAILS(vtr_config_set(cfg, "train.lr=a: 1", &err), VTR_ERR_INVALID,
                "expected a number, got a mapping");
    CHECK_FAILS(vtr_config_set(cfg, "train.lr=1\n---\n2", &err), VTR_ERR_INVALID,
                "--set: more than one YAML document");
    /* nothing changed */
    CHECK(vtr_config_float(cfg, "train.lr") == 5e-4);
    CHECK_STR(vtr_config_source(cfg, "train.lr"), "default");
    vtr_config_free(cfg);
}

TEST(config_unknown_keys)
{
    check_load_fails("seed: 1\ntrain:\n  lrr: 1e-4\n", VTR_ERR_INVALID,
                     "cfg.yaml:3: unknown key 'train.lrr'");
    check_load_fails("sed: 1\n", VTR_ERR_INVALID, "cfg.yaml:1: unknown key 'sed' (did you "
                     "mean 'seed'?)");
    /* a typo away from a key: the key suggested; far from every key: nothing suggested */
    check_load_fails("train:\n  epoch: 3\n", VTR_ERR_INVALID,
                     "cfg.yaml:2: unknown key 'train.epoch' (did you mean 'train.epochs'?)");
    vtr_error err;
    vtr_config *cfg = new_config();
    CHECK_FAILS(vtr_config_set(cfg, "model.gpo.dpe=1", &err), VTR_ERR_INVALID,
                "--set: unknown key 'model.gpo.dpe' (did you mean 'model.gpo.d_pe'?)");
    CHECK_FAILS(vtr_config_set(cfg, "optimizer.kind=adam", &err), VTR_ERR_INVALID,
                "--set: unknown key 'optimizer.kind'");
    CHECK(strstr(err.msg, "did you mean") == NULL);
    vtr_config_free(cfg);
    check_load_fails("model:\n  gpo:\n    d_pe: 1\n    dpe: 2\n", VTR_ERR_INVALID,
                     "cfg.yaml:4: unknown key 'model.gpo.dpe'");
    check_load_fails("train.lr.x: 1\n", VTR_ERR_INVALID, "cfg.yaml:1: unknown key 'train.lr.x'");
    check_load_fails("train..lr: 1\n", VTR_ERR_INVALID, "cfg.yaml:1: unknown key 'train..lr'");
    check_load_fails("\"a\\nb\": 1\n", VTR_ERR_INVALID, "cfg.yaml:1: unknown key 'a\\nb'");
}

TEST(config_duplicate_keys)
{
    check_load_fails("seed: 1\ntrain: {}\nseed: 2\n", VTR_ERR_INVALID,
                     "cfg.yaml:3: duplicate key 'seed' (first at line 1)");
    check_load_fails("train:\n  lr: 1\n  epochs: 2\n  lr: 3\n", VTR_ERR_INVALID,
                     "cfg.yaml:4: duplicate key 'train.lr' (first at line 2)");
    check_load_fails("train:\n  lr: 1\ntrain:\n  epochs: 2\n", VTR_ERR_INVALID,
                     "cfg.yaml:3: duplicate key 'train' (first at line 1)");
    check_load_fails("model:\n  gpo: {d_pe: 1, d_pe: 2}\n", VTR_ERR_INVALID,
                     "cfg.yaml:2: duplicate key 'model.gpo.d_pe' (first at line 2)");
    /* the same value reached through a dotted key and through nesting */
    check_load_fails("train.lr: 1\ntrain:\n  lr: 2\n", VTR_ERR_INVALID,
                     "cfg.yaml:3: duplicate key 'train.lr' (first at line 1)");
}

TEST(config_wrong_types)
{
    check_load_fails("train:\n  lr: abc\n", VTR_ERR_INVALID,
                     "cfg.yaml:2: key 'train.lr': expected a number, got 'abc'");
    check_load_fails("train:\n  lr: 1.0abc\n", VTR_ERR_INVALID,
                     "key 'train.lr': expected a number, got '1.0abc'");
    check_load_fails("train:\n  lr: .inf\n", VTR_ERR_INVALID, "expected a number, got '.inf'");
    check_load_fails("train:\n  lr: nan\n", VTR_ERR_INVALID, "expected a number, got 'nan'");
    check_load_fails("train:\n  lr: inf\n", VTR_ERR_INVALID, "expected a number, got 'inf'");
    check_load_fails("train:\n  lr: 0x10\n", VTR_ERR_INVALID, "expected a number, got '0x10'");
    check_load_fails("train:\n  lr: 1e999\n", VTR_ERR_INVALID,
                     "expected a number, got '1e999' (out of range)");
    check_load_fails("train:\n  lr: '5e-4'\n", VTR_ERR_INVALID,
                     "cfg.yaml:2: key 'train.lr': expected a number, got the quoted string '5e-4'");
    check_load_fails("train:\n  lr:\n", VTR_ERR_INVALID,
                     "cfg.yaml:2: key 'train.lr': expected a number, got an empty value");
    check_load_fails("train:\n  epochs: 1.5\n", VTR_ERR_INVALID,
                     "cfg.yaml:2: key 'train.epochs': expected an integer, got '1.5'");
    check_load_fails("train:\n  epochs: 1e3\n", VTR_ERR_INVALID, "expected an integer, got '1e3'");
    check_load_fails("seed: 9223372036854775808\n", VTR_ERR_INVALID,
                     "expected an integer, got '9223372036854775808' (out of int64 range)");
    check_load_fails("seed: -9223372036854775809\n", VTR_ERR_INVALID, "(out of int64 range)");
    check_load_fails("train:\n  max_violation: maybe\n", VTR_ERR_INVALID,
                     "cfg.yaml:2: key 'train.max_violation': expected a boolean");
    check_load_fails("train:\n  max_violation: TRUE\n", VTR_ERR_INVALID, "got 'TRUE'");
    check_load_fails("model:\n  pooler: ~\n", VTR_ERR_INVALID,
                     "key 'model.pooler': expected a string, got '~' (null in YAML; quote it");
    check_load_fails("model:\n  pooler: \"a\\0b\"\n", VTR_ERR_INVALID,
                     "cfg.yaml:2: key 'model.pooler': expected a string, got the quoted string "
                     "'a\\x00b' (contains a NUL character)");
    check_load_fails("train:\n  lr: [1]\n", VTR_ERR_INVALID,
                     "cfg.yaml:2: key 'train.lr': expected a number, got a list");
    check_load_fails("train:\n  lr:\n    a: 1\n", VTR_ERR_INVALID,
                     "cfg.yaml:3: key 'train.lr': expected a number, got a mapping");
    check_load_fails("train:\n  lr_decay_epochs: 15\n", VTR_ERR_INVALID,
                     "cfg.yaml:2: key 'train.lr_decay_epochs': expected a list of integers, "
                     "got '15'");
    check_load_fails("train:\n  lr_decay_epochs:\n    - 15\n    - [25]\n", VTR_ERR_INVALID,
                     "cfg.yaml:4: key 'train.lr_decay_epochs' item 2: expected an integer, "
                     "got a list");
    check_load_fails("train:\n  lr_factors: [0.1, x]\n", VTR_ERR_INVALID,
                     "cfg.yaml:2: key 'train.lr_factors' item 2: expected a number, got 'x'");
    check_load_fails("data:\n  splits: [a, ~]\n", VTR_ERR_INVALID,
                     "key 'data.splits' item 2: expected a string, got '~'");
    check_load_fails("train: 5\n", VTR_ERR_INVALID,
                     "cfg.yaml:1: key 'train': expected a mapping of keys, got '5'");
    check_load_fails("train: [1]\n", VTR_ERR_INVALID, "expected a mapping of keys, got a list");
    check_load_fails("- 1\n- 2\n", VTR_ERR_INVALID,
                     "cfg.yaml:1: expected a mapping of keys at the top level, got a list");
    check_load_fails("hello\n", VTR_ERR_INVALID, "top level, got 'hello'");
    check_load_fails("? [a]\n: 1\n", VTR_ERR_INVALID,
                     "cfg.yaml:1: a key must be a scalar, got a list");
    /* a long value is cut in the message */
    char text[400];
    snprintf(text, sizeof text, "train:\n  lr: %0300d\n", 7);
    text[20] = 'x';
    check_load_fails(text, VTR_ERR_INVALID, "...'");
}

TEST(config_refused_yaml_features)
{
    check_load_fails("seed: &s 1\n", VTR_ERR_INVALID,
                     "cfg.yaml:1: anchors and aliases are not supported");
    check_load_fails("train: {epochs: 1}\nseed: *s\n", VTR_ERR_INVALID,
                     "cfg.yaml:2: anchors and aliases are not supported");
    check_load_fails("seed: !!int 1\n", VTR_ERR_INVALID,
                     "cfg.yaml:1: tags are not supported ('tag:yaml.org,2002:int')");
    check_load_fails("seed: 1\n---\nseed: 2\n", VTR_ERR_INVALID,
                     "cfg.yaml:2: more than one YAML document");
}

TEST(config_syntax_errors)
{
    check_load_fails("train:\n  lr: 1\n epochs: 2\n", VTR_ERR_FORMAT, "cfg.yaml:3: ");
    check_load_fails("seed: 1\ntrain: {lr: 1\n", VTR_ERR_FORMAT,
                     "cfg.yaml:2: did not find expected");
    /* libyaml puts the end of the stream on the line after the last; messages say the
     * last line instead */
    check_load_fails("seed: \"abc\n", VTR_ERR_FORMAT,
                     "cfg.yaml:1: found unexpected end of stream (while scanning a quoted scalar "
                     "at line 1)");
    check_load_fails("seed: 1\n\tseed: 2\n", VTR_ERR_FORMAT, "cfg.yaml:2: ");
    check_load_fails("model:\n  pooler: b: c\n", VTR_ERR_FORMAT,
                     "cfg.yaml:2: mapping values are not allowed in this context");
    /* the file name leads the message when loading from a path too */
    vtr_error err;
    vtr_config *cfg = new_config();
    const char *path = write_text("syntax.yaml", "train:\n  lr_decay_epochs: [1,\n");
    char want[600];
    snprintf(want, sizeof want, "%s:2: did not find expected", path);
    CHECK_FAILS(vtr_config_load_file(cfg, path, &err), VTR_ERR_FORMAT, want);
    vtr_config_free(cfg);
}

static const char full_text[] = "seed: 3\n"
                                "train:\n"
                                "  lr: 0.0001\n"
                                "  lr_decay_epochs: [15, 25]\n"
                                "  max_violation: no\n"
                                "model:\n"
                                "  pooler: \"gp\xc3\xa9 \\u00e9\"\n"
                                "  gpo:\n"
                                "    temperature: 0.1\n"
                                "data:\n"
                                "  splits:\n"
                                "    - 'a'\n"
                                "    - b\n";

TEST(config_truncated_file)
{
    check_load_fails("train:\n  lr_decay_epochs: [15, 2", VTR_ERR_FORMAT, "cfg.yaml:2: ");
    check_load_fails("model:\n  pooler: \"gp", VTR_ERR_FORMAT,
                     "cfg.yaml:2: found unexpected end of stream");
    check_load_fails("model:\n  pooler: gp\xc3", VTR_ERR_FORMAT,
                     "cfg.yaml:2: incomplete UTF-8 octet sequence");
    /* every prefix of a good file either loads or fails with a located message, and a
     * failed load changes nothing */
    size_t len = strlen(full_text);
    for (size_t cut = 0; cut <= len; cut++) {
        vtr_error err;
        vtr_config *cfg = new_config();
        vtr_error_clear(&err);
        vtr_status st = vtr_config_load_string(cfg, "cut.yaml", full_text, cut, &err);
        if (st != VTR_OK) {
            CHECK_MSG(st == VTR_ERR_FORMAT || st == VTR_ERR_INVALID, "cut %zu: %s", cut,
                      vtr_status_name(st));
            CHECK_MSG(strncmp(err.msg, "cut.yaml:", 9) == 0, "cut %zu: %s", cut, err.msg);
            CHECK_MSG(strchr(err.msg, '\n') == NULL, "cut %zu: %s", cut, err.msg);
            CHECK_EQ_INT(vtr_config_int(cfg, "seed"), 0);
            CHECK(vtr_config_float(cfg, "train.lr") == 5e-4);
        }
        vtr_config_free(cfg);
    }
}

TEST(config_non_utf8)
{
    check_load_fails("seed: 1\nmodel:\n  pooler: caf\xe9 x\n", VTR_ERR_FORMAT,
                     "cfg.yaml:3: invalid trailing UTF-8 octet");
    check_load_fails("seed: 1\nmodel:\n  pooler: \xff\n", VTR_ERR_FORMAT,
                     "cfg.yaml:3: invalid leading UTF-8 octet (0xff at byte");
    check_load_fails("seed: 1\x01\n", VTR_ERR_FORMAT,
                     "cfg.yaml:1: control characters are not allowed");
    /* through a file, with an embedded NUL byte */
    vtr_error err;
    vtr_config *cfg = new_config();
    const char *path = write_bytes("nul.yaml", "seed: 1\nseed\0: 2\n", 17);
    CHECK_FAILS(vtr_config_load_file(cfg, path, &err), VTR_ERR_FORMAT, ":2: control characters");
    vtr_config_free(cfg);
}

TEST(config_failed_load_changes_nothing)
{
    vtr_error err;
    vtr_config *cfg = new_config();
    const char *text = "seed: 5\ntrain:\n  lr: 1e-3\n  epochs: many\n";
    CHECK_FAILS(vtr_config_load_string(cfg, "bad.yaml", text, strlen(text), &err),
                VTR_ERR_INVALID, "bad.yaml:4: key 'train.epochs': expected an integer");
    CHECK_EQ_INT(vtr_config_int(cfg, "seed"), 0);
    CHECK(vtr_config_float(cfg, "train.lr") == 5e-4);
    CHECK_STR(vtr_config_source(cfg, "seed"), "default");
    vtr_config_free(cfg);
}

TEST(config_dump_format)
{
    vtr_error err;
    vtr_config *cfg = new_config();
    char *text = NULL;
    CHECK_OK(vtr_config_dump_string(cfg, &text, &err));
    CHECK_STR(text, "seed: 0\n"
                    "train:\n"
                    "  lr: 0.0005\n"
                    "  epochs: 25\n"
                    "  batch_size: 128\n"
                    "  margin: 0.2\n"
                    "  lr_decay_epochs: [15]\n"
                    "  max_violation: true\n"
                    "  lr_factors: []\n"
                    "model:\n"
                    "  pooler: \"gpo\"\n"
                    "  gpo:\n"
                    "    d_pe: 32\n"
                    "    temperature: 0.1\n"
                    "data:\n"
                    "  splits: [\"train\", \"val\", \"test\"]\n"
                    "  features: \"\"\n");
    free(text);
    CHECK_OK(vtr_config_set(cfg, "train.lr=1e-5", &err));
    CHECK_OK(vtr_config_set(cfg, "train.margin=2", &err));
    CHECK_OK(vtr_config_set(cfg, "train.lr_factors=[-0.0, 1e300, 0.30000000000000004]", &err));
    CHECK_OK(vtr_config_dump_string(cfg, &text, &err));
    CHECK_MSG(strstr(text, "  lr: 1.0e-05\n"), "%s", text);
    CHECK_MSG(strstr(text, "  margin: 2.0\n"), "%s", text);
    CHECK_MSG(strstr(text, "  lr_factors: [-0.0, 1.0e+300, 0.30000000000000004]\n"), "%s", text);
    free(text);
    /* the FILE* variant writes the same bytes */
    const char *path = test_path("dump.yaml");
    FILE *fp = fopen(path, "w");
    CHECK(fp != NULL);
    CHECK_OK(vtr_config_dump(cfg, fp, &err));
    CHECK(fclose(fp) == 0);
    vtr_config *again = new_config();
    CHECK_OK(vtr_config_load_file(again, path, &err));
    CHECK(vtr_config_float(again, "train.lr") == 1e-5);
    vtr_config_free(again);
    vtr_config_free(cfg);
}

/* Every value of a and b is identical (floats bit for bit). */
static void check_same_values(const vtr_config *a, const vtr_config *b)
{
    for (size_t i = 0; i < N_FIELDS; i++) {
        const char *key = schema[i].key;
        size_t na, nb;
        switch (schema[i].type) {
        case VTR_CONFIG_BOOL: CHECK(vtr_config_bool(a, key) == vtr_config_bool(b, key)); break;
        case VTR_CONFIG_INT: CHECK(vtr_config_int(a, key) == vtr_config_int(b, key)); break;
        case VTR_CONFIG_FLOAT: {
            double x = vtr_config_float(a, key), y = vtr_config_float(b, key);
            CHECK_MSG(memcmp(&x, &y, sizeof x) == 0, "%s: %.17g != %.17g", key, x, y);
            break;
        }
        case VTR_CONFIG_STRING:
            CHECK_STR(vtr_config_string(a, key), vtr_config_string(b, key));
            break;
        case VTR_CONFIG_INT_LIST: {
            const int64_t *x = vtr_config_int_list(a, key, &na);
            const int64_t *y = vtr_config_int_list(b, key, &nb);
            CHECK_EQ_INT(na, nb);
            CHECK(na == 0 || memcmp(x, y, na * sizeof *x) == 0);
            break;
        }
        case VTR_CONFIG_FLOAT_LIST: {
            const double *x = vtr_config_float_list(a, key, &na);
            const double *y = vtr_config_float_list(b, key, &nb);
            CHECK_EQ_INT(na, nb);
            CHECK(na == 0 || memcmp(x, y, na * sizeof *x) == 0);
            break;
        }
        case VTR_CONFIG_STRING_LIST: {
            const char *const *x = vtr_config_string_list(a, key, &na);
            const char *const *y = vtr_config_string_list(b, key, &nb);
            CHECK_EQ_INT(na, nb);
            for (size_t k = 0; k < na; k++)
                CHECK_STR(x[k], y[k]);
            break;
        }
        }
    }
}

TEST(config_dump_reload_identity)
{
    vtr_error err;
    vtr_config *cfg = new_config();
    const char *sets[] = {
        "seed=-9223372036854775808",
        "train.lr=0.1",
        "train.margin=2.2250738585072014e-308",
        "train.epochs=9223372036854775807",
        "train.max_violation=no",
        "train.lr_decay_epochs=[0, -1, 15]",
        "train.lr_factors=[0.3333333333333333, 1e-320, -0.0, 123456789012345678]",
        "model.gpo.temperature=4.9406564584124654e-324",
        /* quotes, backslashes, controls, DEL, C1, NEL, line separator, BOM, non-characters,
         * leading/trailing spaces, YAML-looking text */
        ("model.pooler=\"  a\\\"b\\\\c\\n\\t\\r\\x01\\x7f\\x85\\u2028\\u2029\\ufeff\\uffff "
         "caf\\u00e9 \\U0001F600 # :- [x] \""),
        "data.splits=['', 'yes', '~', '- x', 'a: b', \"\\x80\", '123', 'null']",
        "data.features=feats/msrvtt.npy",
    };
    for (size_t k = 0; k < sizeof sets / sizeof *sets; k++)
        CHECK_OK(vtr_config_set(cfg, sets[k], &err));
    char *first = NULL, *second = NULL;
    CHECK_OK(vtr_config_dump_string(cfg, &first, &err));
    vtr_config *again = new_config();
    CHECK_OK(vtr_config_load_string(again, "dump.yaml", first, strlen(first), &err));
    check_same_values(cfg, again);
    CHECK_OK(vtr_config_dump_string(again, &second, &err));
    CHECK_STR(first, second);
    /* and from a loaded file, as a run would record it */
    vtr_config *loaded = new_config();
    CHECK_OK(vtr_config_load_string(loaded, "full.yaml", full_text, strlen(full_text), &err));
    free(first);
    free(second);
    CHECK_OK(vtr_config_dump_string(loaded, &first, &err));
    vtr_config_free(again);
    again = new_config();
    CHECK_OK(vtr_config_load_string(again, "dump.yaml", first, strlen(first), &err));
    check_same_values(loaded, again);
    CHECK_STR(vtr_config_string(again, "model.pooler"), "gp\xc3\xa9 \xc3\xa9");
    free(first);
    vtr_config_free(loaded);
    vtr_config_free(again);
    vtr_config_free(cfg);
}

static const vtr_config_field required_schema[] = {
    {"data.features", VTR_CONFIG_STRING, NULL, "feature store"},
    {"data.captions", VTR_CONFIG_STRING_LIST, NULL, "caption files"},
    {"train.lr", VTR_CONFIG_FLOAT, "5e-4", NULL},
};

TEST(config_required_keys)
{
    vtr_error err;
    vtr_config *cfg = NULL;
    CHECK_OK(vtr_config_new(required_schema, 3, &cfg, &err));
    CHECK_FAILS(vtr_config_check_required(cfg, &err), VTR_ERR_INVALID,
                "required keys not set: 'data.features', 'data.captions'");
    /* unset keys read as nothing and dump as comments; the dump still reloads */
    CHECK(vtr_config_string(cfg, "data.features") == NULL);
    CHECK(vtr_config_source(cfg, "data.features") == NULL);
    CHECK_FAILS(vtr_config_expect(cfg, "data.features", VTR_CONFIG_STRING, &err),
                VTR_ERR_INVALID, "required key 'data.features' is not set");
    char *text = NULL;
    CHECK_OK(vtr_config_dump_string(cfg, &text, &err));
    CHECK_STR(text, "data:\n"
                    "  # features: required, not set\n"
                    "  # captions: required, not set\n"
                    "train:\n"
                    "  lr: 0.0005\n");
    vtr_config *again = NULL;
    CHECK_OK(vtr_config_new(required_schema, 3, &again, &err));
    CHECK_OK(vtr_config_load_string(again, "dump.yaml", text, strlen(text), &err));
    free(text);
    vtr_config_free(again);

    CHECK_OK(vtr_config_load_string(cfg, "r.yaml", "data: {features: f.npy}\n", 24, &err));
    CHECK_FAILS(vtr_config_check_required(cfg, &err), VTR_ERR_INVALID,
                "required key 'data.captions' is not set");
    CHECK_OK(vtr_config_set(cfg, "data.captions=[a.json]", &err));
    CHECK_OK(vtr_config_check_required(cfg, &err));
    CHECK_STR(vtr_config_string(cfg, "data.features"), "f.npy");
    vtr_config_free(cfg);
}

TEST(config_getter_misuse)
{
    vtr_error err;
    vtr_config *cfg = new_config();
    size_t n = 99;
    CHECK_EQ_INT(vtr_config_int(cfg, "train.lrr"), 0);
    CHECK_EQ_INT(vtr_config_int(cfg, "train.lr"), 0); /* a float */
    CHECK(vtr_config_float(cfg, "train.epochs") == 0.0);
    CHECK(!vtr_config_bool(cfg, "seed"));
    CHECK(vtr_config_string(cfg, "train") == NULL); /* a group */
    CHECK(vtr_config_int_list(cfg, "data.splits", &n) == NULL && n == 0);
    CHECK(vtr_config_source(cfg, "nope") == NULL);
    CHECK_OK(vtr_config_expect(cfg, "train.lr", VTR_CONFIG_FLOAT, &err));
    CHECK_FAILS(vtr_config_expect(cfg, "train.lrr", VTR_CONFIG_FLOAT, &err), VTR_ERR_NOT_FOUND,
                "no key 'train.lrr' in the config schema");
    CHECK_FAILS(vtr_config_expect(cfg, "train.lr", VTR_CONFIG_STRING, &err), VTR_ERR_INVALID,
                "config key 'train.lr' is a float, not a string");
    vtr_config_free(cfg);
}

TEST(config_fail_names_source)
{
    vtr_error err;
    vtr_config *cfg = new_config();
    CHECK_FAILS(vtr_config_fail(cfg, "train.lr", &err, "must be positive, got %g", 0.0),
                VTR_ERR_INVALID, "key 'train.lr' (default): must be positive, got 0");
    CHECK_OK(vtr_config_load_string(cfg, "x.yaml", "\ntrain:\n  lr: -1\n", 17, &err));
    CHECK_FAILS(vtr_config_fail(cfg, "train.lr", &err, "must be positive"), VTR_ERR_INVALID,
                "x.yaml:3: key 'train.lr': must be positive");
    CHECK_OK(vtr_config_set(cfg, "train.lr=-2", &err));
    CHECK_FAILS(vtr_config_fail(cfg, "train.lr", &err, "must be positive"), VTR_ERR_INVALID,
                "--set: key 'train.lr': must be positive");
    vtr_config_free(cfg);
}
