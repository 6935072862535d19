/* A string table: distinct byte strings numbered 0, 1, 2, ... in insertion order, with
 * lookup by content in O(1) (open addressing, FNV-1a hashes).
 *
 * Used wherever a set of words or keys needs both directions, index -> string and
 * string -> index: vocabularies (the index is the word id), token counting while a
 * vocabulary is built, and the key index of feature stores.
 *
 * Keys are arbitrary bytes (a NUL inside is allowed; lengths are explicit). The table
 * copies every inserted key; vtr_string_table_key() returns a NUL-terminated copy that
 * stays valid until the table is freed (keys live in fixed chunks that never move).
 * Not thread-safe for writes; concurrent finds on a table nobody modifies are fine.
 */
#ifndef VTR_STRING_TABLE_H
#define VTR_STRING_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef struct vtr_string_table vtr_string_table;

/* An empty table, or NULL when out of memory. */
vtr_string_table *vtr_string_table_new(void);

/* Frees the table and its keys; safe on NULL. */
void vtr_string_table_free(vtr_string_table *table);

/* Number of keys. */
int64_t vtr_string_table_count(const vtr_string_table *table);

/* The index of key (len bytes), or -1 when absent. */
int64_t vtr_string_table_find(const vtr_string_table *table, const char *key, size_t len);

/* Adds key (len bytes) unless present. *index (may be NULL) receives its index, new or
 * old; *added (may be NULL) says whether it was new. Fails only with VTR_ERR_NOMEM (or
 * VTR_ERR_INVALID for a key of 4 GiB or more), leaving the table unchanged. */
vtr_status vtr_string_table_insert(vtr_string_table *table, const char *key, size_t len,
                                   int64_t *index, bool *added, vtr_error *err);

/* The key at index (0 <= index < count), NUL-terminated; *len (may be NULL) receives its
 * length. Valid until the table is freed. */
const char *vtr_string_table_key(const vtr_string_table *table, int64_t index, size_t *len);

#endif
