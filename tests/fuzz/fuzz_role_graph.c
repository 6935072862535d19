/* Fuzz target: text/role_graph's parser on arbitrary bytes, then the reader's tensors of
 * whatever parsed. A failure must leave the graph zeroed and come with one printable
 * ASCII line that names the caption. A parsed graph must hold what the header promises
 * (spans >= 0, as many words as spans, edges inside the nodes), and its tensors must
 * keep the reader's invariants at HGR's shape and at a small one picked by the first
 * byte: sent_len <= W, masks 0/1, roles in the table, a zero root row, every other row
 * zero or summing to 1, and rel symmetric in which pairs are linked. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/role_graph.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PREFIX "role graph of caption \"fuzz\": "

static void check_message(const vtr_error *err)
{
    if (strncmp(err->msg, PREFIX, strlen(PREFIX)) != 0)
        abort();
    for (const char *c = err->msg; *c; c++)
        if (*c < 0x20 || *c > 0x7e)
            abort();
}

static void check_graph(const vtr_role_graph *g)
{
    for (size_t i = 0; i < g->n_nodes; i++) {
        const vtr_role_graph_node *n = &g->nodes[i];
        if (!n->id || !n->role || n->n_words != n->n_spans)
            abort();
        if (n->n_spans == 0 && strcmp(n->role, "ROOT") != 0)
            abort();
        for (size_t k = 0; k < n->n_spans; k++)
            if (n->spans[k] < 0 || !n->words[k])
                abort();
    }
    for (size_t e = 0; e < g->n_edges; e++)
        if (g->edges[e].verb >= g->n_nodes || g->edges[e].arg >= g->n_nodes || !g->edges[e].role)
            abort();
}

static void check_tensors(const vtr_role_graph *g, const vtr_role_graph_shape *shape)
{
    const int W = shape->max_words, nv = shape->num_verbs, nn = shape->num_nouns;
    const int N = vtr_role_graph_num_nodes(shape);
    int ids[40];
    size_t n_ids = g->n_nodes % 40;
    for (size_t i = 0; i < n_ids; i++)
        ids[i] = 3 + (int)i;
    vtr_role_graph_tensors t = {
        malloc((size_t)W * sizeof(int32_t)),
        -1,
        malloc((size_t)(nv * W) + 1),
        malloc((size_t)(nn * W) + 1),
        malloc((size_t)(nv + nn) * sizeof(int32_t) + 1),
        malloc((size_t)(N * N) * sizeof(float)),
    };
    vtr_error err;
    if (!t.sent_ids || !t.verb_masks || !t.noun_masks || !t.node_roles || !t.rel_edges)
        abort();
    if (vtr_role_graph_encode(g, ids, n_ids, shape, &t, &err) != VTR_OK)
        abort();
    if (t.sent_len < 0 || t.sent_len > W)
        abort();
    for (int i = 0; i < W; i++)
        if (i >= t.sent_len && t.sent_ids[i] != shape->eos_id)
            abort();
    for (int i = 0; i < nv * W; i++)
        if (t.verb_masks[i] > 1)
            abort();
    for (int i = 0; i < nn * W; i++)
        if (t.noun_masks[i] > 1)
            abort();
    for (int i = 0; i < nv + nn; i++)
        if (t.node_roles[i] < 0 || t.node_roles[i] >= VTR_ROLE_COUNT)
            abort();
    for (int j = 0; j < N; j++)
        if (t.rel_edges[j] != 0.0f)
            abort();
    for (int i = 1; i < N; i++) {
        float sum = 0.0f;
        for (int j = 0; j < N; j++) {
            float v = t.rel_edges[i * N + j];
            if (v < 0.0f || v > 1.0f)
                abort();
            if (j > 0 && (v != 0.0f) != (t.rel_edges[j * N + i] != 0.0f))
                abort();
            sum += v;
        }
        if (sum != 0.0f && fabsf(sum - 1.0f) > 1e-5f)
            abort();
    }
    free(t.sent_ids);
    free(t.verb_masks);
    free(t.noun_masks);
    free(t.node_roles);
    free(t.rel_edges);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    vtr_role_graph g;
    vtr_error err;
    if (vtr_role_graph_parse_text((const char *)data, size, "fuzz", &g, &err) != VTR_OK) {
        check_message(&err);
        if (g.n_nodes || g.nodes || g.n_edges || g.edges || g.storage)
            abort();
        return 0;
    }
    check_graph(&g);
    vtr_role_graph_shape shape = vtr_role_graph_shape_default();
    check_tensors(&g, &shape);
    if (size > 0) {
        shape.max_words = 1 + data[0] % 5;
        shape.num_verbs = (data[0] >> 3) % 3;
        shape.num_nouns = (data[0] >> 5) % 3;
        check_tensors(&g, &shape);
    }
    vtr_role_graph_free(&g);
    return 0;
}
