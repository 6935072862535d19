/* HGR's semantic role graph of a caption: the parsed graph of the release, and the
 * per-caption tensors the reference reader (t2vretrieval/readers/rolegraphs.py,
 * RoleGraphDataset.get_caption_outs with MPDataset.process_sent) builds from it.
 *
 * The release's sent2rolegraph.augment.json maps each caption to [nodes, edges]:
 *   nodes  {id: {"role": R, "spans": [word index, ...], "words": [word, ...]}}, the root
 *          first ({"ROOT": {"role": "ROOT", "spans": [0 .. n-1], "words": all words}}),
 *          then nodes "1", "2", ... in the order the graph builder made them;
 *   edges  [[verb_id, arg_id, arg_role], ...], one per (verb, argument) of the parse.
 * Where the graph comes from (the reference's parse_sent_to_role_graph.ipynb), which the
 * reader below takes as it is:
 *   - one verb node per SRL frame that has one V and at least one argument; a frame whose
 *     verb span was seen already is skipped whole (its arguments and edges too);
 *   - an argument with the same span and role as an earlier node is that node again:
 *     a second verb's edge points at the first node's id, so one noun node has edges
 *     from several verbs. The sharing is in the JSON; the reader does nothing for it;
 *   - when SRL gave no such frame (the graph is the root alone: no verb, or only verbs
 *     without arguments), the "augment" step fills it with spaCy: NOUN nodes for the
 *     noun chunks (or, when there are none, one per NN* word), then one V node per VB*
 *     word, single-word spans, and no edges at all. So "noun nodes only" holds only when
 *     spaCy tagged no verb either (624 of 124,654 captions in the notebook's saved run); else
 *     the reader still links the root to those V nodes (root -> verb edges come from the
 *     nodes, not from the edge list) and the nouns stay unlinked (zero rows).
 *
 * vtr_role_graph_encode() follows the reader rule for rule (nv = num_verbs,
 * nn = num_nouns, W = max_words):
 *   1. word ids: the caller's ids of the caption's whitespace tokens (the reference:
 *      sent.split(), word2int.get(w, UNK); in vtr: vtr_tokenize(VTR_TOKENIZE_WHITESPACE)
 *      then vtr_vocab_encode(wrap = false) on an HGR vocabulary), cut to the first W,
 *      padded with EOS (1, not 0) to W; sent_len = the count before padding.
 *   2. verb slots: the nodes in the JSON's order; before looking at a node the loop stops
 *      when nv verbs are taken; a node is taken when its role is exactly "V" and
 *      min(spans) < W. The k-th taken verb (from 0) is tensor node 1 + k.
 *   3. noun slots: a second pass over the nodes in the same order, stopping when nn are
 *      taken; a node is taken when its role is neither "ROOT" nor "V" (so "C-V" and
 *      "R-V" are nouns) and min(spans) < W. The k-th taken noun is tensor node 1 + nv + k.
 *   4. masks: a taken node's bit is set for each span index < W (indices >= W dropped);
 *      verb_masks (nv, W), noun_masks (nn, W), 0/1.
 *   5. node_roles (nv + nn), default 0 (= the id of "V", also for empty slots): a verb
 *      slot gets vtr_role_id("V"); a noun slot its role's id, NOUN (15) when the role is
 *      not in the table.
 *   6. edges: root -> each taken verb; then for each graph edge in order whose first end
 *      is a taken verb and whose second end a taken noun, verb -> noun and noun -> verb.
 *      Edges that touch a dropped or skipped node, start at a noun or end at a verb are
 *      ignored. rel_edges (1 + nv + nn, 1 + nv + nn) float32: rel[tgt][src] = 1 for each
 *      edge (a repeated edge is still 1), then each row with a non-zero sum divided by
 *      its sum (float32). Row 0 (the root) is always zero: it has no incoming edge.
 * The reference's batch collation (collate_graph_fn) then cuts sent_ids and the masks of
 * a batch to the batch's longest sent_len; that belongs to the batch, not to this file.
 *
 * Parsing is stricter than the reference on input it would mishandle or crash on: a
 * negative span index (numpy would wrap it to the last word), a non-integer one, empty
 * spans on a node other than ROOT (np.min([]) raises once the reader reaches the node),
 * a role that is not a string, an edge that is not three strings or names a node that
 * does not exist, words of another length than spans are VTR_ERR_FORMAT. The builder
 * writes none of these (spans come from SRL tags or spaCy tokens, words[i] from each
 * span index, edge ends from the nodes it made), so the release should parse whole.
 * Whoever loads the whole file should not reject duplicate keys, as Python does not
 * (vtr_role_graph_parse_text reads them as Python does).
 */
#ifndef VTR_ROLE_GRAPH_H
#define VTR_ROLE_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "lib/error.h"

/* ---- roles ------------------------------------------------------------------------ */

/* The reference's ROLES, in its order: the ids of the role embedding (16 rows). */
#define VTR_ROLE_COUNT 16
#define VTR_ROLE_V 0
#define VTR_ROLE_NOUN 15

/* The role's id: its index in ROLES = [V ARG1 ARG0 ARG2 ARG3 ARG4 ARGM-LOC ARGM-MNR
 * ARGM-TMP ARGM-DIR ARGM-ADV ARGM-PRP ARGM-PRD ARGM-COM ARGM-MOD NOUN], also for the
 * role with one "C-" or "R-" prefix ("C-ARG1" -> 1, "R-ARGM-LOC" -> 6, "C-V" -> 0);
 * -1 for any other string ("ROOT", "ARG5", "ARGM-GOL", "C-C-ARG0", ...). role is
 * NUL-terminated. */
int vtr_role_id(const char *role);

/* The name of id (0 .. VTR_ROLE_COUNT-1), or NULL. */
const char *vtr_role_name(int id);

/* ---- the parsed graph ------------------------------------------------------------- */

typedef struct vtr_role_graph_node {
    const char *id;       /* its key in the nodes object ("ROOT", "1", ...) */
    const char *role;     /* as written: "ROOT", "V", "ARG0", "C-ARG1", "NOUN", ... */
    size_t n_spans;       /* >= 1, except on a ROOT node (an empty caption) */
    const int64_t *spans; /* word indices (>= 0) in the file's order */
    size_t n_words;       /* == n_spans */
    const char *const *words;
} vtr_role_graph_node;

typedef struct vtr_role_graph_edge {
    size_t verb;      /* index into nodes of the first end (verb_id) */
    size_t arg;       /* index into nodes of the second end (arg_id) */
    const char *role; /* the argument's role as written */
} vtr_role_graph_edge;

/* Nodes in the JSON object's order (which is the order the reader walks), edges in the
 * array's order. All strings are NUL-terminated UTF-8 without NUL inside. Owned by the
 * value; vtr_role_graph_free() releases everything. */
typedef struct vtr_role_graph {
    size_t n_nodes;
    const vtr_role_graph_node *nodes;
    size_t n_edges;
    const vtr_role_graph_edge *edges;
    void *storage;
} vtr_role_graph;

/* Parses one caption's graph, value = [nodes, edges] (exactly two elements), into *out.
 * Node objects need "role" (string), "spans" (array of integers >= 0; non-empty unless
 * the role is "ROOT") and "words" (array of strings as long as spans); other keys are
 * ignored. Edges need exactly three strings, the first two naming nodes. caption is
 * used in messages only (may be NULL). VTR_ERR_FORMAT names the caption and the place:
 * 'role graph of caption "a man": node "2": spans[1] is -3, not a word index';
 * VTR_ERR_NOMEM. *out is zeroed on failure. */
vtr_status vtr_role_graph_parse(const json_t *value, const char *caption, vtr_role_graph *out,
                                vtr_error *err);

/* Parses the JSON text (len bytes, not NUL-terminated necessarily) of one graph value,
 * then as vtr_role_graph_parse(). Duplicate keys are read as Python's json reads them
 * (the last value, at the first one's place). Invalid JSON is VTR_ERR_FORMAT with
 * jansson's line, column and reason. */
vtr_status vtr_role_graph_parse_text(const char *text, size_t len, const char *caption,
                                     vtr_role_graph *out, vtr_error *err);

/* Frees the graph; safe on a zeroed or already-freed value. */
void vtr_role_graph_free(vtr_role_graph *graph);

/* ---- the reader's tensors --------------------------------------------------------- */

/* HGR's values (prepare_mlmatch_configs.py: max_words_in_sent 30, num_verbs 4,
 * num_nouns 6; mpdata.py: BOS, EOS, UNK = 0, 1, 2). */
#define VTR_ROLE_GRAPH_MAX_WORDS 30
#define VTR_ROLE_GRAPH_NUM_VERBS 4
#define VTR_ROLE_GRAPH_NUM_NOUNS 6
#define VTR_ROLE_GRAPH_EOS 1

typedef struct vtr_role_graph_shape {
    int max_words; /* W >= 1 */
    int num_verbs; /* nv >= 0 */
    int num_nouns; /* nn >= 0; each of the three at most 1 << 16 */
    int eos_id;    /* the padding id of sent_ids */
} vtr_role_graph_shape;

/* The reference's shape: 30, 4, 6, EOS = 1. */
vtr_role_graph_shape vtr_role_graph_shape_default(void);

/* 1 + nv + nn: the side of rel_edges (11 for HGR). */
int vtr_role_graph_num_nodes(const vtr_role_graph_shape *shape);

/* Caller-owned buffers of one caption (slices of a batch's arrays work):
 *   sent_ids (W) int32, verb_masks (nv, W) uint8, noun_masks (nn, W) uint8,
 *   node_roles (nv + nn) int32, rel_edges (1 + nv + nn, 1 + nv + nn) float32 row-major
 *   [tgt][src]; sent_len is written. Every element is written. */
typedef struct vtr_role_graph_tensors {
    int32_t *sent_ids;
    int32_t sent_len;
    uint8_t *verb_masks;
    uint8_t *noun_masks;
    int32_t *node_roles;
    float *rel_edges;
} vtr_role_graph_tensors;

/* Builds the tensors of one caption from its parsed graph and the ids of its words
 * (n_ids of them, all of them: the cut to W happens here), by the rules at the top of
 * this file. VTR_ERR_INVALID for a shape out of range; VTR_ERR_NOMEM. */
vtr_status vtr_role_graph_encode(const vtr_role_graph *graph, const int *word_ids, size_t n_ids,
                                 const vtr_role_graph_shape *shape, vtr_role_graph_tensors *out,
                                 vtr_error *err);

#endif
