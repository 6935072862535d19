/* Line-by-line reading (lines.h). */
#define _POSIX_C_SOURCE 200809L /* getline */
#include "lines.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void vtr_line_reader_init(vtr_line_reader *r, FILE *fp, const char *name)
{
    *r = (vtr_line_reader){.fp = fp, .name = name};
}

vtr_status vtr_line_next(vtr_line_reader *r, char **text, size_t *len, vtr_error *err)
{
    *text = NULL;
    if (len)
        *len = 0;
    errno = 0;
    ssize_t got = getline(&r->buf, &r->cap, r->fp);
    if (got < 0) {
        if (ferror(r->fp))
            return vtr_fail_errno(err, "%s", r->name);
        if (errno == ENOMEM)
            return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", r->name);
        return VTR_OK; /* the end */
    }
    r->line++;
    size_t n = (size_t)got;
    if (n > 0 && r->buf[n - 1] == '\n')
        n--;
    while (n > 0 && r->buf[n - 1] == '\r')
        n--;
    r->buf[n] = '\0';
    if (memchr(r->buf, '\0', n))
        return vtr_fail(err, VTR_ERR_FORMAT, "%s:%lld: a NUL byte in the line", r->name,
                        (long long)r->line);
    *text = r->buf;
    if (len)
        *len = n;
    return VTR_OK;
}

void vtr_line_reader_free(vtr_line_reader *r)
{
    free(r->buf);
    *r = (vtr_line_reader){0};
}

bool vtr_line_is_blank(const char *s)
{
    return s[strspn(s, " \t")] == '\0';
}

vtr_status vtr_line_list_add(vtr_line_list *l, const char *text, vtr_error *err)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        char **v = realloc(l->v, cap * sizeof *v);
        if (!v)
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        l->v = v;
        l->cap = cap;
    }
    if (!(l->v[l->n] = strdup(text)))
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    l->n++;
    return VTR_OK;
}

vtr_status vtr_line_list_read(vtr_line_list *l, const char *path, bool skip_blank,
                              vtr_error *err)
{
    FILE *in = strcmp(path, "-") ? fopen(path, "r") : stdin;
    if (!in)
        return vtr_fail_errno(err, "%s", path);
    vtr_line_reader r;
    vtr_line_reader_init(&r, in, path);
    char *line;
    vtr_status st;
    while ((st = vtr_line_next(&r, &line, NULL, err)) == VTR_OK && line)
        if (!(skip_blank && vtr_line_is_blank(line)) &&
            (st = vtr_line_list_add(l, line, err)) != VTR_OK)
            break;
    vtr_line_reader_free(&r);
    if (in != stdin)
        fclose(in);
    return st;
}

void vtr_line_list_free(vtr_line_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    *l = (vtr_line_list){0};
}
