/* HGR's role graphs: parsing the release's [nodes, edges] and building the reader's
 * tensors. The rules, and where they come from, are in role_graph.h. */
#include "role_graph.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/string_table.h"

/* ---- roles ------------------------------------------------------------------------ */

static const char *const role_names[VTR_ROLE_COUNT] = {
    "V",        "ARG1",     "ARG0",     "ARG2",     "ARG3",     "ARG4",     "ARGM-LOC", "ARGM-MNR",
    "ARGM-TMP", "ARGM-DIR", "ARGM-ADV", "ARGM-PRP", "ARGM-PRD", "ARGM-COM", "ARGM-MOD", "NOUN",
};

int vtr_role_id(const char *role)
{
    if (!role)
        return -1;
    /* role2int holds R, "C-" R and "R-" R for each R of ROLES: one prefix at most */
    if ((role[0] == 'C' || role[0] == 'R') && role[1] == '-')
        role += 2;
    for (int i = 0; i < VTR_ROLE_COUNT; i++)
        if (strcmp(role, role_names[i]) == 0)
            return i;
    return -1;
}

const char *vtr_role_name(int id)
{
    return id >= 0 && id < VTR_ROLE_COUNT ? role_names[id] : NULL;
}

/* ---- parsing ---------------------------------------------------------------------- */

/* Everything a parsed graph owns: one block for the arrays, one table for the strings
 * (node ids, roles, words; the table's keys never move) and one for the node ids alone,
 * whose insertion order is the node order, so that an edge's end is found by its id. */
typedef struct graph_storage {
    vtr_role_graph_node *nodes;
    vtr_role_graph_edge *edges;
    int64_t *spans;
    const char **words;
    vtr_string_table *strings;
    vtr_string_table *ids;
} graph_storage;

#define SHOWN_MAX 80

/* Fails with VTR_ERR_FORMAT, the message prefixed with the caption. */
static vtr_status __attribute__((format(printf, 3, 4)))
format_error(vtr_error *err, const char *caption, const char *fmt, ...);

static vtr_status format_error(vtr_error *err, const char *caption, const char *fmt, ...)
{
    char msg[VTR_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char shown[SHOWN_MAX];
    vtr_printable(caption ? caption : "", caption ? strlen(caption) : 0, shown, sizeof shown);
    return vtr_fail(err, VTR_ERR_FORMAT, "role graph of caption \"%s\": %s", shown, msg);
}

static const char *shown(const char *s, size_t len, char *buf)
{
    return vtr_printable(s, len, buf, SHOWN_MAX);
}

/* A string without NUL inside (jansson may hold one when decoded with JSON_ALLOW_NUL). */
static bool plain_string(const json_t *j)
{
    return json_is_string(j) && strlen(json_string_value(j)) == json_string_length(j);
}

/* Checks one node and counts its spans. */
static vtr_status check_node(const char *id, size_t id_len, const json_t *node, const char *caption,
                             size_t *n_spans, vtr_error *err)
{
    char sid[SHOWN_MAX];
    shown(id, id_len, sid);
    if (strlen(id) != id_len)
        return format_error(err, caption, "node id \"%s\" contains NUL", sid);
    if (!json_is_object(node))
        return format_error(err, caption, "node \"%s\" is not an object", sid);
    const json_t *role = json_object_get(node, "role");
    const json_t *spans = json_object_get(node, "spans");
    const json_t *words = json_object_get(node, "words");
    if (!role || !spans || !words)
        return format_error(err, caption, "node \"%s\" has no \"%s\"", sid,
                            !role    ? "role"
                            : !spans ? "spans"
                                     : "words");
    if (!plain_string(role))
        return format_error(err, caption, "node \"%s\": role is not a string%s", sid,
                            json_is_string(role) ? " without NUL" : "");
    if (!json_is_array(spans))
        return format_error(err, caption, "node \"%s\": spans is not an array", sid);
    if (!json_is_array(words))
        return format_error(err, caption, "node \"%s\": words is not an array", sid);
    size_t n = json_array_size(spans);
    if (n == 0 && strcmp(json_string_value(role), "ROOT") != 0) {
        char srole[SHOWN_MAX];
        return format_error(err, caption, "node \"%s\": spans is empty (role %s)", sid,
                            shown(json_string_value(role), json_string_length(role), srole));
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *s = json_array_get(spans, i);
        if (!json_is_integer(s))
            return format_error(err, caption, "node \"%s\": spans[%zu] is not an integer", sid, i);
        if (json_integer_value(s) < 0)
            return format_error(err, caption, "node \"%s\": spans[%zu] is %lld, not a word index",
                                sid, i, (long long)json_integer_value(s));
    }
    if (json_array_size(words) != n)
        return format_error(err, caption, "node \"%s\" has %zu words for %zu spans", sid,
                            json_array_size(words), n);
    for (size_t i = 0; i < n; i++)
        if (!plain_string(json_array_get(words, i)))
            return format_error(err, caption, "node \"%s\": words[%zu] is not a string without NUL",
                                sid, i);
    *n_spans = n;
    return VTR_OK;
}

/* Checks one edge: three strings, the first two naming nodes. */
static vtr_status check_edge(const json_t *nodes, const json_t *edge, size_t i, const char *caption,
                             vtr_error *err)
{
    if (!json_is_array(edge) || json_array_size(edge) != 3)
        return format_error(err, caption, "edge %zu is not [verb_id, arg_id, role]", i);
    for (size_t k = 0; k < 3; k++)
        if (!plain_string(json_array_get(edge, k)))
            return format_error(err, caption, "edge %zu: element %zu is not a string", i, k);
    for (size_t k = 0; k < 2; k++) {
        const json_t *end = json_array_get(edge, k);
        if (!json_object_get(nodes, json_string_value(end))) {
            char sid[SHOWN_MAX];
            return format_error(err, caption, "edge %zu names node \"%s\", which is not in nodes",
                                i, shown(json_string_value(end), json_string_length(end), sid));
        }
    }
    return VTR_OK;
}

static vtr_status intern(vtr_string_table *table, const char *s, const char **out, vtr_error *err)
{
    int64_t index;
    vtr_status st = vtr_string_table_insert(table, s, strlen(s), &index, NULL, err);
    if (st == VTR_OK)
        *out = vtr_string_table_key(table, index, NULL);
    return st;
}

static void storage_free(graph_storage *s)
{
    if (!s)
        return;
    free(s->nodes);
    free(s->edges);
    free(s->spans);
    free(s->words);
    vtr_string_table_free(s->strings);
    vtr_string_table_free(s->ids);
    free(s);
}

/* Fills the storage from a value that check_node / check_edge accepted. */
static vtr_status fill(const json_t *nodes, const json_t *edges, size_t total_spans,
                       graph_storage *s, vtr_error *err)
{
    size_t n_nodes = json_object_size(nodes), n_edges = json_array_size(edges);
    s->nodes = calloc(n_nodes + 1, sizeof *s->nodes);
    s->edges = calloc(n_edges + 1, sizeof *s->edges);
    s->spans = calloc(total_spans + 1, sizeof *s->spans);
    s->words = calloc(total_spans + 1, sizeof *s->words);
    s->strings = vtr_string_table_new();
    s->ids = vtr_string_table_new();
    if (!s->nodes || !s->edges || !s->spans || !s->words || !s->strings || !s->ids)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for a role graph");

    vtr_status st = VTR_OK;
    size_t k = 0, at = 0;
    for (void *it = json_object_iter((json_t *)nodes); it && st == VTR_OK;
         it = json_object_iter_next((json_t *)nodes, it), k++) {
        const char *id = json_object_iter_key(it);
        const json_t *node = json_object_iter_value(it);
        const json_t *spans = json_object_get(node, "spans");
        const json_t *words = json_object_get(node, "words");
        vtr_role_graph_node *out = &s->nodes[k];
        int64_t index;
        st = vtr_string_table_insert(s->ids, id, strlen(id), &index, NULL, err);
        if (st == VTR_OK)
            out->id = vtr_string_table_key(s->ids, index, NULL);
        if (st == VTR_OK)
            st = intern(s->strings, json_string_value(json_object_get(node, "role")), &out->role,
                        err);
        out->n_spans = out->n_words = json_array_size(spans);
        out->spans = s->spans + at;
        out->words = s->words + at;
        for (size_t i = 0; i < out->n_spans && st == VTR_OK; i++) {
            s->spans[at + i] = json_integer_value(json_array_get(spans, i));
            st = intern(s->strings, json_string_value(json_array_get(words, i)), &s->words[at + i],
                        err);
        }
        at += out->n_spans;
    }
    for (size_t i = 0; i < n_edges && st == VTR_OK; i++) {
        const json_t *edge = json_array_get(edges, i);
        const char *verb = json_string_value(json_array_get(edge, 0));
        const char *arg = json_string_value(json_array_get(edge, 1));
        s->edges[i].verb = (size_t)vtr_string_table_find(s->ids, verb, strlen(verb));
        s->edges[i].arg = (size_t)vtr_string_table_find(s->ids, arg, strlen(arg));
        st = intern(s->strings, json_string_value(json_array_get(edge, 2)), &s->edges[i].role, err);
    }
    return st;
}

vtr_status vtr_role_graph_parse(const json_t *value, const char *caption, vtr_role_graph *out,
                                vtr_error *err)
{
    memset(out, 0, sizeof *out);
    if (!json_is_array(value) || json_array_size(value) != 2)
        return format_error(err, caption, "not a [nodes, edges] array");
    const json_t *nodes = json_array_get(value, 0), *edges = json_array_get(value, 1);
    if (!json_is_object(nodes))
        return format_error(err, caption, "nodes is not an object");
    if (!json_is_array(edges))
        return format_error(err, caption, "edges is not an array");

    vtr_status st;
    size_t total_spans = 0;
    for (void *it = json_object_iter((json_t *)nodes); it;
         it = json_object_iter_next((json_t *)nodes, it)) {
        size_t n_spans = 0;
        st = check_node(json_object_iter_key(it), json_object_iter_key_len(it),
                        json_object_iter_value(it), caption, &n_spans, err);
        if (st != VTR_OK)
            return st;
        total_spans += n_spans;
    }
    for (size_t i = 0; i < json_array_size(edges); i++)
        if ((st = check_edge(nodes, json_array_get(edges, i), i, caption, err)) != VTR_OK)
            return st;

    graph_storage *s = calloc(1, sizeof *s);
    if (!s)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for a role graph");
    st = fill(nodes, edges, total_spans, s, err);
    if (st != VTR_OK) {
        storage_free(s);
        return st;
    }
    out->n_nodes = json_object_size(nodes);
    out->nodes = s->nodes;
    out->n_edges = json_array_size(edges);
    out->edges = s->edges;
    out->storage = s;
    return VTR_OK;
}

vtr_status vtr_role_graph_parse_text(const char *text, size_t len, const char *caption,
                                     vtr_role_graph *out, vtr_error *err)
{
    memset(out, 0, sizeof *out);
    json_error_t jerr;
    /* no JSON_REJECT_DUPLICATES: Python's json.load keeps the last value of a key */
    json_t *value = json_loadb(text, len, 0, &jerr);
    if (!value) {
        /* jansson quotes the input near the error, which may be any bytes */
        char reason[SHOWN_MAX];
        return format_error(err, caption, "invalid JSON at line %d column %d: %s", jerr.line,
                            jerr.column, shown(jerr.text, strlen(jerr.text), reason));
    }
    vtr_status st = vtr_role_graph_parse(value, caption, out, err);
    json_decref(value);
    return st;
}

void vtr_role_graph_free(vtr_role_graph *graph)
{
    if (!graph)
        return;
    storage_free(graph->storage);
    memset(graph, 0, sizeof *graph);
}

/* ---- the reader's tensors --------------------------------------------------------- */

vtr_role_graph_shape vtr_role_graph_shape_default(void)
{
    return (vtr_role_graph_shape){VTR_ROLE_GRAPH_MAX_WORDS, VTR_ROLE_GRAPH_NUM_VERBS,
                                  VTR_ROLE_GRAPH_NUM_NOUNS, VTR_ROLE_GRAPH_EOS};
}

int vtr_role_graph_num_nodes(const vtr_role_graph_shape *shape)
{
    return 1 + shape->num_verbs + shape->num_nouns;
}

#define SHAPE_LIMIT (1 << 16)

/* min(spans) < W, the reader's test for keeping a node (np.min; empty spans never come
 * here but a ROOT node's, and ROOT is never kept). */
static bool starts_before(const vtr_role_graph_node *node, int max_words)
{
    if (node->n_spans == 0)
        return false;
    int64_t lowest = node->spans[0];
    for (size_t i = 1; i < node->n_spans; i++)
        if (node->spans[i] < lowest)
            lowest = node->spans[i];
    return lowest < max_words;
}

/* mask (W): 1 at each span index < W. */
static void set_span_bits(const vtr_role_graph_node *node, int max_words, uint8_t *mask)
{
    for (size_t i = 0; i < node->n_spans; i++)
        if (node->spans[i] >= 0 && node->spans[i] < max_words)
            mask[node->spans[i]] = 1;
}

vtr_status vtr_role_graph_encode(const vtr_role_graph *graph, const int *word_ids, size_t n_ids,
                                 const vtr_role_graph_shape *shape, vtr_role_graph_tensors *out,
                                 vtr_error *err)
{
    const int W = shape->max_words, nv = shape->num_verbs, nn = shape->num_nouns;
    if (W < 1 || W > SHAPE_LIMIT || nv < 0 || nv > SHAPE_LIMIT || nn < 0 || nn > SHAPE_LIMIT)
        return vtr_fail(err, VTR_ERR_INVALID,
                        "role graph shape: max_words %d, num_verbs %d, num_nouns %d out of "
                        "range (max_words >= 1, all <= %d)",
                        W, nv, nn, SHAPE_LIMIT);
    const size_t N = (size_t)vtr_role_graph_num_nodes(shape);

    /* slot[i]: the tensor node (1 .. nv for verbs, 1+nv .. nv+nn for nouns) of graph node
     * i, 0 when not kept; verbs in [0, n), nouns in [n, 2n). */
    size_t n = graph->n_nodes;
    size_t *slot = calloc(2 * n + 1, sizeof *slot);
    if (!slot)
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for a role graph");
    size_t *verb_slot = slot, *noun_slot = slot + n;

    /* sent_ids (W): the first W ids, EOS-padded */
    size_t len = n_ids < (size_t)W ? n_ids : (size_t)W;
    for (size_t i = 0; i < (size_t)W; i++)
        out->sent_ids[i] = i < len ? (int32_t)word_ids[i] : (int32_t)shape->eos_id;
    out->sent_len = (int32_t)len;

    memset(out->verb_masks, 0, (size_t)nv * W);
    memset(out->noun_masks, 0, (size_t)nn * W);
    memset(out->node_roles, 0, (size_t)(nv + nn) * sizeof *out->node_roles);
    float *rel = out->rel_edges; /* (N, N) [tgt][src] */
    memset(rel, 0, N * N * sizeof *rel);

    /* verbs: the count is checked before the node is looked at, as in the reference */
    int taken = 0;
    for (size_t i = 0; i < n; i++) {
        if (taken >= nv)
            break;
        const vtr_role_graph_node *node = &graph->nodes[i];
        if (strcmp(node->role, "V") == 0 && starts_before(node, W)) {
            verb_slot[i] = 1 + (size_t)taken;
            set_span_bits(node, W, out->verb_masks + (size_t)taken * W);
            out->node_roles[taken] = VTR_ROLE_V;
            rel[verb_slot[i] * N + 0] = 1.0f; /* root -> verb */
            taken++;
        }
    }
    taken = 0;
    for (size_t i = 0; i < n; i++) {
        if (taken >= nn)
            break;
        const vtr_role_graph_node *node = &graph->nodes[i];
        if (strcmp(node->role, "ROOT") != 0 && strcmp(node->role, "V") != 0 &&
            starts_before(node, W)) {
            noun_slot[i] = 1 + (size_t)nv + (size_t)taken;
            set_span_bits(node, W, out->noun_masks + (size_t)taken * W);
            int role = vtr_role_id(node->role);
            out->node_roles[nv + taken] = role >= 0 ? role : VTR_ROLE_NOUN;
            taken++;
        }
    }
    for (size_t e = 0; e < graph->n_edges; e++) {
        size_t v = verb_slot[graph->edges[e].verb], a = noun_slot[graph->edges[e].arg];
        if (v && a) {
            rel[a * N + v] = 1.0f; /* verb -> noun */
            rel[v * N + a] = 1.0f; /* noun -> verb */
        }
    }
    for (size_t i = 0; i < N; i++) {
        float sum = 0.0f;
        for (size_t j = 0; j < N; j++)
            sum += rel[i * N + j];
        if (sum > 0.0f)
            for (size_t j = 0; j < N; j++)
                rel[i * N + j] /= sum;
    }
    free(slot);
    return VTR_OK;
}
