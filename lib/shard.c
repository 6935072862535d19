/* Sharded work: which items a shard takes and where it writes (shard.h). */
#define _POSIX_C_SOURCE 200809L
#include "shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"

/* "I/N" -> *index, *count, each a whole decimal; -1 when text is not of that form. */
static int parse_pair(const char *text, long long *index, long long *count)
{
    const char *slash = strchr(text, '/');
    if (!slash || slash == text || strchr(slash + 1, '/'))
        return -1;
    char first[32];
    size_t n = (size_t)(slash - text);
    if (n >= sizeof first)
        return -1;
    memcpy(first, text, n);
    first[n] = '\0';
    /* digits only (no sign, no blank); the ranges are checked by the caller */
    if (strspn(first, "0123456789") != n ||
        strspn(slash + 1, "0123456789") != strlen(slash + 1) ||
        vtr_parse_int(first, 0, 1LL << 40, index) != 0 ||
        vtr_parse_int(slash + 1, 0, 1LL << 40, count) != 0)
        return -1;
    return 0;
}

vtr_status vtr_shard_choose(const char *option, const vtr_dist *d, vtr_shard *out,
                            vtr_error *err)
{
    *out = (vtr_shard){.index = 0, .count = 1};
    if (!option) {
        *out = (vtr_shard){.index = d->rank, .count = d->size, .ranks = d->size > 1};
        return VTR_OK;
    }
    char shown[64];
    vtr_printable(option, strlen(option), shown, sizeof shown);
    long long i, n;
    if (parse_pair(option, &i, &n) != 0)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "--shard %s: not I/N (shard I of N shards, 0 <= I < N)", shown);
    if (n < 1 || n > VTR_SHARD_MAX)
        return vtr_fail(err, VTR_ERR_INVALID, "--shard %s: the shard count must be 1 to %d",
                        shown, VTR_SHARD_MAX);
    if (i >= n)
        return vtr_fail(err, VTR_ERR_INVALID, "--shard %s: shard index out of range (0..%lld)",
                        shown, n - 1);
    if (d->size > 1)
        return vtr_fail(err, VTR_ERR_INVALID, "--shard %s under mpirun with %d ranks: the ranks "
                        "are the shards; drop --shard", shown, d->size);
    *out = (vtr_shard){.index = (int)i, .count = (int)n};
    return VTR_OK;
}

void vtr_shard_range(const vtr_shard *s, int64_t n, int64_t *first, int64_t *count)
{
    vtr_dist_share(n, s->index, s->count, first, count);
}

bool vtr_shard_takes(const vtr_shard *s, int64_t position)
{
    return position % s->count == s->index;
}

vtr_status vtr_shard_output(const vtr_shard *s, const char *path, char **out, vtr_error *err)
{
    *out = NULL;
    if (!path || !strcmp(path, "-")) {
        if (s->ranks && s->count > 1)
            return vtr_fail(err, VTR_ERR_INVALID, "stdout under mpirun with %d ranks: their "
                            "items would interleave; name an output file or directory "
                            "(each rank writes OUT.shard-RANK-of-%d)", s->count, s->count);
        return VTR_OK;
    }
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    size_t size = n + 48;
    if (!(*out = malloc(size)))
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    if (s->count == 1)
        snprintf(*out, size, "%.*s", (int)n, path);
    else
        snprintf(*out, size, "%.*s.shard-%d-of-%d", (int)n, path, s->index, s->count);
    return VTR_OK;
}

bool vtr_shard_of_path(const char *path, vtr_shard *out, size_t *stem)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    /* the last ".shard-" of the name, then "I-of-N" to the end */
    const char *p = NULL;
    for (const char *q = path; (q = strstr(q, ".shard-")) && q < path + n; q++)
        p = q;
    if (!p)
        return false;
    char tail[64];
    size_t len = (size_t)(path + n - (p + 7));
    if (len >= sizeof tail)
        return false;
    memcpy(tail, p + 7, len);
    tail[len] = '\0';
    char *of = strstr(tail, "-of-");
    if (!of)
        return false;
    *of = '\0';
    long long i, c;
    if (vtr_parse_int(tail, 0, VTR_SHARD_MAX - 1, &i) != 0 ||
        vtr_parse_int(of + 4, 1, VTR_SHARD_MAX, &c) != 0 || i >= c)
        return false;
    *out = (vtr_shard){.index = (int)i, .count = (int)c};
    if (stem)
        *stem = (size_t)(p - path);
    return true;
}

vtr_status vtr_shard_start(const char *option, const char *path, vtr_dist *d, vtr_shard *s,
                           char **out, vtr_error *err)
{
    *out = NULL;
    *s = (vtr_shard){.index = 0, .count = 1};
    vtr_status st = vtr_dist_init(d, NULL, NULL, err);
    if (st == VTR_OK)
        st = vtr_shard_choose(option, d, s, err);
    if (st == VTR_OK)
        st = vtr_shard_output(s, path, out, err);
    return st;
}

const char *vtr_shard_program_name(const vtr_shard *s, const char *program, char *buf,
                                   size_t size)
{
    if (s->count == 1)
        snprintf(buf, size, "%s", program);
    else
        snprintf(buf, size, "%s (%s %d of %d)", program, s->ranks ? "rank" : "shard", s->index,
                 s->count);
    return buf;
}
