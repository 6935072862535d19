/* Configs: a schema tree, a libyaml event walk that merges YAML into it, and a dumper.
 *
 * Loading reads libyaml events one at a time and stops at the first problem, so a bad
 * file is never parsed further than its first error. The walk follows the schema tree:
 * a mapping key must name a child of the current group, which bounds the recursion by the
 * schema's depth. Values parsed from one input go to a pending array first and replace
 * the config's values only when the whole input is good.
 */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define NO_INDEX SIZE_MAX
#define MAX_FILE_BYTES ((size_t)16 << 20)
#define SHOW_VALUE 60  /* bytes of a value quoted in a message */
#define SHOW_KEY 120   /* bytes of a key quoted in a message */
#define SHOW_BUF 512   /* >= 4 * SHOW_KEY + 4: every byte may become "\xNN" */

typedef union scalar {
    bool b;
    int64_t i;
    double f;
    char *s;
} scalar;

typedef struct config_value {
    bool is_set;       /* false only for a required key not given yet */
    scalar one;        /* BOOL, INT, FLOAT, STRING */
    size_t count;      /* *_LIST: items in the array below */
    int64_t *ints;
    double *floats;
    char **strings;
    char *source;      /* "default", "FILE:LINE" or "--set" */
} config_value;

typedef struct config_node {
    char *name;        /* one key segment; "" for the root */
    size_t field;      /* schema index of a value; NO_INDEX for a group */
    size_t *children;  /* indices into vtr_config.nodes, in order of first appearance */
    size_t n_children;
} config_node;

struct vtr_config {
    const vtr_config_field *schema;
    size_t count;
    config_value *values; /* one per schema field */
    config_node *nodes;   /* nodes[0] is the root group */
    size_t n_nodes;
};

/* ---- types ---- */

static bool is_list(vtr_config_type type)
{
    return type == VTR_CONFIG_INT_LIST || type == VTR_CONFIG_FLOAT_LIST ||
           type == VTR_CONFIG_STRING_LIST;
}

static vtr_config_type element_type(vtr_config_type type)
{
    switch (type) {
    case VTR_CONFIG_INT_LIST: return VTR_CONFIG_INT;
    case VTR_CONFIG_FLOAT_LIST: return VTR_CONFIG_FLOAT;
    case VTR_CONFIG_STRING_LIST: return VTR_CONFIG_STRING;
    default: return type;
    }
}

/* For "config key 'x' is a float, not a string". */
static const char *type_name(vtr_config_type type)
{
    switch (type) {
    case VTR_CONFIG_BOOL: return "a bool";
    case VTR_CONFIG_INT: return "an int";
    case VTR_CONFIG_FLOAT: return "a float";
    case VTR_CONFIG_STRING: return "a string";
    case VTR_CONFIG_INT_LIST: return "an int list";
    case VTR_CONFIG_FLOAT_LIST: return "a float list";
    case VTR_CONFIG_STRING_LIST: return "a string list";
    }
    return "an unknown type";
}

/* For "expected a number, got 'abc'". */
static const char *expected_text(vtr_config_type type)
{
    switch (type) {
    case VTR_CONFIG_BOOL: return "a boolean (true/false/yes/no)";
    case VTR_CONFIG_INT: return "an integer";
    case VTR_CONFIG_FLOAT: return "a number";
    case VTR_CONFIG_STRING: return "a string";
    case VTR_CONFIG_INT_LIST: return "a list of integers";
    case VTR_CONFIG_FLOAT_LIST: return "a list of numbers";
    case VTR_CONFIG_STRING_LIST: return "a list of strings";
    }
    return "a value";
}

static void value_clear(config_value *v, vtr_config_type type)
{
    if (type == VTR_CONFIG_STRING)
        free(v->one.s);
    free(v->ints);
    free(v->floats);
    for (size_t k = 0; v->strings && k < v->count; k++)
        free(v->strings[k]);
    free(v->strings);
    free(v->source);
    memset(v, 0, sizeof *v);
}

/* Writes len bytes of s into buf (SHOW_BUF bytes) for a one-line message: control bytes
 * escaped, cut after `limit` bytes on a UTF-8 boundary with "..." appended. */
static const char *show(const char *s, size_t len, size_t limit, char *buf)
{
    size_t n = len < limit ? len : limit;
    bool cut = len > limit;
    if (cut)
        while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
            n--;
    size_t o = 0;
    for (size_t k = 0; k < n; k++) {
        unsigned char c = (unsigned char)s[k];
        if (c == '\n')
            o += (size_t)snprintf(buf + o, SHOW_BUF - o, "\\n");
        else if (c == '\t')
            o += (size_t)snprintf(buf + o, SHOW_BUF - o, "\\t");
        else if (c < 0x20 || c == 0x7F)
            o += (size_t)snprintf(buf + o, SHOW_BUF - o, "\\x%02x", c);
        else
            buf[o++] = (char)c;
    }
    if (cut)
        o += (size_t)snprintf(buf + o, SHOW_BUF - o, "...");
    buf[o] = '\0';
    return buf;
}

static const char *show_str(const char *s, size_t limit, char *buf)
{
    return show(s, strlen(s), limit, buf);
}

/* ---- the schema tree ---- */

static bool valid_segment(const char *s, size_t len)
{
    if (len == 0 || !((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') ||
                      s[0] == '_'))
        return false;
    for (size_t k = 1; k < len; k++) {
        char c = s[k];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-'))
            return false;
    }
    return true;
}

static size_t find_child(const vtr_config *cfg, size_t node, const char *name, size_t len)
{
    const config_node *n = &cfg->nodes[node];
    for (size_t k = 0; k < n->n_children; k++) {
        const char *child = cfg->nodes[n->children[k]].name;
        if (strlen(child) == len && memcmp(child, name, len) == 0)
            return n->children[k];
    }
    return NO_INDEX;
}

/* Levenshtein distance of a[0..na) and b (at most 63 bytes of each compared). */
static size_t edit_distance(const char *a, size_t na, const char *b)
{
    size_t nb = strlen(b), row[64];
    na = na < 63 ? na : 63;
    nb = nb < 63 ? nb : 63;
    for (size_t j = 0; j <= nb; j++)
        row[j] = j;
    for (size_t i = 1; i <= na; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            best = up + 1 < best ? up + 1 : best;
            best = row[j - 1] + 1 < best ? row[j - 1] + 1 : best;
            row[j] = best;
            diag = up;
        }
    }
    return row[nb];
}

/* For an unknown key[0..len): " (did you mean 'K'?)" naming the schema's closest key when it
 * is a typo away (at most 2 edits, and fewer than half the key), else "". */
static const char *near_key(const vtr_config *cfg, const char *key, size_t len, char *buf,
                            size_t size)
{
    size_t best = (size_t)-1, at = 0;
    for (size_t i = 0; i < cfg->count; i++) {
        size_t d = edit_distance(key, len, cfg->schema[i].key);
        if (d < best)
            best = d, at = i;
    }
    buf[0] = 0;
    if (cfg->count && best <= 2 && 2 * best < len)
        snprintf(buf, size, " (did you mean '%s'?)", cfg->schema[at].key);
    return buf;
}

/* The node at dotted path key[0..len) below `node`, or NO_INDEX. */
static size_t find_path(const vtr_config *cfg, size_t node, const char *key, size_t len)
{
    size_t start = 0;
    for (;;) {
        const char *dot = memchr(key + start, '.', len - start);
        size_t seg_len = dot ? (size_t)(dot - (key + start)) : len - start;
        if (cfg->nodes[node].field != NO_INDEX)
            return NO_INDEX; /* a value has no keys below it */
        node = find_child(cfg, node, key + start, seg_len);
        if (node == NO_INDEX || !dot)
            return node;
        start += seg_len + 1;
    }
}

static size_t add_node(vtr_config *cfg, size_t parent, const char *name, size_t len,
                       size_t field)
{
    config_node *nodes = realloc(cfg->nodes, (cfg->n_nodes + 1) * sizeof *nodes);
    if (!nodes)
        return NO_INDEX;
    cfg->nodes = nodes;
    size_t *children = realloc(nodes[parent].children,
                               (nodes[parent].n_children + 1) * sizeof *children);
    if (!children)
        return NO_INDEX;
    nodes[parent].children = children;
    char *copy = strndup(name, len);
    if (!copy)
        return NO_INDEX;
    size_t id = cfg->n_nodes++;
    nodes[id] = (config_node){.name = copy, .field = field};
    children[nodes[parent].n_children++] = id;
    return id;
}

static vtr_status add_to_tree(vtr_config *cfg, size_t field, vtr_error *err)
{
    const char *key = cfg->schema[field].key;
    char shown[SHOW_BUF], other[SHOW_BUF];
    if (!key)
        return vtr_fail(err, VTR_ERR_INVALID, "schema: field %zu has no key", field);
    size_t node = 0;
    const char *seg = key;
    for (;;) {
        const char *dot = strchr(seg, '.');
        size_t len = dot ? (size_t)(dot - seg) : strlen(seg);
        if (!valid_segment(seg, len))
            return vtr_fail(err, VTR_ERR_INVALID, "schema: malformed key '%s'",
                            show_str(key, SHOW_KEY, shown));
        if (cfg->nodes[node].field != NO_INDEX)
            return vtr_fail(err, VTR_ERR_INVALID,
                            "schema: key '%s' is below key '%s', which holds a value",
                            show_str(key, SHOW_KEY, shown),
                            show_str(cfg->schema[cfg->nodes[node].field].key, SHOW_KEY,
                                     other));
        size_t child = find_child(cfg, node, seg, len);
        if (child == NO_INDEX) {
            child = add_node(cfg, node, seg, len, dot ? NO_INDEX : field);
            if (child == NO_INDEX)
                return vtr_fail(err, VTR_ERR_NOMEM, "schema: out of memory");
        } else if (!dot) {
            if (cfg->nodes[child].field != NO_INDEX)
                return vtr_fail(err, VTR_ERR_INVALID, "schema: duplicate key '%s'",
                                show_str(key, SHOW_KEY, shown));
            return vtr_fail(err, VTR_ERR_INVALID,
                            "schema: key '%s' is also a group of keys",
                            show_str(key, SHOW_KEY, shown));
        }
        if (!dot)
            return VTR_OK;
        node = child;
        seg = dot + 1;
    }
}

static size_t find_field(const vtr_config *cfg, const char *key)
{
    if (!cfg || !key)
        return NO_INDEX;
    for (size_t i = 0; i < cfg->count; i++)
        if (strcmp(cfg->schema[i].key, key) == 0)
            return i;
    return NO_INDEX;
}

/* ---- parsing ---- */

typedef struct parse_ctx {
    vtr_config *cfg;
    const char *name;       /* file name, "--set" or "schema", first in messages */
    bool lines;             /* messages and sources carry ":LINE" */
    const char *buf;        /* the input, to find the line of an encoding error */
    size_t len;
    size_t last_line;       /* the input's last line: libyaml puts the end of the stream
                               one line after it */
    yaml_parser_t parser;
    bool parser_ready;
    config_value *pending;  /* one per field; is_set when this input gave it */
    size_t *first_line;     /* per field: line of the key that gave it */
    vtr_error *err;
} parse_ctx;

static size_t clamp_line(const parse_ctx *ctx, size_t line)
{
    return line < ctx->last_line ? line : ctx->last_line;
}

static vtr_status ctx_fail(parse_ctx *ctx, vtr_status status, size_t line, const char *fmt,
                           ...) __attribute__((format(printf, 4, 5)));

static vtr_status ctx_fail(parse_ctx *ctx, vtr_status status, size_t line, const char *fmt,
                           ...)
{
    char msg[VTR_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ctx->lines)
        return vtr_fail(ctx->err, status, "%s:%zu: %s", ctx->name, clamp_line(ctx, line), msg);
    return vtr_fail(ctx->err, status, "%s: %s", ctx->name, msg);
}

static size_t event_line(const yaml_event_t *ev)
{
    return ev->start_mark.line + 1;
}

static vtr_status parser_error(parse_ctx *ctx)
{
    const yaml_parser_t *p = &ctx->parser;
    if (p->error == YAML_MEMORY_ERROR)
        return vtr_fail(ctx->err, VTR_ERR_NOMEM, "%s: out of memory", ctx->name);
    const char *problem = p->problem ? p->problem : "malformed YAML";
    if (p->error == YAML_READER_ERROR) {
        /* libyaml gives a byte offset, not a mark, for encoding errors */
        size_t line = 1, end = p->problem_offset < ctx->len ? p->problem_offset : ctx->len;
        for (size_t k = 0; k < end; k++)
            line += ctx->buf[k] == '\n';
        if (p->problem_value != -1)
            return ctx_fail(ctx, VTR_ERR_FORMAT, line, "%s (0x%x at byte %zu)", problem,
                            (unsigned)p->problem_value, p->problem_offset);
        return ctx_fail(ctx, VTR_ERR_FORMAT, line, "%s at byte %zu", problem,
                        p->problem_offset);
    }
    size_t line = p->problem_mark.line + 1;
    if (p->context && ctx->lines)
        return ctx_fail(ctx, VTR_ERR_FORMAT, line, "%s (%s at line %zu)", problem, p->context,
                        clamp_line(ctx, p->context_mark.line + 1));
    if (p->context)
        return ctx_fail(ctx, VTR_ERR_FORMAT, line, "%s (%s)", problem, p->context);
    return ctx_fail(ctx, VTR_ERR_FORMAT, line, "%s", problem);
}

/* The next event; on failure ev is empty (safe to delete) and err says why. */
static vtr_status next_event(parse_ctx *ctx, yaml_event_t *ev)
{
    if (!yaml_parser_parse(&ctx->parser, ev)) {
        memset(ev, 0, sizeof *ev);
        return parser_error(ctx);
    }
    return VTR_OK;
}

/* Refuses aliases, anchors and explicit tags on a node event. */
static vtr_status check_node(parse_ctx *ctx, const yaml_event_t *ev)
{
    const yaml_char_t *anchor = NULL, *tag = NULL;
    switch (ev->type) {
    case YAML_ALIAS_EVENT:
        return ctx_fail(ctx, VTR_ERR_INVALID, event_line(ev),
                        "anchors and aliases are not supported");
    case YAML_SCALAR_EVENT:
        anchor = ev->data.scalar.anchor;
        tag = ev->data.scalar.tag;
        break;
    case YAML_SEQUENCE_START_EVENT:
        anchor = ev->data.sequence_start.anchor;
        tag = ev->data.sequence_start.tag;
        break;
    case YAML_MAPPING_START_EVENT:
        anchor = ev->data.mapping_start.anchor;
        tag = ev->data.mapping_start.tag;
        break;
    default:
        return VTR_OK;
    }
    char shown[SHOW_BUF];
    if (anchor)
        return ctx_fail(ctx, VTR_ERR_INVALID, event_line(ev),
                        "anchors and aliases are not supported");
    if (tag)
        return ctx_fail(ctx, VTR_ERR_INVALID, event_line(ev), "tags are not supported ('%s')",
                        show_str((const char *)tag, SHOW_VALUE, shown));
    return VTR_OK;
}

static bool is_plain(const yaml_event_t *ev)
{
    return ev->type == YAML_SCALAR_EVENT && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

/* A plain scalar that YAML reads as null. */
static bool is_null(const yaml_event_t *ev)
{
    if (!is_plain(ev))
        return false;
    const char *s = (const char *)ev->data.scalar.value;
    return ev->data.scalar.length == 0 || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
           strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0;
}

/* What a node event holds, for "got ...". buf: SHOW_BUF + 32 bytes. */
static const char *describe(const yaml_event_t *ev, char *buf)
{
    char shown[SHOW_BUF];
    switch (ev->type) {
    case YAML_SEQUENCE_START_EVENT: return "a list";
    case YAML_MAPPING_START_EVENT: return "a mapping";
    case YAML_SCALAR_EVENT:
        if (is_plain(ev) && ev->data.scalar.length == 0)
            return "an empty value";
        show((const char *)ev->data.scalar.value, ev->data.scalar.length, SHOW_VALUE, shown);
        snprintf(buf, SHOW_BUF + 32, is_plain(ev) ? "'%s'" : "the quoted string '%s'", shown);
        return buf;
    default: return "no value";
    }
}

/* "key 'K'[ item N]: expected T, got G[detail]" at the event's line. */
static vtr_status value_fail(parse_ctx *ctx, const char *key, size_t item,
                             vtr_config_type type, const yaml_event_t *ev, const char *detail)
{
    char shown[SHOW_BUF], got[SHOW_BUF + 32], item_text[32] = "";
    if (item)
        snprintf(item_text, sizeof item_text, " item %zu", item);
    return ctx_fail(ctx, VTR_ERR_INVALID, event_line(ev), "key '%s'%s: expected %s, got %s%s",
                    show_str(key, SHOW_KEY, shown), item_text, expected_text(type),
                    describe(ev, got), detail);
}

static bool parse_bool(const char *s, bool *out)
{
    if (strcmp(s, "true") == 0 || strcmp(s, "yes") == 0)
        *out = true;
    else if (strcmp(s, "false") == 0 || strcmp(s, "no") == 0)
        *out = false;
    else
        return false;
    return true;
}

/* 0: ok; 1: not an integer; 2: out of range */
static int parse_int(const char *s, int64_t *out)
{
    const char *digits = s + (s[0] == '+' || s[0] == '-');
    if (!*digits)
        return 1;
    for (const char *p = digits; *p; p++)
        if (*p < '0' || *p > '9')
            return 1;
    errno = 0;
    intmax_t v = strtoimax(s, NULL, 10);
    if (errno == ERANGE || v < INT64_MIN || v > INT64_MAX)
        return 2;
    *out = (int64_t)v;
    return 0;
}

/* 0: ok; 1: not a number; 2: not finite (overflow). Underflow to 0 or a subnormal is
 * accepted: the value is what strtod gives. */
static int parse_float(const char *s, double *out)
{
    if (!*s || strspn(s, "0123456789+-.eE") != strlen(s))
        return 1;
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end)
        return 1;
    if (!isfinite(v))
        return 2;
    *out = v;
    return 0;
}

/* Converts the scalar event ev to `type` (not a list type). */
static vtr_status convert_scalar(parse_ctx *ctx, const char *key, size_t item,
                                 vtr_config_type type, const yaml_event_t *ev, scalar *out)
{
    const char *s = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    bool has_nul = strlen(s) != len;
    if (type == VTR_CONFIG_STRING) {
        if (is_null(ev))
            return value_fail(ctx, key, item, type, ev,
                              len ? " (null in YAML; quote it to mean the text)" : "");
        if (has_nul)
            return value_fail(ctx, key, item, type, ev, " (contains a NUL character)");
        out->s = strndup(s, len);
        if (!out->s)
            return vtr_fail(ctx->err, VTR_ERR_NOMEM, "%s: out of memory", ctx->name);
        return VTR_OK;
    }
    if (!is_plain(ev) || has_nul)
        return value_fail(ctx, key, item, type, ev, "");
    int rc = 1;
    switch (type) {
    case VTR_CONFIG_BOOL: rc = parse_bool(s, &out->b) ? 0 : 1; break;
    case VTR_CONFIG_INT: rc = parse_int(s, &out->i); break;
    case VTR_CONFIG_FLOAT: rc = parse_float(s, &out->f); break;
    default: break;
    }
    if (rc == 2)
        return value_fail(ctx, key, item, type, ev,
                          type == VTR_CONFIG_INT ? " (out of int64 range)" : " (out of range)");
    if (rc)
        return value_fail(ctx, key, item, type, ev, "");
    return VTR_OK;
}

/* Appends one converted item to a list value. */
static vtr_status append_item(parse_ctx *ctx, vtr_config_type type, config_value *v,
                              size_t *cap, scalar item)
{
    if (v->count == *cap) {
        size_t n = *cap ? 2 * *cap : 4;
        void *p = NULL;
        if (type == VTR_CONFIG_INT_LIST && (p = realloc(v->ints, n * sizeof *v->ints)))
            v->ints = p;
        else if (type == VTR_CONFIG_FLOAT_LIST &&
                 (p = realloc(v->floats, n * sizeof *v->floats)))
            v->floats = p;
        else if (type == VTR_CONFIG_STRING_LIST &&
                 (p = realloc(v->strings, n * sizeof *v->strings)))
            v->strings = p;
        if (!p) {
            if (type == VTR_CONFIG_STRING_LIST)
                free(item.s);
            return vtr_fail(ctx->err, VTR_ERR_NOMEM, "%s: out of memory", ctx->name);
        }
        *cap = n;
    }
    if (type == VTR_CONFIG_INT_LIST)
        v->ints[v->count] = item.i;
    else if (type == VTR_CONFIG_FLOAT_LIST)
        v->floats[v->count] = item.f;
    else
        v->strings[v->count] = item.s;
    v->count++;
    return VTR_OK;
}

/* Reads the next node as the value of `field` into out (left partly filled on error). */
static vtr_status parse_value(parse_ctx *ctx, size_t field, config_value *out)
{
    const vtr_config_field *f = &ctx->cfg->schema[field];
    yaml_event_t ev;
    vtr_status st = next_event(ctx, &ev);
    if (st != VTR_OK)
        return st;
    st = check_node(ctx, &ev);
    if (st != VTR_OK)
        goto end;
    if (!is_list(f->type)) {
        if (ev.type != YAML_SCALAR_EVENT)
            st = value_fail(ctx, f->key, 0, f->type, &ev, "");
        else
            st = convert_scalar(ctx, f->key, 0, f->type, &ev, &out->one);
        goto end;
    }
    if (ev.type != YAML_SEQUENCE_START_EVENT) {
        st = value_fail(ctx, f->key, 0, f->type, &ev, "");
        goto end;
    }
    size_t cap = 0;
    for (size_t item = 1;; item++) {
        yaml_event_delete(&ev);
        st = next_event(ctx, &ev);
        if (st != VTR_OK)
            goto end;
        if (ev.type == YAML_SEQUENCE_END_EVENT)
            break;
        st = check_node(ctx, &ev);
        if (st != VTR_OK)
            goto end;
        vtr_config_type elem = element_type(f->type);
        if (ev.type != YAML_SCALAR_EVENT) {
            st = value_fail(ctx, f->key, item, elem, &ev, "");
            goto end;
        }
        scalar one = {0};
        st = convert_scalar(ctx, f->key, item, elem, &ev, &one);
        if (st == VTR_OK)
            st = append_item(ctx, f->type, out, &cap, one);
        if (st != VTR_OK)
            goto end;
    }
end:
    yaml_event_delete(&ev);
    return st;
}

/* "prefix.key" (or "key" at the root) as a new string; NULL when out of memory. */
static char *join_key(const char *prefix, const char *key, size_t len)
{
    size_t plen = strlen(prefix);
    char *full = malloc(plen + 1 + len + 1);
    if (!full)
        return NULL;
    size_t o = 0;
    if (plen) {
        memcpy(full, prefix, plen);
        full[plen] = '.';
        o = plen + 1;
    }
    memcpy(full + o, key, len);
    full[o + len] = '\0';
    return full;
}

static vtr_status parse_mapping(parse_ctx *ctx, size_t node, const char *path);

/* The value of a group key: a mapping, or an empty value meaning an empty mapping. */
static vtr_status parse_group(parse_ctx *ctx, size_t node, const char *path)
{
    yaml_event_t ev;
    vtr_status st = next_event(ctx, &ev);
    if (st != VTR_OK)
        return st;
    st = check_node(ctx, &ev);
    if (st != VTR_OK || is_null(&ev))
        goto end;
    if (ev.type == YAML_MAPPING_START_EVENT) {
        st = parse_mapping(ctx, node, path);
    } else {
        char shown[SHOW_BUF], got[SHOW_BUF + 32];
        st = ctx_fail(ctx, VTR_ERR_INVALID, event_line(&ev),
                      "key '%s': expected a mapping of keys, got %s",
                      show_str(path, SHOW_KEY, shown), describe(&ev, got));
    }
end:
    yaml_event_delete(&ev);
    return st;
}

/* Reads the keys of a mapping whose start event was just read, up to its end event.
 * node is the group the mapping fills; path its dotted key ("" for the root). */
static vtr_status parse_mapping(parse_ctx *ctx, size_t node, const char *path)
{
    vtr_status st = VTR_OK;
    yaml_event_t ev;
    memset(&ev, 0, sizeof ev);
    char *full = NULL;
    /* keys seen in this mapping, for duplicates; at most the group's descendants, since an
     * unknown key stops the walk */
    struct seen {
        char *key;
        size_t len, line;
    } *seen = NULL;
    size_t n_seen = 0;
    char shown[SHOW_BUF], got[SHOW_BUF + 32];
    for (;;) {
        yaml_event_delete(&ev);
        free(full);
        full = NULL;
        st = next_event(ctx, &ev);
        if (st != VTR_OK || ev.type == YAML_MAPPING_END_EVENT)
            goto end;
        st = check_node(ctx, &ev);
        if (st != VTR_OK)
            goto end;
        size_t line = event_line(&ev);
        if (ev.type != YAML_SCALAR_EVENT) {
            st = ctx_fail(ctx, VTR_ERR_INVALID, line, "a key must be a scalar, got %s",
                          describe(&ev, got));
            goto end;
        }
        const char *key = (const char *)ev.data.scalar.value;
        size_t len = ev.data.scalar.length;
        full = join_key(path, key, len);
        if (!full) {
            st = vtr_fail(ctx->err, VTR_ERR_NOMEM, "%s: out of memory", ctx->name);
            goto end;
        }
        for (size_t k = 0; k < n_seen; k++) {
            if (seen[k].len == len && memcmp(seen[k].key, key, len) == 0) {
                st = ctx_fail(ctx, VTR_ERR_INVALID, line, "duplicate key '%s' (first at line %zu)",
                              show(full, strlen(full), SHOW_KEY, shown), seen[k].line);
                goto end;
            }
        }
        size_t target = find_path(ctx->cfg, node, key, len);
        if (target == NO_INDEX) {
            char hint[128];
            st = ctx_fail(ctx, VTR_ERR_INVALID, line, "unknown key '%s'%s",
                          show(full, strlen(full), SHOW_KEY, shown),
                          near_key(ctx->cfg, full, strlen(full), hint, sizeof hint));
            goto end;
        }
        struct seen *grown = realloc(seen, (n_seen + 1) * sizeof *seen);
        char *copy = malloc(len + 1);
        if (grown)
            seen = grown;
        if (!grown || !copy) {
            free(copy);
            st = vtr_fail(ctx->err, VTR_ERR_NOMEM, "%s: out of memory", ctx->name);
            goto end;
        }
        memcpy(copy, key, len + 1);
        seen[n_seen++] = (struct seen){copy, len, line};
        yaml_event_delete(&ev);

        size_t field = ctx->cfg->nodes[target].field;
        if (field == NO_INDEX) {
            st = parse_group(ctx, target, full);
            if (st != VTR_OK)
                goto end;
            continue;
        }
        config_value *v = &ctx->pending[field];
        const char *canonical = ctx->cfg->schema[field].key;
        if (v->is_set) { /* "a.b: 1" and "a: {b: 2}" in one file */
            st = ctx_fail(ctx, VTR_ERR_INVALID, line, "duplicate key '%s' (first at line %zu)",
                          show_str(canonical, SHOW_KEY, shown), ctx->first_line[field]);
            goto end;
        }
        st = parse_value(ctx, field, v);
        if (st != VTR_OK)
            goto end;
        size_t n = strlen(ctx->name) + 32;
        v->source = malloc(n);
        if (!v->source) {
            st = vtr_fail(ctx->err, VTR_ERR_NOMEM, "%s: out of memory", ctx->name);
            goto end;
        }
        snprintf(v->source, n, "%s:%zu", ctx->name, line);
        v->is_set = true;
        ctx->first_line[field] = line;
    }
end:
    yaml_event_delete(&ev);
    free(full);
    for (size_t k = 0; k < n_seen; k++)
        free(seen[k].key);
    free(seen);
    return st;
}

/* Reads a whole stream: a mapping of keys when field is NO_INDEX (a file), else the value
 * of that one field (a --set value or a default). */
static vtr_status parse_stream(parse_ctx *ctx, size_t field)
{
    char got[SHOW_BUF + 32];
    yaml_event_t ev;
    vtr_status st = next_event(ctx, &ev); /* stream start */
    if (st != VTR_OK)
        return st;
    yaml_event_delete(&ev);
    st = next_event(ctx, &ev);
    if (st != VTR_OK)
        goto end;
    if (ev.type == YAML_STREAM_END_EVENT) { /* nothing but comments and blanks */
        if (field != NO_INDEX)
            st = ctx_fail(ctx, VTR_ERR_INVALID, 1, "key '%s': expected %s, got an empty value",
                          ctx->cfg->schema[field].key,
                          expected_text(ctx->cfg->schema[field].type));
        goto end;
    }
    yaml_event_delete(&ev); /* document start */
    if (field != NO_INDEX) {
        st = parse_value(ctx, field, &ctx->pending[field]);
        if (st != VTR_OK)
            goto end;
    } else {
        st = next_event(ctx, &ev);
        if (st != VTR_OK)
            goto end;
        st = check_node(ctx, &ev);
        if (st != VTR_OK)
            goto end;
        if (ev.type == YAML_MAPPING_START_EVENT)
            st = parse_mapping(ctx, 0, "");
        else if (!is_null(&ev))
            st = ctx_fail(ctx, VTR_ERR_INVALID, event_line(&ev),
                          "expected a mapping of keys at the top level, got %s",
                          describe(&ev, got));
        if (st != VTR_OK)
            goto end;
        yaml_event_delete(&ev);
    }
    st = next_event(ctx, &ev); /* document end */
    if (st != VTR_OK)
        goto end;
    yaml_event_delete(&ev);
    st = next_event(ctx, &ev);
    if (st != VTR_OK)
        goto end;
    if (ev.type != YAML_STREAM_END_EVENT)
        st = ctx_fail(ctx, VTR_ERR_INVALID, event_line(&ev), "more than one YAML document");
end:
    yaml_event_delete(&ev);
    return st;
}

static vtr_status ctx_begin(parse_ctx *ctx, vtr_config *cfg, const char *name, bool lines,
                            const char *buf, size_t len, vtr_error *err)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->cfg = cfg;
    ctx->name = name;
    ctx->lines = lines;
    ctx->buf = buf ? buf : "";
    ctx->len = buf ? len : 0;
    ctx->last_line = 1;
    for (size_t k = 0; k < ctx->len; k++)
        ctx->last_line += ctx->buf[k] == '\n' && k + 1 < ctx->len;
    ctx->err = err;
    size_t n = cfg->count ? cfg->count : 1;
    ctx->pending = calloc(n, sizeof *ctx->pending);
    ctx->first_line = calloc(n, sizeof *ctx->first_line);
    if (!ctx->pending || !ctx->first_line || !yaml_parser_initialize(&ctx->parser))
        return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", name);
    ctx->parser_ready = true;
    yaml_parser_set_input_string(&ctx->parser, (const unsigned char *)ctx->buf, ctx->len);
    return VTR_OK;
}

/* Moves every value this input gave into the config. */
static void ctx_commit(parse_ctx *ctx)
{
    for (size_t i = 0; i < ctx->cfg->count; i++) {
        if (!ctx->pending[i].is_set)
            continue;
        value_clear(&ctx->cfg->values[i], ctx->cfg->schema[i].type);
        ctx->cfg->values[i] = ctx->pending[i];
        memset(&ctx->pending[i], 0, sizeof ctx->pending[i]);
    }
}

static void ctx_end(parse_ctx *ctx)
{
    if (ctx->pending)
        for (size_t i = 0; i < ctx->cfg->count; i++)
            value_clear(&ctx->pending[i], ctx->cfg->schema[i].type);
    free(ctx->pending);
    free(ctx->first_line);
    if (ctx->parser_ready)
        yaml_parser_delete(&ctx->parser);
}

/* Parses text as the value of one field and stores it with `source`. */
static vtr_status set_field(vtr_config *cfg, size_t field, const char *name, const char *text,
                            const char *source, vtr_error *err)
{
    parse_ctx ctx;
    vtr_status st = ctx_begin(&ctx, cfg, name, false, text, strlen(text), err);
    if (st != VTR_OK)
        goto end;
    st = parse_stream(&ctx, field);
    if (st != VTR_OK)
        goto end;
    config_value *v = &ctx.pending[field];
    v->source = strdup(source);
    if (!v->source) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", name);
        goto end;
    }
    v->is_set = true;
    ctx_commit(&ctx);
end:
    ctx_end(&ctx);
    return st;
}

/* ---- public: building, loading, setting ---- */

vtr_status vtr_config_new(const vtr_config_field *schema, size_t count, vtr_config **out,
                          vtr_error *err)
{
    *out = NULL;
    vtr_status st = VTR_OK;
    vtr_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg)
        return vtr_fail(err, VTR_ERR_NOMEM, "schema: out of memory");
    cfg->schema = schema;
    cfg->count = count;
    cfg->values = calloc(count ? count : 1, sizeof *cfg->values);
    cfg->nodes = calloc(1, sizeof *cfg->nodes);
    if (!cfg->values || !cfg->nodes) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "schema: out of memory");
        goto end;
    }
    cfg->nodes[0] = (config_node){.name = NULL, .field = NO_INDEX};
    cfg->n_nodes = 1;
    for (size_t i = 0; i < count; i++) {
        char shown[SHOW_BUF];
        if ((unsigned)schema[i].type > VTR_CONFIG_STRING_LIST) {
            st = vtr_fail(err, VTR_ERR_INVALID, "schema: key '%s': unknown type %d",
                          schema[i].key ? show_str(schema[i].key, SHOW_KEY, shown) : "",
                          (int)schema[i].type);
            goto end;
        }
        st = add_to_tree(cfg, i, err);
        if (st != VTR_OK)
            goto end;
    }
    for (size_t i = 0; i < count; i++) {
        if (!schema[i].default_value)
            continue;
        st = set_field(cfg, i, "schema", schema[i].default_value, "default", err);
        if (st != VTR_OK)
            goto end;
    }
    *out = cfg;
    cfg = NULL;
end:
    vtr_config_free(cfg);
    return st;
}

void vtr_config_free(vtr_config *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; cfg->values && i < cfg->count; i++)
        value_clear(&cfg->values[i], cfg->schema[i].type);
    free(cfg->values);
    for (size_t k = 0; k < cfg->n_nodes; k++) {
        free(cfg->nodes[k].name);
        free(cfg->nodes[k].children);
    }
    free(cfg->nodes);
    free(cfg);
}

vtr_status vtr_config_load_string(vtr_config *cfg, const char *name, const char *buf,
                                  size_t len, vtr_error *err)
{
    parse_ctx ctx;
    vtr_status st = ctx_begin(&ctx, cfg, name, true, buf, len, err);
    if (st == VTR_OK)
        st = parse_stream(&ctx, NO_INDEX);
    if (st == VTR_OK)
        ctx_commit(&ctx);
    ctx_end(&ctx);
    return st;
}

vtr_status vtr_config_load_file(vtr_config *cfg, const char *path, vtr_error *err)
{
    vtr_status st = VTR_OK;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return vtr_fail_errno(err, "%s", path);
    /* read at most MAX_FILE_BYTES + 1 bytes: one more than allowed tells a file too large */
    for (;;) {
        if (len == cap) {
            cap = cap ? 2 * cap : 4096;
            if (cap > MAX_FILE_BYTES + 1)
                cap = MAX_FILE_BYTES + 1;
            char *grown = realloc(buf, cap);
            if (!grown) {
                st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", path);
                goto end;
            }
            buf = grown;
        }
        size_t got = fread(buf + len, 1, cap - len, fp);
        len += got;
        if (got == 0 || len > MAX_FILE_BYTES)
            break;
    }
    if (len > MAX_FILE_BYTES) {
        st = vtr_fail(err, VTR_ERR_INVALID, "%s: over %zu MiB, too large for a config", path,
                      MAX_FILE_BYTES >> 20);
        goto end;
    }
    if (ferror(fp)) {
        st = vtr_fail_errno(err, "%s", path);
        goto end;
    }
    st = vtr_config_load_string(cfg, path, buf, len, err);
end:
    fclose(fp);
    free(buf);
    return st;
}

vtr_status vtr_config_set(vtr_config *cfg, const char *assignment, vtr_error *err)
{
    char shown[SHOW_BUF], other[SHOW_BUF];
    const char *eq = strchr(assignment, '=');
    if (!eq)
        return vtr_fail(err, VTR_ERR_INVALID, "--set: expected KEY=VALUE, got '%s'",
                        show_str(assignment, SHOW_KEY, shown));
    size_t len = (size_t)(eq - assignment);
    size_t node = len ? find_path(cfg, 0, assignment, len) : NO_INDEX;
    if (node == NO_INDEX)
        return vtr_fail(err, VTR_ERR_INVALID, "--set: unknown key '%s'%s",
                        show(assignment, len, SHOW_KEY, shown),
                        near_key(cfg, assignment, len, other, sizeof other));
    if (cfg->nodes[node].field == NO_INDEX) {
        size_t leaf = node;
        while (cfg->nodes[leaf].field == NO_INDEX)
            leaf = cfg->nodes[leaf].children[0];
        return vtr_fail(err, VTR_ERR_INVALID,
                        "--set: '%s' is a group of keys; set one of them, e.g. '%s'",
                        show(assignment, len, SHOW_KEY, shown),
                        show_str(cfg->schema[cfg->nodes[leaf].field].key, SHOW_KEY, other));
    }
    return set_field(cfg, cfg->nodes[node].field, "--set", eq + 1, "--set", err);
}

vtr_status vtr_config_check_required(const vtr_config *cfg, vtr_error *err)
{
    char names[VTR_ERROR_MSG_MAX] = "";
    size_t missing = 0, o = 0;
    for (size_t i = 0; i < cfg->count; i++) {
        if (cfg->values[i].is_set)
            continue;
        if (o < sizeof names)
            o += (size_t)snprintf(names + o, sizeof names - o, "%s'%s'", missing ? ", " : "",
                                  cfg->schema[i].key);
        missing++;
    }
    if (missing == 1)
        return vtr_fail(err, VTR_ERR_INVALID, "required key %s is not set", names);
    if (missing)
        return vtr_fail(err, VTR_ERR_INVALID, "required keys not set: %s", names);
    return VTR_OK;
}

/* ---- public: reading ---- */

static const config_value *lookup(const vtr_config *cfg, const char *key,
                                  vtr_config_type type)
{
    size_t i = find_field(cfg, key);
    if (i == NO_INDEX || cfg->schema[i].type != type || !cfg->values[i].is_set)
        return NULL;
    return &cfg->values[i];
}

bool vtr_config_bool(const vtr_config *cfg, const char *key)
{
    const config_value *v = lookup(cfg, key, VTR_CONFIG_BOOL);
    return v ? v->one.b : false;
}

int64_t vtr_config_int(const vtr_config *cfg, const char *key)
{
    const config_value *v = lookup(cfg, key, VTR_CONFIG_INT);
    return v ? v->one.i : 0;
}

double vtr_config_float(const vtr_config *cfg, const char *key)
{
    const config_value *v = lookup(cfg, key, VTR_CONFIG_FLOAT);
    return v ? v->one.f : 0.0;
}

const char *vtr_config_string(const vtr_config *cfg, const char *key)
{
    const config_value *v = lookup(cfg, key, VTR_CONFIG_STRING);
    return v ? v->one.s : NULL;
}

const int64_t *vtr_config_int_list(const vtr_config *cfg, const char *key, size_t *count)
{
    const config_value *v = lookup(cfg, key, VTR_CONFIG_INT_LIST);
    *count = v ? v->count : 0;
    return v && v->count ? v->ints : NULL;
}

const double *vtr_config_float_list(const vtr_config *cfg, const char *key, size_t *count)
{
    const config_value *v = lookup(cfg, key, VTR_CONFIG_FLOAT_LIST);
    *count = v ? v->count : 0;
    return v && v->count ? v->floats : NULL;
}

const char *const *vtr_config_string_list(const vtr_config *cfg, const char *key,
                                          size_t *count)
{
    const config_value *v = lookup(cfg, key, VTR_CONFIG_STRING_LIST);
    *count = v ? v->count : 0;
    return v && v->count ? (const char *const *)v->strings : NULL;
}

vtr_status vtr_config_expect(const vtr_config *cfg, const char *key, vtr_config_type type,
                             vtr_error *err)
{
    char shown[SHOW_BUF];
    size_t i = find_field(cfg, key);
    if (i == NO_INDEX)
        return vtr_fail(err, VTR_ERR_NOT_FOUND, "no key '%s' in the config schema",
                        key ? show_str(key, SHOW_KEY, shown) : "(null)");
    if (cfg->schema[i].type != type)
        return vtr_fail(err, VTR_ERR_INVALID, "config key '%s' is %s, not %s", key,
                        type_name(cfg->schema[i].type), type_name(type));
    if (!cfg->values[i].is_set)
        return vtr_fail(err, VTR_ERR_INVALID, "required key '%s' is not set", key);
    return VTR_OK;
}

const char *vtr_config_source(const vtr_config *cfg, const char *key)
{
    size_t i = find_field(cfg, key);
    return i == NO_INDEX ? NULL : cfg->values[i].source;
}

vtr_status vtr_config_fail(const vtr_config *cfg, const char *key, vtr_error *err,
                           const char *fmt, ...)
{
    char msg[VTR_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *source = vtr_config_source(cfg, key);
    if (!source || strcmp(source, "default") == 0)
        return vtr_fail(err, VTR_ERR_INVALID, "key '%s' (%s): %s", key,
                        source ? source : "not set", msg);
    return vtr_fail(err, VTR_ERR_INVALID, "%s: key '%s': %s", source, key, msg);
}

/* ---- public: dumping ---- */

/* The shortest %g text that strtod reads back to v, with a '.' in the mantissa so that
 * YAML 1.1 readers (PyYAML) see a float: "2.0", "0.0005", "1.0e-05". buf: 40 bytes. */
static void format_float(double v, char *buf, size_t size)
{
    for (int precision = 1; precision <= 17; precision++) {
        snprintf(buf, size, "%.*g", precision, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    if (strchr(buf, '.'))
        return;
    char *e = strchr(buf, 'e');
    size_t at = e ? (size_t)(e - buf) : strlen(buf);
    memmove(buf + at + 2, buf + at, strlen(buf + at) + 1);
    memcpy(buf + at, ".0", 2);
}

/* Decodes one UTF-8 character at s; returns its length (1 for a stray byte). */
static size_t utf8_decode(const unsigned char *s, uint32_t *cp)
{
    size_t n = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3
                                                       : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0) {
        *cp = s[0];
        return 1;
    }
    uint32_t v = n == 1 ? s[0] : (uint32_t)(s[0] & (0x7F >> n));
    for (size_t k = 1; k < n; k++) {
        if ((s[k] & 0xC0) != 0x80) {
            *cp = s[0];
            return 1;
        }
        v = (v << 6) | (s[k] & 0x3F);
    }
    *cp = v;
    return n;
}

/* A double-quoted YAML string. Everything that libyaml would not read back as the same
 * character is escaped: controls, DEL, C1 controls (NEL among them), the line and
 * paragraph separators that YAML folds, BOM and the non-characters U+FFFE and U+FFFF.
 * Values come from libyaml and are valid UTF-8; a stray byte is escaped as its code. */
static void write_string(FILE *fp, const char *s)
{
    fputc('"', fp);
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        uint32_t cp;
        size_t n = utf8_decode(p, &cp);
        if (cp == '"' || cp == '\\')
            fprintf(fp, "\\%c", (int)cp);
        else if (cp == '\n')
            fputs("\\n", fp);
        else if (cp == '\t')
            fputs("\\t", fp);
        else if (cp == '\r')
            fputs("\\r", fp);
        else if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F))
            fprintf(fp, "\\x%02x", (unsigned)cp);
        else if (cp == 0x2028 || cp == 0x2029 || cp == 0xFEFF || cp == 0xFFFE || cp == 0xFFFF)
            fprintf(fp, "\\u%04x", (unsigned)cp);
        else
            fwrite(p, 1, n, fp);
        p += n;
    }
    fputc('"', fp);
}

static void write_value(FILE *fp, vtr_config_type type, const config_value *v)
{
    char buf[40];
    switch (type) {
    case VTR_CONFIG_BOOL: fputs(v->one.b ? "true" : "false", fp); return;
    case VTR_CONFIG_INT: fprintf(fp, "%" PRId64, v->one.i); return;
    case VTR_CONFIG_FLOAT:
        format_float(v->one.f, buf, sizeof buf);
        fputs(buf, fp);
        return;
    case VTR_CONFIG_STRING: write_string(fp, v->one.s); return;
    default: break;
    }
    fputc('[', fp);
    for (size_t k = 0; k < v->count; k++) {
        if (k)
            fputs(", ", fp);
        if (type == VTR_CONFIG_INT_LIST) {
            fprintf(fp, "%" PRId64, v->ints[k]);
        } else if (type == VTR_CONFIG_FLOAT_LIST) {
            format_float(v->floats[k], buf, sizeof buf);
            fputs(buf, fp);
        } else {
            write_string(fp, v->strings[k]);
        }
    }
    fputc(']', fp);
}

static void dump_node(const vtr_config *cfg, size_t node, int indent, FILE *fp)
{
    const config_node *n = &cfg->nodes[node];
    for (size_t k = 0; k < n->n_children; k++) {
        const config_node *child = &cfg->nodes[n->children[k]];
        if (child->field == NO_INDEX) {
            fprintf(fp, "%*s%s:\n", indent, "", child->name);
            dump_node(cfg, n->children[k], indent + 2, fp);
            continue;
        }
        const config_value *v = &cfg->values[child->field];
        if (!v->is_set) {
            fprintf(fp, "%*s# %s: required, not set\n", indent, "", child->name);
            continue;
        }
        fprintf(fp, "%*s%s: ", indent, "", child->name);
        write_value(fp, cfg->schema[child->field].type, v);
        fputc('\n', fp);
    }
}

vtr_status vtr_config_dump(const vtr_config *cfg, FILE *fp, vtr_error *err)
{
    dump_node(cfg, 0, 0, fp);
    if (fflush(fp) != 0 || ferror(fp))
        return vtr_fail_errno(err, "writing the config");
    return VTR_OK;
}

vtr_status vtr_config_dump_string(const vtr_config *cfg, char **out, vtr_error *err)
{
    *out = NULL;
    char *buf = NULL;
    size_t size = 0;
    FILE *fp = open_memstream(&buf, &size);
    if (!fp)
        return vtr_fail(err, VTR_ERR_NOMEM, "config dump: out of memory");
    vtr_status st = vtr_config_dump(cfg, fp, err);
    if (fclose(fp) != 0 && st == VTR_OK)
        st = vtr_fail(err, VTR_ERR_NOMEM, "config dump: out of memory");
    if (st != VTR_OK) {
        free(buf);
        return st;
    }
    *out = buf;
    return VTR_OK;
}
