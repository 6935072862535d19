/* String tables: insertion order, lookup, growth, keys with NUL bytes, stable pointers. */
#include <stdlib.h>

#include "check.h"
#include "lib/string_table.h"

TEST(string_table_insert_find)
{
    vtr_error err;
    vtr_string_table *t = vtr_string_table_new();
    CHECK(t);
    int64_t index;
    bool added;
    CHECK_OK(vtr_string_table_insert(t, "dog", 3, &index, &added, &err));
    CHECK(added && index == 0);
    CHECK_OK(vtr_string_table_insert(t, "cat", 3, &index, &added, &err));
    CHECK(added && index == 1);
    CHECK_OK(vtr_string_table_insert(t, "dog", 3, &index, &added, &err));
    CHECK(!added && index == 0);
    CHECK_OK(vtr_string_table_insert(t, "", 0, &index, &added, &err)); /* the empty key */
    CHECK(added && index == 2);
    CHECK_OK(vtr_string_table_insert(t, "a\0b", 3, &index, &added, &err)); /* a NUL inside */
    CHECK(added && index == 3);
    CHECK_EQ_INT(vtr_string_table_count(t), 4);
    CHECK_EQ_INT(vtr_string_table_find(t, "cat", 3), 1);
    CHECK_EQ_INT(vtr_string_table_find(t, "ca", 2), -1);
    CHECK_EQ_INT(vtr_string_table_find(t, "", 0), 2);
    CHECK_EQ_INT(vtr_string_table_find(t, "a\0b", 3), 3);
    CHECK_EQ_INT(vtr_string_table_find(t, "a", 1), -1);
    size_t len;
    CHECK_STR(vtr_string_table_key(t, 1, &len), "cat");
    CHECK_EQ_INT(len, 3);
    CHECK(memcmp(vtr_string_table_key(t, 3, &len), "a\0b", 4) == 0 && len == 3);
    vtr_string_table_free(t);
    vtr_string_table_free(NULL);
}

TEST(string_table_grows_and_keeps_keys_in_place)
{
    vtr_error err;
    vtr_string_table *t = vtr_string_table_new();
    enum { N = 100000 };
    const char *first = NULL;
    char key[32];
    for (int i = 0; i < N; i++) {
        int n = snprintf(key, sizeof key, "key%d", i);
        int64_t index;
        CHECK_OK(vtr_string_table_insert(t, key, (size_t)n, &index, NULL, &err));
        CHECK_EQ_INT(index, i);
        if (i == 0)
            first = vtr_string_table_key(t, 0, NULL);
    }
    /* a key longer than a chunk */
    char *big = malloc(200000);
    memset(big, 'x', 200000);
    CHECK_OK(vtr_string_table_insert(t, big, 200000, NULL, NULL, &err));
    CHECK_EQ_INT(vtr_string_table_find(t, big, 200000), N);
    free(big);
    CHECK(vtr_string_table_key(t, 0, NULL) == first); /* never moved */
    CHECK_EQ_INT(vtr_string_table_count(t), N + 1);
    for (int i = 0; i < N; i += 997) {
        int n = snprintf(key, sizeof key, "key%d", i);
        CHECK_EQ_INT(vtr_string_table_find(t, key, (size_t)n), i);
        CHECK_STR(vtr_string_table_key(t, i, NULL), key);
    }
    CHECK_EQ_INT(vtr_string_table_find(t, "key100000", 9), -1);
    vtr_string_table_free(t);
}
