/* String table: entries in insertion order, an open-addressing index of entry numbers
 * (linear probing, load factor at most 1/2), keys copied into chunks that never move. */
#include "string_table.h"

#include <stdlib.h>
#include <string.h>

#define CHUNK_SIZE ((size_t)64 << 10) /* bytes per key chunk, unless a key is larger */
#define MIN_SLOTS 64

typedef struct entry {
    const char *key; /* NUL-terminated, in a chunk */
    uint64_t hash;
    uint32_t len;
} entry;

typedef struct chunk {
    struct chunk *next;
    size_t used, size;
    char bytes[];
} chunk;

struct vtr_string_table {
    entry *entries;
    int64_t count, cap;
    int64_t *slots;  /* entry index + 1; 0 = empty */
    uint64_t nslots; /* a power of two */
    chunk *chunks;   /* newest first */
};

static uint64_t fnv1a(const char *key, size_t len)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)key[i];
        h *= 0x100000001b3u;
    }
    return h;
}

vtr_string_table *vtr_string_table_new(void)
{
    vtr_string_table *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->slots = calloc(MIN_SLOTS, sizeof *t->slots);
    if (!t->slots) {
        free(t);
        return NULL;
    }
    t->nslots = MIN_SLOTS;
    return t;
}

void vtr_string_table_free(vtr_string_table *table)
{
    if (!table)
        return;
    for (chunk *c = table->chunks, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(table->entries);
    free(table->slots);
    free(table);
}

int64_t vtr_string_table_count(const vtr_string_table *table)
{
    return table->count;
}

/* The slot holding key, or the empty slot where it would go. */
static uint64_t probe(const vtr_string_table *t, const char *key, size_t len, uint64_t hash)
{
    uint64_t mask = t->nslots - 1;
    for (uint64_t s = hash & mask;; s = (s + 1) & mask) {
        int64_t e = t->slots[s];
        if (e == 0)
            return s;
        const entry *en = &t->entries[e - 1];
        if (en->hash == hash && en->len == len && memcmp(en->key, key, len) == 0)
            return s;
    }
}

int64_t vtr_string_table_find(const vtr_string_table *table, const char *key, size_t len)
{
    if (len > UINT32_MAX)
        return -1;
    uint64_t s = probe(table, key, len, fnv1a(key, len));
    return table->slots[s] - 1;
}

static bool grow_slots(vtr_string_table *t)
{
    uint64_t n = t->nslots * 2;
    int64_t *slots = calloc(n, sizeof *slots);
    if (!slots)
        return false;
    for (int64_t i = 0; i < t->count; i++) {
        uint64_t s = t->entries[i].hash & (n - 1);
        while (slots[s])
            s = (s + 1) & (n - 1);
        slots[s] = i + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = n;
    return true;
}

/* Room for len + 1 bytes in a chunk, or NULL. */
static char *chunk_alloc(vtr_string_table *t, size_t len)
{
    chunk *c = t->chunks;
    if (!c || c->size - c->used < len + 1) {
        size_t size = len + 1 > CHUNK_SIZE ? len + 1 : CHUNK_SIZE;
        c = malloc(sizeof *c + size);
        if (!c)
            return NULL;
        c->used = 0;
        c->size = size;
        c->next = t->chunks;
        t->chunks = c;
    }
    char *p = c->bytes + c->used;
    c->used += len + 1;
    return p;
}

vtr_status vtr_string_table_insert(vtr_string_table *table, const char *key, size_t len,
                                   int64_t *index, bool *added, vtr_error *err)
{
    if (added)
        *added = false;
    if (len > UINT32_MAX)
        return vtr_fail(err, VTR_ERR_INVALID, "string of %zu bytes is too long for a table",
                        len);
    uint64_t hash = fnv1a(key, len);
    uint64_t s = probe(table, key, len, hash);
    if (table->slots[s]) {
        if (index)
            *index = table->slots[s] - 1;
        return VTR_OK;
    }
    if ((uint64_t)(table->count + 1) * 2 > table->nslots) {
        if (!grow_slots(table))
            return vtr_fail(err, VTR_ERR_NOMEM, "string table: out of memory");
        s = probe(table, key, len, hash);
    }
    if (table->count == table->cap) {
        int64_t cap = table->cap ? table->cap * 2 : 64;
        entry *e = realloc(table->entries, (size_t)cap * sizeof *e);
        if (!e)
            return vtr_fail(err, VTR_ERR_NOMEM, "string table: out of memory");
        table->entries = e;
        table->cap = cap;
    }
    char *copy = chunk_alloc(table, len);
    if (!copy)
        return vtr_fail(err, VTR_ERR_NOMEM, "string table: out of memory");
    if (len)
        memcpy(copy, key, len);
    copy[len] = '\0';
    table->entries[table->count] = (entry){copy, hash, (uint32_t)len};
    table->slots[s] = table->count + 1;
    if (index)
        *index = table->count;
    table->count++;
    if (added)
        *added = true;
    return VTR_OK;
}

const char *vtr_string_table_key(const vtr_string_table *table, int64_t index, size_t *len)
{
    const entry *e = &table->entries[index];
    if (len)
        *len = e->len;
    return e->key;
}
