/* text/role_graph: the parser of HGR's per-caption role graphs, each rule of the
 * reference reader one by one, malformed values, truncated text, and parity with the
 * reference's tensors (tests/fixtures/role_graph/, written by
 * tests/fixtures/make_role_graph_fixtures.py). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "lib/npy.h"
#include "text/role_graph.h"
#include "text/tokenizer.h"
#include "text/vocab.h"

#define FIXTURES "tests/fixtures/role_graph"
#define W VTR_ROLE_GRAPH_MAX_WORDS
#define NV VTR_ROLE_GRAPH_NUM_VERBS
#define NN VTR_ROLE_GRAPH_NUM_NOUNS
#define NODES (1 + NV + NN)

/* The tensors of one caption at HGR's shape. */
typedef struct caption_out {
    int32_t sent_ids[W];
    uint8_t verb_masks[NV][W];
    uint8_t noun_masks[NN][W];
    int32_t node_roles[NV + NN];
    float rel[NODES][NODES];
    vtr_role_graph_tensors t;
} caption_out;

/* JSON written with ' for ", so that the graphs below read as JSON. */
static char *json_q(const char *text)
{
    size_t len = strlen(text);
    char *s = malloc(len + 1);
    CHECK(s);
    memcpy(s, text, len + 1);
    for (char *p = s; *p; p++)
        if (*p == '\'')
            *p = '"';
    return s;
}

static vtr_status parse_q(const char *text, vtr_role_graph *g, vtr_error *err)
{
    char *s = json_q(text);
    vtr_status st = vtr_role_graph_parse_text(s, strlen(s), "cap", g, err);
    free(s);
    return st;
}

/* Parses text (quotes as ') and builds the tensors at shape for n_words ids 100, 101, ... */
static void encode_q(const char *text, size_t n_words, const vtr_role_graph_shape *shape,
                     caption_out *out)
{
    vtr_error err;
    vtr_role_graph g;
    CHECK_OK(parse_q(text, &g, &err));
    int ids[64];
    for (size_t i = 0; i < n_words && i < 64; i++)
        ids[i] = 100 + (int)i;
    memset(out, 0xAB, sizeof *out); /* every element must be written */
    out->t = (vtr_role_graph_tensors){out->sent_ids,          -1,
                                      &out->verb_masks[0][0], &out->noun_masks[0][0],
                                      out->node_roles,        &out->rel[0][0]};
    vtr_role_graph_shape def = vtr_role_graph_shape_default();
    CHECK_OK(vtr_role_graph_encode(&g, ids, n_words, shape ? shape : &def, &out->t, &err));
    vtr_role_graph_free(&g);
}

/* mask (W) has exactly the bits listed (-1 ends the list). */
static void check_bits(const uint8_t *mask, const int *bits, int line)
{
    uint8_t want[W] = {0};
    for (; *bits >= 0; bits++)
        want[*bits] = 1;
    for (int i = 0; i < W; i++)
        if (mask[i] != want[i])
            test_fail(__FILE__, line, "mask bit %d is %d, expected %d", i, mask[i], want[i]);
}
#define CHECK_BITS(mask, ...) check_bits(mask, (const int[]){__VA_ARGS__, -1}, __LINE__)

static int edge_count(const caption_out *o)
{
    int n = 0;
    for (int i = 0; i < NODES; i++)
        for (int j = 0; j < NODES; j++)
            n += o->rel[i][j] != 0.0f;
    return n;
}

/* ---- roles ------------------------------------------------------------------------ */

TEST(role_graph_role_ids)
{
    CHECK_EQ_INT(vtr_role_id("V"), 0);
    CHECK_EQ_INT(vtr_role_id("ARG1"), 1);
    CHECK_EQ_INT(vtr_role_id("ARG0"), 2);
    CHECK_EQ_INT(vtr_role_id("ARGM-MOD"), 14);
    CHECK_EQ_INT(vtr_role_id("NOUN"), VTR_ROLE_NOUN);
    CHECK_EQ_INT(vtr_role_id("C-ARG1"), 1);
    CHECK_EQ_INT(vtr_role_id("R-ARG0"), 2);
    CHECK_EQ_INT(vtr_role_id("R-ARGM-LOC"), 6);
    CHECK_EQ_INT(vtr_role_id("C-V"), VTR_ROLE_V);
    CHECK_EQ_INT(vtr_role_id("R-NOUN"), VTR_ROLE_NOUN);
    CHECK_EQ_INT(vtr_role_id("ROOT"), -1);
    CHECK_EQ_INT(vtr_role_id("ARG5"), -1);
    CHECK_EQ_INT(vtr_role_id("ARGM-GOL"), -1);
    CHECK_EQ_INT(vtr_role_id("C-C-ARG0"), -1);
    CHECK_EQ_INT(vtr_role_id("arg0"), -1);
    CHECK_EQ_INT(vtr_role_id("C-"), -1);
    CHECK_EQ_INT(vtr_role_id(""), -1);
    CHECK_EQ_INT(vtr_role_id(NULL), -1);
    for (int i = 0; i < VTR_ROLE_COUNT; i++)
        CHECK_EQ_INT(vtr_role_id(vtr_role_name(i)), i);
    CHECK(vtr_role_name(VTR_ROLE_COUNT) == NULL);
    CHECK(vtr_role_name(-1) == NULL);
}

/* ---- parsing ---------------------------------------------------------------------- */

#define MAN_CUTTING                                                                                \
    "[{'ROOT': {'role': 'ROOT', 'spans': [0, 1, 2, 3], 'words': ['a', 'man', 'cuts',"              \
    " 'bread']},"                                                                                  \
    " '1': {'role': 'V', 'spans': [2], 'words': ['cuts'], 'extra': 7},"                            \
    " '2': {'role': 'ARG0', 'spans': [0, 1], 'words': ['a', 'man']},"                              \
    " '3': {'role': 'ARG1', 'spans': [3], 'words': ['bread']}},"                                   \
    " [['1', '2', 'ARG0'], ['1', '3', 'ARG1']]]"

TEST(role_graph_parse_fields)
{
    vtr_error err;
    vtr_role_graph g;
    CHECK_OK(parse_q(MAN_CUTTING, &g, &err));
    CHECK_EQ_INT(g.n_nodes, 4);
    CHECK_STR(g.nodes[0].id, "ROOT");
    CHECK_STR(g.nodes[0].role, "ROOT");
    CHECK_EQ_INT(g.nodes[0].n_spans, 4);
    CHECK_EQ_INT(g.nodes[0].spans[3], 3);
    CHECK_STR(g.nodes[0].words[2], "cuts");
    CHECK_STR(g.nodes[2].id, "2");
    CHECK_STR(g.nodes[2].role, "ARG0");
    CHECK_EQ_INT(g.nodes[2].n_words, 2);
    CHECK_STR(g.nodes[2].words[1], "man");
    CHECK_EQ_INT(g.n_edges, 2);
    CHECK_EQ_INT(g.edges[1].verb, 1);
    CHECK_EQ_INT(g.edges[1].arg, 3);
    CHECK_STR(g.edges[1].role, "ARG1");
    vtr_role_graph_free(&g);
    vtr_role_graph_free(&g); /* twice is safe */

    /* a duplicate key keeps the first place and the last value, as Python's json does */
    CHECK_OK(parse_q("[{'ROOT': {'role': 'ROOT', 'spans': [], 'words': []},"
                     " '1': {'role': 'ARG0', 'spans': [0], 'words': ['x']},"
                     " '2': {'role': 'V', 'spans': [1], 'words': ['y']},"
                     " '1': {'role': 'ARG1', 'spans': [2], 'words': ['z']}}, []]",
                     &g, &err));
    CHECK_EQ_INT(g.n_nodes, 3);
    CHECK_STR(g.nodes[1].id, "1");
    CHECK_STR(g.nodes[1].role, "ARG1");
    CHECK_STR(g.nodes[2].id, "2");
    vtr_role_graph_free(&g);
}

TEST(role_graph_malformed_values)
{
    static const struct {
        const char *json, *needle;
    } cases[] = {
        {"{}", "not a [nodes, edges] array"},
        {"[{}]", "not a [nodes, edges] array"},
        {"[{}, [], []]", "not a [nodes, edges] array"},
        {"[[], []]", "nodes is not an object"},
        {"[{}, {}]", "edges is not an array"},
        {"[{'1': 3}, []]", "node \"1\" is not an object"},
        {"[{'1': {'spans': [0], 'words': ['a']}}, []]", "node \"1\" has no \"role\""},
        {"[{'1': {'role': 'V', 'words': ['a']}}, []]", "node \"1\" has no \"spans\""},
        {"[{'1': {'role': 'V', 'spans': [0]}}, []]", "node \"1\" has no \"words\""},
        {"[{'1': {'role': 5, 'spans': [0], 'words': ['a']}}, []]", "role is not a string"},
        {"[{'1': {'role': 'V', 'spans': 0, 'words': ['a']}}, []]", "spans is not an array"},
        {"[{'1': {'role': 'V', 'spans': [0], 'words': 'a'}}, []]", "words is not an array"},
        {"[{'1': {'role': 'V', 'spans': ['0'], 'words': ['a']}}, []]",
         "node \"1\": spans[0] is not an integer"},
        {"[{'1': {'role': 'V', 'spans': [1.0], 'words': ['a']}}, []]",
         "spans[0] is not an integer"},
        {"[{'1': {'role': 'ARG0', 'spans': [2, -1], 'words': ['a', 'b']}}, []]",
         "node \"1\": spans[1] is -1, not a word index"},
        {"[{'1': {'role': 'V', 'spans': [], 'words': []}}, []]",
         "node \"1\": spans is empty (role V)"},
        {"[{'1': {'role': 'V', 'spans': [0, 1], 'words': ['a']}}, []]",
         "node \"1\" has 1 words for 2 spans"},
        {"[{'1': {'role': 'V', 'spans': [0], 'words': [null]}}, []]", "words[0] is not a string"},
        {"[{'1': {'role': 'V', 'spans': [0], 'words': ['a']}}, [['1', '1']]]",
         "edge 0 is not [verb_id, arg_id, role]"},
        {"[{'1': {'role': 'V', 'spans': [0], 'words': ['a']}}, ['1']]",
         "edge 0 is not [verb_id, arg_id, role]"},
        {"[{'1': {'role': 'V', 'spans': [0], 'words': ['a']}}, [['1', 1, 'ARG0']]]",
         "edge 0: element 1 is not a string"},
        {"[{'1': {'role': 'V', 'spans': [0], 'words': ['a']}}, [['1', '1', 'x'], "
         "['1', '7', 'ARG0']]]",
         "edge 1 names node \"7\", which is not in nodes"},
        {"[{'1': {'role': 'V', 'spans': [0], 'words': ['a']}}, []", "invalid JSON at line 1"},
    };
    vtr_error err;
    vtr_role_graph g;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_FAILS(parse_q(cases[i].json, &g, &err), VTR_ERR_FORMAT, cases[i].needle);
        CHECK_MSG(strncmp(err.msg, "role graph of caption \"cap\": ", 29) == 0, "%s", err.msg);
        CHECK(g.n_nodes == 0 && g.nodes == NULL && g.storage == NULL);
    }
    /* an empty ROOT (the empty caption) is fine; so is a NUL-free caption name of NULL */
    char *s = json_q("[{'ROOT': {'role': 'ROOT', 'spans': [], 'words': []}}, []]");
    CHECK_OK(vtr_role_graph_parse_text(s, strlen(s), NULL, &g, &err));
    vtr_role_graph_free(&g);
    free(s);
    /* a long or binary caption is shown cut and escaped, on one line */
    char caption[300];
    memset(caption, 'x', sizeof caption - 1);
    caption[sizeof caption - 1] = '\0';
    caption[3] = '\n';
    CHECK_FAILS(vtr_role_graph_parse_text("[]", 2, caption, &g, &err), VTR_ERR_FORMAT,
                "role graph of caption \"xxx\\x0a");
    CHECK(!strchr(err.msg, '\n'));
    CHECK(strstr(err.msg, "...\": not a [nodes, edges] array"));
    /* jansson's reason quotes the input near the error; it is escaped too */
    CHECK_FAILS(vtr_role_graph_parse_text("[\"\xff\n\"]", 5, "cap", &g, &err), VTR_ERR_FORMAT,
                "invalid JSON");
    for (const char *c = err.msg; *c; c++)
        CHECK(*c >= 0x20 && *c <= 0x7e);
}

/* A JSON value with a string holding NUL (jansson decodes it with JSON_ALLOW_NUL). */
TEST(role_graph_nul_in_strings)
{
    vtr_error err;
    vtr_role_graph g;
    const char *text = "[{\"1\": {\"role\": \"V\\u0000X\", \"spans\": [0], \"words\": [\"a\"]}},"
                       " []]";
    json_error_t jerr;
    json_t *v = json_loads(text, JSON_ALLOW_NUL, &jerr);
    CHECK(v);
    CHECK_FAILS(vtr_role_graph_parse(v, "cap", &g, &err), VTR_ERR_FORMAT,
                "role is not a string without NUL");
    json_decref(v);
}

/* The graph's JSON text cut at every length fails with a format error, never a crash;
 * whole, it parses. */
TEST(role_graph_truncated_at_every_length)
{
    vtr_error err;
    char *text = json_q(MAN_CUTTING);
    size_t len = strlen(text);
    for (size_t cut = 0; cut < len; cut++) {
        char *part = malloc(cut ? cut : 1); /* exactly cut bytes, for ASan */
        CHECK(part);
        memcpy(part, text, cut);
        vtr_role_graph g;
        CHECK_FAILS(vtr_role_graph_parse_text(part, cut, "cap", &g, &err), VTR_ERR_FORMAT,
                    "role graph of caption \"cap\": invalid JSON");
        CHECK(g.storage == NULL);
        free(part);
    }
    vtr_role_graph g;
    CHECK_OK(vtr_role_graph_parse_text(text, len, "cap", &g, &err));
    CHECK_EQ_INT(g.n_nodes, 4);
    vtr_role_graph_free(&g);
    free(text);
}

/* ---- the reader's rules, one by one ------------------------------------------------ */

TEST(role_graph_words_cut_and_eos_padded)
{
    caption_out o;
    encode_q(MAN_CUTTING, 4, NULL, &o);
    CHECK_EQ_INT(o.t.sent_len, 4);
    CHECK_EQ_INT(o.sent_ids[0], 100);
    CHECK_EQ_INT(o.sent_ids[3], 103);
    for (int i = 4; i < W; i++)
        CHECK_EQ_INT(o.sent_ids[i], VTR_ROLE_GRAPH_EOS);
    encode_q(MAN_CUTTING, 35, NULL, &o);
    CHECK_EQ_INT(o.t.sent_len, W);
    CHECK_EQ_INT(o.sent_ids[W - 1], 100 + W - 1);
    encode_q(MAN_CUTTING, 0, NULL, &o);
    CHECK_EQ_INT(o.t.sent_len, 0);
    CHECK_EQ_INT(o.sent_ids[0], 1);

    vtr_role_graph_shape shape = vtr_role_graph_shape_default();
    shape.eos_id = 7;
    encode_q(MAN_CUTTING, 2, &shape, &o);
    CHECK_EQ_INT(o.sent_ids[2], 7);
}

/* A node is kept when min(spans) < W; only the bits < W are set; a skipped verb takes
 * no slot. */
TEST(role_graph_spans_past_the_last_word)
{
    caption_out o;
    encode_q("[{'ROOT': {'role': 'ROOT', 'spans': [], 'words': []},"
             " '1': {'role': 'V', 'spans': [31], 'words': ['a']},"
             " '2': {'role': 'V', 'spans': [33, 28, 30], 'words': ['a', 'b', 'c']},"
             " '3': {'role': 'ARG0', 'spans': [30], 'words': ['a']},"
             " '4': {'role': 'ARG1', 'spans': [40, 29, 29], 'words': ['a', 'b', 'c']},"
             " '5': {'role': 'V', 'spans': [29], 'words': ['a']}},"
             " [['1', '4', 'ARG1'], ['2', '3', 'ARG0'], ['2', '4', 'ARG1']]]",
             35, NULL, &o);
    CHECK_BITS(o.verb_masks[0], 28);
    CHECK_BITS(o.verb_masks[1], 29);
    CHECK_BITS(o.verb_masks[2], -1);
    CHECK_BITS(o.noun_masks[0], 29);
    CHECK_BITS(o.noun_masks[1], -1);
    /* verb slot 1 (node "2") <-> noun slot 1 + NV (node "4"); "1" and "3" are gone */
    CHECK(o.rel[1][0] == 0.5f && o.rel[1][1 + NV] == 0.5f);
    CHECK(o.rel[1 + NV][1] == 1.0f);
    CHECK(o.rel[2][0] == 1.0f);
    CHECK_EQ_INT(edge_count(&o), 4);
}

static char *many_nodes_graph(int n_verbs, int n_nouns)
{
    char *s = malloc(8192);
    CHECK(s);
    int at = sprintf(s, "[{'ROOT': {'role': 'ROOT', 'spans': [0], 'words': ['a']}");
    for (int i = 0; i < n_verbs; i++)
        at += sprintf(s + at, ", 'v%d': {'role': 'V', 'spans': [%d], 'words': ['v']}", i, i);
    for (int i = 0; i < n_nouns; i++)
        at +=
            sprintf(s + at, ", 'n%d': {'role': 'ARG1', 'spans': [%d], 'words': ['n']}", i, 10 + i);
    at += sprintf(s + at, "}, [");
    for (int i = 0; i < n_verbs; i++)
        for (int j = 0; j < n_nouns; j++)
            at += sprintf(s + at, "%s['v%d', 'n%d', 'ARG1']", i + j ? ", " : "", i, j);
    sprintf(s + at, "]]");
    return s;
}

TEST(role_graph_fifth_verb_dropped)
{
    char *text = many_nodes_graph(5, 1);
    caption_out o;
    encode_q(text, 20, NULL, &o);
    for (int k = 0; k < NV; k++) {
        CHECK_BITS(o.verb_masks[k], k);
        CHECK(o.rel[1 + k][0] == 0.5f && o.rel[1 + k][1 + NV] == 0.5f);
    }
    /* the noun hears the four kept verbs only */
    for (int k = 0; k < NV; k++)
        CHECK(o.rel[1 + NV][1 + k] == 0.25f);
    CHECK_EQ_INT(edge_count(&o), 3 * NV);

    /* num_verbs as a parameter */
    vtr_role_graph_shape shape = vtr_role_graph_shape_default();
    shape.num_verbs = 2;
    vtr_error err;
    vtr_role_graph g;
    CHECK_OK(parse_q(text, &g, &err));
    int ids[3] = {5, 6, 7};
    int32_t sent_ids[W], roles[2 + NN];
    uint8_t vm[2][W], nm[NN][W];
    float rel[9][9];
    vtr_role_graph_tensors t = {sent_ids, 0, &vm[0][0], &nm[0][0], roles, &rel[0][0]};
    CHECK_EQ_INT(vtr_role_graph_num_nodes(&shape), 9);
    CHECK_OK(vtr_role_graph_encode(&g, ids, 3, &shape, &t, &err));
    CHECK_BITS(vm[1], 1);
    CHECK(rel[3][1] == 0.5f && rel[3][2] == 0.5f && rel[3][0] == 0.0f);
    vtr_role_graph_free(&g);
    free(text);
}

TEST(role_graph_seventh_noun_dropped)
{
    char *text = many_nodes_graph(1, 8);
    caption_out o;
    encode_q(text, 20, NULL, &o);
    for (int k = 0; k < NN; k++) {
        CHECK_BITS(o.noun_masks[k], 10 + k);
        CHECK_EQ_INT(o.node_roles[NV + k], 1);
        CHECK(o.rel[1 + NV + k][1] == 1.0f);
    }
    /* the verb: root + the six kept nouns */
    CHECK(o.rel[1][0] == 1.0f / 7.0f);
    CHECK(o.rel[1][NODES - 1] == 1.0f / 7.0f);
    CHECK_EQ_INT(edge_count(&o), 1 + 2 * NN);
    free(text);
}

TEST(role_graph_unknown_role_is_noun)
{
    caption_out o;
    encode_q("[{'1': {'role': 'V', 'spans': [0], 'words': ['a']},"
             " '2': {'role': 'ARGM-GOL', 'spans': [1], 'words': ['a']},"
             " '3': {'role': 'ARG5', 'spans': [2], 'words': ['a']},"
             " '4': {'role': 'C-C-ARG0', 'spans': [3], 'words': ['a']},"
             " '5': {'role': '', 'spans': [4], 'words': ['a']},"
             " '6': {'role': 'ARGM-MOD', 'spans': [5], 'words': ['a']}}, []]",
             6, NULL, &o);
    CHECK_EQ_INT(o.node_roles[0], VTR_ROLE_V);
    for (int k = 0; k < 4; k++)
        CHECK_EQ_INT(o.node_roles[NV + k], VTR_ROLE_NOUN);
    CHECK_EQ_INT(o.node_roles[NV + 4], 14);
    CHECK_EQ_INT(o.node_roles[NV + 5], 0); /* empty slot: the default 0 */
    for (int k = 1; k < NV; k++)
        CHECK_EQ_INT(o.node_roles[k], 0);
}

TEST(role_graph_c_and_r_roles)
{
    caption_out o;
    encode_q("[{'1': {'role': 'C-V', 'spans': [0], 'words': ['a']},"
             " '2': {'role': 'R-V', 'spans': [1], 'words': ['a']},"
             " '3': {'role': 'C-ARG1', 'spans': [2], 'words': ['a']},"
             " '4': {'role': 'R-ARGM-LOC', 'spans': [3], 'words': ['a']},"
             " '5': {'role': 'V', 'spans': [4], 'words': ['a']}},"
             " [['5', '1', 'C-V'], ['5', '4', 'R-ARGM-LOC']]]",
             6, NULL, &o);
    /* C-V and R-V are nouns (not exactly "V") with the id of V */
    CHECK_BITS(o.verb_masks[0], 4);
    CHECK_BITS(o.verb_masks[1], -1);
    CHECK_BITS(o.noun_masks[0], 0);
    CHECK_BITS(o.noun_masks[1], 1);
    CHECK_EQ_INT(o.node_roles[NV + 0], 0);
    CHECK_EQ_INT(o.node_roles[NV + 1], 0);
    CHECK_EQ_INT(o.node_roles[NV + 2], 1);
    CHECK_EQ_INT(o.node_roles[NV + 3], 6);
    CHECK(o.rel[1 + NV][1] == 1.0f && o.rel[1 + NV + 3][1] == 1.0f);
    CHECK(o.rel[1][0] == 1.0f / 3.0f);
}

TEST(role_graph_root_ignored)
{
    caption_out o;
    encode_q("[{'ROOT': {'role': 'ROOT', 'spans': [0, 1, 2], 'words': ['a', 'b', 'c']},"
             " 'x': {'role': 'ROOT', 'spans': [1], 'words': ['b']},"
             " '1': {'role': 'V', 'spans': [1], 'words': ['b']},"
             " '2': {'role': 'ARG0', 'spans': [0], 'words': ['a']}},"
             " [['1', 'ROOT', 'ARG0'], ['1', 'x', 'ARG0'], ['ROOT', '2', 'ARG0']]]",
             3, NULL, &o);
    CHECK_BITS(o.verb_masks[0], 1);
    CHECK_BITS(o.noun_masks[0], 0);
    CHECK_BITS(o.noun_masks[1], -1);
    /* no edge reached the noun: the root is not a verb and the ROOT nodes are no nouns */
    CHECK_EQ_INT(edge_count(&o), 1);
    CHECK(o.rel[1][0] == 1.0f);
}

TEST(role_graph_edges_to_dropped_nodes_dropped)
{
    caption_out o;
    encode_q("[{'1': {'role': 'V', 'spans': [0], 'words': ['a']},"
             " '2': {'role': 'ARG0', 'spans': [1], 'words': ['a']},"
             " '3': {'role': 'V', 'spans': [2], 'words': ['a']},"
             " '4': {'role': 'ARG1', 'spans': [44], 'words': ['a']},"
             " '5': {'role': 'V', 'spans': [50], 'words': ['a']}},"
             " [['2', '1', 'ARG0'], ['1', '3', 'V'], ['1', '4', 'ARG1'], ['5', '2', 'ARG0'],"
             " ['3', '2', 'ARG0'], ['3', '2', 'ARG0']]]",
             3, NULL, &o);
    /* only 3 <-> 2 survives (twice written, still 1), plus root -> 1 and root -> 3 */
    CHECK(o.rel[1][0] == 1.0f);
    CHECK(o.rel[2][0] == 0.5f && o.rel[2][1 + NV] == 0.5f);
    CHECK(o.rel[1 + NV][2] == 1.0f);
    CHECK_EQ_INT(edge_count(&o), 4);
}

/* The fallback parser's graphs: nouns only (no verb anywhere), and spaCy's verbs, which
 * have no edges in the file but still get root -> verb. */
TEST(role_graph_no_verb_graph)
{
    caption_out o;
    encode_q("[{'ROOT': {'role': 'ROOT', 'spans': [0, 1, 2], 'words': ['two', 'dogs', 'x']},"
             " '1': {'role': 'NOUN', 'spans': [0, 1], 'words': ['two', 'dogs']},"
             " '2': {'role': 'NOUN', 'spans': [2], 'words': ['x']}}, []]",
             3, NULL, &o);
    for (int k = 0; k < NV; k++)
        CHECK_BITS(o.verb_masks[k], -1);
    CHECK_BITS(o.noun_masks[0], 0, 1);
    CHECK_BITS(o.noun_masks[1], 2);
    CHECK_EQ_INT(o.node_roles[NV], VTR_ROLE_NOUN);
    CHECK_EQ_INT(o.node_roles[NV + 1], VTR_ROLE_NOUN);
    CHECK_EQ_INT(edge_count(&o), 0);

    encode_q("[{'ROOT': {'role': 'ROOT', 'spans': [0, 1, 2], 'words': ['a', 'dog', 'runs']},"
             " '1': {'role': 'NOUN', 'spans': [0, 1], 'words': ['a', 'dog']},"
             " '2': {'role': 'V', 'spans': [2], 'words': ['runs']}}, []]",
             3, NULL, &o);
    CHECK_BITS(o.verb_masks[0], 2);
    CHECK(o.rel[1][0] == 1.0f);
    CHECK_EQ_INT(edge_count(&o), 1);
}

/* rel[tgt][src]: each row divided by its sum in float32; the root row stays zero; shared
 * argument nodes (one id, edges from two verbs) hear both. */
TEST(role_graph_row_normalisation)
{
    caption_out o;
    encode_q("[{'ROOT': {'role': 'ROOT', 'spans': [0], 'words': ['a']},"
             " '1': {'role': 'V', 'spans': [0], 'words': ['a']},"
             " '2': {'role': 'ARG0', 'spans': [1], 'words': ['a']},"
             " '3': {'role': 'ARG1', 'spans': [2], 'words': ['a']},"
             " '4': {'role': 'V', 'spans': [3], 'words': ['a']},"
             " '5': {'role': 'ARG2', 'spans': [4], 'words': ['a']}},"
             " [['1', '2', 'ARG0'], ['1', '3', 'ARG1'], ['1', '5', 'ARG2'], ['4', '2', 'ARG0']]]",
             5, NULL, &o);
    for (int j = 0; j < NODES; j++)
        CHECK(o.rel[0][j] == 0.0f);
    float quarter = 1.0f / 4.0f, half = 1.0f / 2.0f;
    CHECK(o.rel[1][0] == quarter && o.rel[1][5] == quarter && o.rel[1][6] == quarter &&
          o.rel[1][7] == quarter);
    CHECK(o.rel[2][0] == half && o.rel[2][5] == half);
    CHECK(o.rel[5][1] == half && o.rel[5][2] == half); /* shared ARG0 */
    CHECK(o.rel[6][1] == 1.0f && o.rel[7][1] == 1.0f);
    for (int i = 0; i < NODES; i++) {
        float sum = 0.0f;
        for (int j = 0; j < NODES; j++)
            sum += o.rel[i][j];
        CHECK(sum == 0.0f || (sum > 0.9999f && sum < 1.0001f));
    }
}

TEST(role_graph_shape_out_of_range)
{
    vtr_error err;
    vtr_role_graph g;
    CHECK_OK(parse_q(MAN_CUTTING, &g, &err));
    vtr_role_graph_tensors t = {0};
    vtr_role_graph_shape shape = vtr_role_graph_shape_default();
    shape.max_words = 0;
    CHECK_FAILS(vtr_role_graph_encode(&g, NULL, 0, &shape, &t, &err), VTR_ERR_INVALID,
                "max_words 0");
    shape = vtr_role_graph_shape_default();
    shape.num_nouns = -1;
    CHECK_FAILS(vtr_role_graph_encode(&g, NULL, 0, &shape, &t, &err), VTR_ERR_INVALID,
                "out of range");
    vtr_role_graph_free(&g);
}

/* ---- parity with the reference reader ---------------------------------------------- */

static const void *fixture(vtr_npy_file *f, const char *name, vtr_dtype dtype, int64_t n,
                           size_t per_caption)
{
    vtr_error err;
    char path[256];
    snprintf(path, sizeof path, FIXTURES "/%s.npy", name);
    if (vtr_npy_load(path, f, &err) != VTR_OK)
        test_fail(__FILE__, __LINE__, "fixture: %s (run from the top of the tree)", err.msg);
    CHECK_MSG(f->tensor.dtype == dtype && f->tensor.shape[0] == n &&
                  (size_t)vtr_tensor_numel(&f->tensor) == (size_t)n * per_caption,
              "fixture %s: unexpected dtype or shape", name);
    return f->tensor.data;
}

TEST(role_graph_parity_with_reference)
{
    vtr_error err;
    vtr_vocab *vocab = NULL;
    CHECK_OK(vtr_vocab_load_hgr(FIXTURES "/word2int.json", &vocab, &err));
    json_error_t jerr;
    json_t *graphs = json_load_file(FIXTURES "/graphs.json", 0, &jerr);
    CHECK_MSG(graphs, "graphs.json: %s", jerr.text);
    int64_t n = (int64_t)json_object_size(graphs);
    CHECK(n >= 15);

    vtr_npy_file f[6];
    const int32_t *ids = fixture(&f[0], "sent_ids", VTR_I32, n, W);
    const int32_t *lens = fixture(&f[1], "sent_lens", VTR_I32, n, 1);
    const uint8_t *vm = fixture(&f[2], "verb_masks", VTR_U8, n, NV * W);
    const uint8_t *nm = fixture(&f[3], "noun_masks", VTR_U8, n, NN * W);
    const int32_t *roles = fixture(&f[4], "node_roles", VTR_I32, n, NV + NN);
    const float *rel = fixture(&f[5], "rel_edges", VTR_F32, n, NODES * NODES);

    vtr_tokens tokens = {0};
    int64_t c = 0;
    const char *caption;
    json_t *value;
    json_object_foreach(graphs, caption, value)
    {
        vtr_role_graph g;
        CHECK_OK(vtr_role_graph_parse(value, caption, &g, &err));
        CHECK_OK(vtr_tokenize(caption, VTR_TOKENIZE_WHITESPACE, &tokens, &err));
        int word_ids[64];
        size_t count = 0;
        CHECK(tokens.n <= 64);
        CHECK_OK(vtr_vocab_encode(vocab, tokens.tokens, tokens.n, false, word_ids, &count, &err));
        caption_out o;
        memset(&o, 0xAB, sizeof o);
        o.t = (vtr_role_graph_tensors){o.sent_ids,          -1,           &o.verb_masks[0][0],
                                       &o.noun_masks[0][0], o.node_roles, &o.rel[0][0]};
        vtr_role_graph_shape shape = vtr_role_graph_shape_default();
        CHECK_OK(vtr_role_graph_encode(&g, word_ids, count, &shape, &o.t, &err));
        CHECK_MSG(o.t.sent_len == lens[c], "caption %lld (%s): sent_len", (long long)c, caption);
        CHECK_MSG(!memcmp(o.sent_ids, ids + c * W, sizeof o.sent_ids), "caption %lld: ids",
                  (long long)c);
        CHECK_MSG(!memcmp(o.verb_masks, vm + c * NV * W, sizeof o.verb_masks),
                  "caption %lld: verb_masks", (long long)c);
        CHECK_MSG(!memcmp(o.noun_masks, nm + c * NN * W, sizeof o.noun_masks),
                  "caption %lld: noun_masks", (long long)c);
        CHECK_MSG(!memcmp(o.node_roles, roles + c * (NV + NN), sizeof o.node_roles),
                  "caption %lld: node_roles", (long long)c);
        const float *want = rel + c * NODES * NODES;
        for (int i = 0; i < NODES * NODES; i++)
            CHECK_MSG((&o.rel[0][0])[i] == want[i], "caption %lld: rel_edges[%d][%d] %.9g != %.9g",
                      (long long)c, i / NODES, i % NODES, (&o.rel[0][0])[i], want[i]);
        vtr_role_graph_free(&g);
        c++;
    }
    CHECK_EQ_INT(c, n);
    vtr_tokens_free(&tokens);
    for (int i = 0; i < 6; i++)
        vtr_npy_close(&f[i]);
    json_decref(graphs);
    vtr_vocab_free(vocab);
}
