/* A query's results as JSON (search_json.h). */
#include "search_json.h"

#include <math.h>

json_t *vtr_search_result_json(const vtr_search_result *r, int64_t rank, const int *phrases)
{
    /* JSON has no NaN: a damaged row's score is null */
    json_t *o = json_pack("{s:I, s:o, s:s, s:s?, s:o, s:o}", "rank", (json_int_t)rank, "score",
                          isfinite(r->score) ? json_real(r->score) : json_null(), "key", r->key,
                          "path", r->path, "duration",
                          r->duration_s >= 0 ? json_real(r->duration_s) : json_null(), "image",
                          r->duration_s >= 0 ? json_boolean(r->duration_s == 0) : json_null());
    if (o && phrases &&
        json_object_set_new(o, "levels",
                            json_pack("{s:f, s:f, s:f}", "global", (double)r->levels[0], "verb",
                                      (double)r->levels[1], "noun", (double)r->levels[2])) != 0) {
        json_decref(o);
        o = NULL;
    }
    return o;
}

json_t *vtr_search_json(const char *query, const int words[2], const vtr_search_result *r,
                        int64_t found, int64_t first_rank, const int *phrases)
{
    json_t *list = json_array();
    for (int64_t j = 0; list && j < found; j++)
        if (json_array_append_new(list, vtr_search_result_json(&r[j], first_rank + j,
                                                               phrases)) != 0) {
            json_decref(list);
            list = NULL;
        }
    json_t *out = list ? json_pack("{s:s, s:i, s:i, s:o}", "query", query, "words", words[0],
                                   "known_words", words[1], "results", list)
                       : NULL;
    if (out && phrases &&
        json_object_set_new(out, "phrases", json_pack("{s:i, s:i}", "verbs", phrases[0],
                                                      "nouns", phrases[1])) != 0) {
        json_decref(out);
        out = NULL;
    }
    return out;
}
