/* Configs: typed, schema-driven settings read from YAML files and --set overrides.
 *
 * A program declares every setting it reads in a static schema (key, type, default, help),
 * builds a config from it (all defaults), merges YAML files, applies `--set key=value`
 * overrides, checks that required keys were given, then reads values with typed getters.
 * Later merges win: load the files first, then apply --set, in command-line order.
 *
 *     static const vtr_config_field schema[] = {
 *         {"train.lr", VTR_CONFIG_FLOAT, "5e-4", "AdamW learning rate"},
 *         {"train.lr_decay_epochs", VTR_CONFIG_INT_LIST, "[15]", "epochs where lr *= 0.1"},
 *         {"data.features", VTR_CONFIG_STRING, NULL, "feature store (required)"},
 *     };
 *
 * Keys are dotted paths; each segment matches [A-Za-z_][A-Za-z0-9_-]*. In YAML a dotted
 * key is written as nested mappings (`train:` then `  lr: 1e-4`); writing the dotted key
 * itself (`train.lr: 1e-4`) in a file is the same thing.
 *
 * Values, by type (what a YAML file, a --set value and a schema default may hold):
 *   BOOL          plain true, false, yes or no (lowercase only).
 *   INT           plain decimal integer with an optional sign, within int64
 *                 (leading zeros are decimal, never octal; no hex, no underscores).
 *   FLOAT         plain decimal number parsed by strtod and fully consumed, finite:
 *                 "1e-4", "5", "-0.5" are accepted; ".inf", "nan", "1.0abc", "0x1p3" are
 *                 not. Parsing and dumping assume the "C" LC_NUMERIC locale.
 *   STRING        any scalar, plain or quoted, except a plain null ("", "~", "null",
 *                 "Null", "NULL"): write '' for the empty string. No NUL characters.
 *   *_LIST        a YAML sequence (block or flow "[15, 25]") of scalars of the element
 *                 type; "[]" is the empty list. A lone scalar is not a one-element list.
 * BOOL, INT and FLOAT values must be plain scalars: a quoted '5' is a string, as in YAML.
 *
 * YAML features refused with a message: anchors and aliases, explicit tags, more than one
 * document, non-scalar mapping keys, a top level that is not a mapping. A file that is
 * empty (or only comments, or a lone "---") is an empty config: it changes nothing. A
 * group key with an empty value (`train:` and nothing below) is an empty mapping.
 * Input must be UTF-8 (or UTF-16 with a BOM, which libyaml converts); invalid bytes fail.
 *
 * Errors are one line. Loading a file: "FILE:LINE: unknown key 'train.lrr'",
 * "FILE:LINE: duplicate key 'train.lr' (first at line 3)",
 * "FILE:LINE: key 'train.lr': expected a number, got 'abc'",
 * "FILE:LINE: key 'train.lr_decay_epochs' item 2: expected an integer, got 'x'",
 * "FILE:LINE: <libyaml's problem> (<libyaml's context> at line N)". --set errors start
 * with "--set: " instead. Lines are 1-based; a problem at the end of the input is put on
 * its last line. Values quoted in messages are cut at 60 bytes with control characters
 * escaped, so that a message stays on one line.
 *
 * Status codes: VTR_ERR_FORMAT for input that is not YAML (syntax, encoding, truncation);
 * VTR_ERR_INVALID for YAML that does not fit the schema (unknown or duplicate key, wrong
 * type, refused feature), for a bad schema, and for a required key left unset;
 * VTR_ERR_IO when a file cannot be read; VTR_ERR_NOMEM when memory runs out.
 *
 * A failed load or set leaves the config exactly as it was (all or nothing).
 * Every value remembers where it came from: "default", "FILE:LINE" (the line of its key)
 * or "--set", for messages about values that are well-typed but out of range.
 *
 * A config is not thread-safe for writing; concurrent reads are fine.
 */
#ifndef VTR_CONFIG_H
#define VTR_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"

typedef enum vtr_config_type {
    VTR_CONFIG_BOOL,
    VTR_CONFIG_INT,         /* int64_t */
    VTR_CONFIG_FLOAT,       /* double */
    VTR_CONFIG_STRING,      /* UTF-8, NUL-terminated */
    VTR_CONFIG_INT_LIST,
    VTR_CONFIG_FLOAT_LIST,
    VTR_CONFIG_STRING_LIST,
} vtr_config_type;

typedef struct vtr_config_field {
    const char *key;           /* dotted path, e.g. "train.lr" */
    vtr_config_type type;
    const char *default_value; /* YAML text of the default ("5e-4", "[15, 25]", "gpo",
                                  "''"); NULL makes the key required */
    const char *help;          /* one line for --help; may be NULL */
} vtr_config_field;

typedef struct vtr_config vtr_config;

/* Builds a config holding the schema's defaults. The schema is borrowed: it must outlive
 * the config (a static array). Fails with VTR_ERR_INVALID, naming the key, on a schema
 * error: a malformed or repeated key, a key that is both a value and a group ("train"
 * and "train.lr"), an unknown type, or a default that does not parse as its type.
 * On failure *out is NULL. */
vtr_status vtr_config_new(const vtr_config_field *schema, size_t count, vtr_config **out,
                          vtr_error *err);

/* Frees the config and every value; NULL is allowed. */
void vtr_config_free(vtr_config *cfg);

/* Merges the YAML file at `path` (see the top of this file). Messages start with path.
 * A file of more than 16 MiB is refused with VTR_ERR_INVALID. */
vtr_status vtr_config_load_file(vtr_config *cfg, const char *path, vtr_error *err);

/* Merges YAML held in memory: `len` bytes at buf (no NUL terminator needed). `name`
 * stands for the file in messages and sources. */
vtr_status vtr_config_load_string(vtr_config *cfg, const char *name, const char *buf,
                                  size_t len, vtr_error *err);

/* Applies one override "a.b=value" (the text after the first '='). The value is YAML:
 * a scalar, or a sequence such as "[15, 25]" for list keys; "lr=" is an empty value.
 * Errors: "--set: expected KEY=VALUE, got 'x'", "--set: unknown key 'a.b'",
 * "--set: key 'a.b': expected a number, got 'abc'". The source becomes "--set". */
vtr_status vtr_config_set(vtr_config *cfg, const char *assignment, vtr_error *err);

/* Fails with VTR_ERR_INVALID naming every required key still unset:
 * "required key 'data.features' is not set" or "required keys not set: 'a', 'b'". */
vtr_status vtr_config_check_required(const vtr_config *cfg, vtr_error *err);

/* Typed getters. Asking for a key that is not in the schema, with the wrong type, or a
 * required key still unset is a programming error: the getter then returns false, 0,
 * 0.0 or NULL (and *count = 0); vtr_config_expect tells which. Strings and lists belong
 * to the config and stay valid until that key is next loaded or set, or the config is
 * freed. An empty list returns NULL with *count = 0. */
bool vtr_config_bool(const vtr_config *cfg, const char *key);
int64_t vtr_config_int(const vtr_config *cfg, const char *key);
double vtr_config_float(const vtr_config *cfg, const char *key);
const char *vtr_config_string(const vtr_config *cfg, const char *key);
const int64_t *vtr_config_int_list(const vtr_config *cfg, const char *key, size_t *count);
const double *vtr_config_float_list(const vtr_config *cfg, const char *key, size_t *count);
const char *const *vtr_config_string_list(const vtr_config *cfg, const char *key,
                                          size_t *count);

/* The checked form of a getter's contract: VTR_OK when `key` is in the schema with this
 * type and has a value; VTR_ERR_NOT_FOUND "no key 'x' in the config schema";
 * VTR_ERR_INVALID "config key 'x' is a float, not a string" or
 * "required key 'x' is not set". */
vtr_status vtr_config_expect(const vtr_config *cfg, const char *key, vtr_config_type type,
                             vtr_error *err);

/* Where the key's value came from: "default", "FILE:LINE" or "--set"; NULL for a key not
 * in the schema or a required key still unset. Owned by the config, like values. */
const char *vtr_config_source(const vtr_config *cfg, const char *key);

/* For checks a program makes on well-typed values (ranges, choices): fills err with
 * VTR_ERR_INVALID and "SOURCE: key 'train.lr': <fmt...>" ("cfg.yaml:3: key ...",
 * "--set: key ..."; "key 'train.lr' (default): ..." for a default) and returns
 * VTR_ERR_INVALID. */
vtr_status vtr_config_fail(const vtr_config *cfg, const char *key, vtr_error *err,
                           const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Writes the resolved config as YAML: every key, nested mappings, groups in the order
 * of their first key in the schema, keys in schema order. Two-space indents; booleans
 * true/false; integers in decimal; floats in the shortest form that strtod reads back to
 * the same double, always with a '.' ("2.0", "0.0005", "1.0e-05"); strings and string
 * list items double-quoted with escapes; lists in flow style ("[15, 25]", "[]"). A
 * required key still unset is written as a comment ("# features: required, not set").
 * No other comments and no sources, so equal configs give equal bytes; loading the dump
 * into a config of the same schema gives back identical values. Fails with VTR_ERR_IO
 * if the stream reports a write error. */
vtr_status vtr_config_dump(const vtr_config *cfg, FILE *fp, vtr_error *err);

/* The dump above as a malloc'ed NUL-terminated string in *out (caller frees). */
vtr_status vtr_config_dump_string(const vtr_config *cfg, char **out, vtr_error *err);

#endif
