/* A query's results as JSON: the object of vtr-search --json, which vtr-serve's API
 * answers with too (docs/search.md):
 *   {"query", "words", "known_words", "results": [{"rank", "score", "key", "path",
 *    "duration", "image"}]}
 * path, duration and image are null when the catalog does not know them; a score that
 * is not a number (a damaged row) is null. An HGR model adds the query's "phrases"
 * {"verbs", "nouns"} and each result's "levels" {"global", "verb", "noun"}. */
#ifndef VTR_SEARCH_JSON_H
#define VTR_SEARCH_JSON_H

#include <jansson.h>
#include <stdint.h>

#include "index/text_search.h"

/* The object of query (words[0] words, words[1] of them known) and its found results
 * r[0 .. found-1], ranked from first_rank; phrases (the query's verb and noun counts)
 * NULL for a model without levels. NULL when out of memory. */
json_t *vtr_search_json(const char *query, const int words[2], const vtr_search_result *r,
                        int64_t found, int64_t first_rank, const int *phrases);

/* One result's object as in the list above (rank given). NULL when out of memory. */
json_t *vtr_search_result_json(const vtr_search_result *r, int64_t rank, const int *phrases);

#endif
