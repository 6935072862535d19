/* torch.save files of a state_dict (pth.h). The opcodes' definitions: CPython's
 * Lib/pickletools.py; what torch.save pickles: torch/serialization.py (persistent_id)
 * and torch/_tensor.py (__reduce_ex__). */
#define _POSIX_C_SOURCE 200809L
#include "pth.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zip.h"

#define MAX_MESSAGE_NAME 160

/* Every opcode of pickle protocols 0-5, for messages; the interpreter runs a few. */
static const char *const op_names[256] = {
    ['('] = "MARK", ['.'] = "STOP", ['0'] = "POP", ['1'] = "POP_MARK", ['2'] = "DUP",
    ['F'] = "FLOAT", ['I'] = "INT", ['J'] = "BININT", ['K'] = "BININT1", ['L'] = "LONG",
    ['M'] = "BININT2", ['N'] = "NONE", ['P'] = "PERSID", ['Q'] = "BINPERSID",
    ['R'] = "REDUCE", ['S'] = "STRING", ['T'] = "BINSTRING", ['U'] = "SHORT_BINSTRING",
    ['V'] = "UNICODE", ['X'] = "BINUNICODE", ['a'] = "APPEND", ['b'] = "BUILD",
    ['c'] = "GLOBAL", ['d'] = "DICT", ['}'] = "EMPTY_DICT", ['e'] = "APPENDS", ['g'] = "GET",
    ['h'] = "BINGET", ['i'] = "INST", ['j'] = "LONG_BINGET", ['l'] = "LIST",
    [']'] = "EMPTY_LIST", ['o'] = "OBJ", ['p'] = "PUT", ['q'] = "BINPUT",
    ['r'] = "LONG_BINPUT", ['s'] = "SETITEM", ['t'] = "TUPLE", [')'] = "EMPTY_TUPLE",
    ['u'] = "SETITEMS", ['G'] = "BINFLOAT", [0x80] = "PROTO", [0x81] = "NEWOBJ",
    [0x82] = "EXT1", [0x83] = "EXT2", [0x84] = "EXT4", [0x85] = "TUPLE1", [0x86] = "TUPLE2",
    [0x87] = "TUPLE3", [0x88] = "NEWTRUE", [0x89] = "NEWFALSE", [0x8a] = "LONG1",
    [0x8b] = "LONG4", ['B'] = "BINBYTES", ['C'] = "SHORT_BINBYTES",
    [0x8c] = "SHORT_BINUNICODE", [0x8d] = "BINUNICODE8", [0x8e] = "BINBYTES8",
    [0x8f] = "EMPTY_SET", [0x90] = "ADDITEMS", [0x91] = "FROZENSET", [0x92] = "NEWOBJ_EX",
    [0x93] = "STACK_GLOBAL", [0x94] = "MEMOIZE", [0x95] = "FRAME", [0x96] = "BYTEARRAY8",
    [0x97] = "NEXT_BUFFER", [0x98] = "READONLY_BUFFER",
};

typedef enum kind {
    K_NONE,
    K_BOOL,
    K_INT,
    K_FLOAT,
    K_STR,
    K_TUPLE,
    K_DICT,
    K_GLOBAL,
    K_STORAGE,
    K_TENSOR
} kind;

static const char *const kind_names[] = {
    [K_NONE] = "None",         [K_BOOL] = "a bool",     [K_INT] = "an int",
    [K_FLOAT] = "a float",     [K_STR] = "a string",    [K_TUPLE] = "a tuple",
    [K_DICT] = "a dict",       [K_GLOBAL] = "a class or function",
    [K_STORAGE] = "a storage", [K_TENSOR] = "a tensor",
};

typedef enum callable { ORDERED_DICT, REBUILD_TENSOR, REBUILD_PARAMETER, STORAGE_TYPE } callable;

/* What GLOBAL may name: nothing else. */
static const struct global {
    const char *module, *name;
    callable what;
    vtr_dtype dtype; /* STORAGE_TYPE */
} globals[] = {
    {"collections", "OrderedDict", ORDERED_DICT, VTR_F32},
    {"torch._utils", "_rebuild_tensor_v2", REBUILD_TENSOR, VTR_F32},
    {"torch._utils", "_rebuild_parameter", REBUILD_PARAMETER, VTR_F32},
    {"torch", "FloatStorage", STORAGE_TYPE, VTR_F32},
    {"torch", "HalfStorage", STORAGE_TYPE, VTR_F16},
    {"torch", "BFloat16Storage", STORAGE_TYPE, VTR_BF16},
    {"torch", "ByteStorage", STORAGE_TYPE, VTR_U8},
    {"torch", "IntStorage", STORAGE_TYPE, VTR_I32},
    {"torch", "LongStorage", STORAGE_TYPE, VTR_I64},
};
#define N_GLOBALS (sizeof globals / sizeof globals[0])

typedef struct value value;
struct value {
    kind kind;
    int64_t i;           /* K_BOOL, K_INT; K_GLOBAL: index in globals[]; K_TENSOR: offset */
    const char *s;       /* K_STR, K_STORAGE (its key): into the pickle, no NUL inside */
    size_t n;            /* K_STR, K_STORAGE: bytes of s; K_TUPLE: items; K_DICT: pairs */
    value **items;       /* K_TUPLE: n items; K_DICT: key, value, key, ...; owned */
    size_t cap;          /* K_DICT: room in items */
    const value *storage;           /* K_TENSOR */
    vtr_tensor t;                   /* K_STORAGE: dtype, data, shape[0] = numel;
                                       K_TENSOR: ndim and shape */
    int64_t stride[VTR_MAX_DIMS];   /* K_TENSOR */
};

typedef struct machine {
    const unsigned char *p;
    size_t len, pos, at; /* at: the byte of the opcode being run */
    unsigned char op;
    const vtr_zip *zip;
    const char *prefix;  /* "P/" of P/data.pkl */
    value **stack;
    size_t depth, stack_cap;
    size_t *marks;       /* stack depths at each MARK */
    size_t n_marks, marks_cap;
    value **memo;
    size_t n_memo, memo_cap;
    value **made;        /* every value, freed at the end */
    size_t n_made, made_cap;
    vtr_error *err;
} machine;

/* Grows *arr (of elements of `size` bytes) to room for `need`. */
static int reserve(void *arr, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 1;
    size_t n = *cap ? *cap : 16;
    while (n < need)
        n *= 2;
    if (n > SIZE_MAX / size)
        return 0;
    void *p = realloc(*(void **)arr, n * size);
    if (!p)
        return 0;
    *(void **)arr = p;
    *cap = n;
    return 1;
}

/* Prefixes err with "data.pkl: OPCODE (0xNN) at byte N" and returns status. */
static vtr_status at_op(const machine *m, vtr_status status)
{
    const char *op = op_names[m->op] ? op_names[m->op] : "an unknown opcode";
    vtr_error_context(m->err, "data.pkl: %s (0x%02x) at byte %zu", op, m->op, m->at);
    return status;
}

/* Fails the opcode being run: "data.pkl: OPCODE (0xNN) at byte N: <text>". */
#define FAIL(m, status, ...) at_op((m), vtr_fail((m)->err, (status), __VA_ARGS__))

static vtr_status no_memory(machine *m)
{
    return vtr_fail(m->err, VTR_ERR_NOMEM, "out of memory reading data.pkl");
}

static value *make(machine *m, kind k)
{
    value *v = calloc(1, sizeof *v);
    if (!v || !reserve(&m->made, &m->made_cap, m->n_made + 1, sizeof *m->made)) {
        free(v);
        return NULL;
    }
    m->made[m->n_made++] = v;
    v->kind = k;
    return v;
}

static vtr_status push(machine *m, value *v)
{
    if (!v || !reserve(&m->stack, &m->stack_cap, m->depth + 1, sizeof *m->stack))
        return no_memory(m);
    m->stack[m->depth++] = v;
    return VTR_OK;
}

static vtr_status push_new(machine *m, kind k, value **out)
{
    value *v = make(m, k);
    if (out)
        *out = v;
    return push(m, v);
}

/* The stack depth at the last MARK (0 without one): values below it are not the
 * current opcode's. */
static size_t stack_base(const machine *m)
{
    return m->n_marks ? m->marks[m->n_marks - 1] : 0;
}

static vtr_status pop(machine *m, value **out)
{
    if (m->depth <= stack_base(m))
        return FAIL(m, VTR_ERR_FORMAT, "the stack is empty%s", m->n_marks ? " above the mark" : "");
    *out = m->stack[--m->depth];
    return VTR_OK;
}

static vtr_status top(machine *m, value **out)
{
    if (m->depth <= stack_base(m))
        return FAIL(m, VTR_ERR_FORMAT, "the stack is empty%s", m->n_marks ? " above the mark" : "");
    *out = m->stack[m->depth - 1];
    return VTR_OK;
}

/* Pops the last MARK: the values above it are (*items)[0 .. *n), still in the stack's
 * array, which keeps them until the next push. */
static vtr_status pop_mark(machine *m, value ***items, size_t *n)
{
    if (!m->n_marks)
        return FAIL(m, VTR_ERR_FORMAT, "no MARK before it");
    size_t base = m->marks[--m->n_marks];
    *items = m->stack + base;
    *n = m->depth - base;
    m->depth = base;
    return VTR_OK;
}

static vtr_status need(machine *m, size_t n)
{
    if (m->len - m->pos < n)
        return FAIL(m, VTR_ERR_FORMAT, "truncated pickle: %zu bytes needed, %zu left", n,
                    m->len - m->pos);
    return VTR_OK;
}

static uint64_t take_le(machine *m, size_t n)
{
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;)
        v = (v << 8) | m->p[m->pos + i];
    m->pos += n;
    return v;
}

static vtr_status make_tuple(machine *m, value *const *items, size_t n)
{
    value *t = make(m, K_TUPLE);
    if (!t || !(t->items = malloc((n ? n : 1) * sizeof *t->items)))
        return no_memory(m);
    if (n)
        memcpy(t->items, items, n * sizeof *items);
    t->n = n;
    return push(m, t);
}

static vtr_status dict_set(machine *m, value *d, value *key, value *v)
{
    if (d->kind != K_DICT)
        return FAIL(m, VTR_ERR_UNSUPPORTED, "sets an item of %s, not of a dict", kind_names[d->kind]);
    if (!reserve(&d->items, &d->cap, 2 * d->n + 2, sizeof *d->items))
        return no_memory(m);
    d->items[2 * d->n] = key;
    d->items[2 * d->n + 1] = v;
    d->n++;
    return VTR_OK;
}

static vtr_status op_string(machine *m, size_t len_bytes)
{
    vtr_status st;
    if ((st = need(m, len_bytes)) != VTR_OK)
        return st;
    uint64_t n = take_le(m, len_bytes);
    if ((st = need(m, n)) != VTR_OK)
        return st;
    const char *s = (const char *)m->p + m->pos;
    if (!vtr_utf8_valid(s, n) || memchr(s, '\0', n))
        return FAIL(m, VTR_ERR_FORMAT, "a string of %llu bytes that is not UTF-8 without NUL",
                    (unsigned long long)n);
    m->pos += n;
    value *v;
    if ((st = push_new(m, K_STR, &v)) != VTR_OK)
        return st;
    v->s = s;
    v->n = n;
    return VTR_OK;
}

/* BININT1, BININT2 (unsigned), BININT (signed 32-bit), LONG1 (signed, n <= 8 bytes). */
static vtr_status op_int(machine *m, size_t bytes, int is_signed)
{
    vtr_status st;
    if (bytes == 0) { /* LONG1: its length first */
        if ((st = need(m, 1)) != VTR_OK)
            return st;
        bytes = m->p[m->pos++];
        if (bytes > 8)
            return FAIL(m, VTR_ERR_UNSUPPORTED, "an integer of %zu bytes (at most 8)", bytes);
    }
    if ((st = need(m, bytes)) != VTR_OK)
        return st;
    uint64_t u = take_le(m, bytes);
    int64_t v = (int64_t)u;
    if (is_signed && bytes > 0 && bytes < 8 && (u >> (8 * bytes - 1)) & 1)
        v = (int64_t)(u | ~((UINT64_C(1) << (8 * bytes)) - 1));
    value *x;
    if ((st = push_new(m, K_INT, &x)) != VTR_OK)
        return st;
    x->i = v;
    return VTR_OK;
}

static vtr_status op_global(machine *m)
{
    /* "module\nname\n" */
    const char *line[2];
    size_t line_len[2];
    for (int k = 0; k < 2; k++) {
        const char *s = (const char *)m->p + m->pos;
        const char *nl = memchr(s, '\n', m->len - m->pos);
        if (!nl)
            return FAIL(m, VTR_ERR_FORMAT, "truncated pickle: no end of line after GLOBAL");
        line[k] = s;
        line_len[k] = (size_t)(nl - s);
        m->pos += line_len[k] + 1;
    }
    for (size_t g = 0; g < N_GLOBALS; g++) {
        if (strlen(globals[g].module) == line_len[0] && strlen(globals[g].name) == line_len[1] &&
            !memcmp(globals[g].module, line[0], line_len[0]) &&
            !memcmp(globals[g].name, line[1], line_len[1])) {
            value *v;
            vtr_status st = push_new(m, K_GLOBAL, &v);
            if (st == VTR_OK)
                v->i = (int64_t)g;
            return st;
        }
    }
    char module[MAX_MESSAGE_NAME], name[MAX_MESSAGE_NAME];
    vtr_printable(line[0], line_len[0], module, sizeof module);
    vtr_printable(line[1], line_len[1], name, sizeof name);
    static const char storage[] = "Storage";
    size_t sl = sizeof storage - 1;
    if (!strcmp(module, "torch") && line_len[1] > sl &&
        !memcmp(line[1] + line_len[1] - sl, storage, sl))
        return FAIL(m, VTR_ERR_UNSUPPORTED, "storage type torch.%s is not supported (vtr reads "
                    "Float, Half, BFloat16, Byte, Int and Long storages)", name);
    return FAIL(m, VTR_ERR_UNSUPPORTED, "%s.%s is not allowed: a state_dict holds tensors, and "
                "vtr calls nothing a pickle names", module, name);
}

/* ('storage', storage type, key, location, numel) -> the storage: the entry P/data/KEY. */
static vtr_status op_persid(machine *m)
{
    vtr_status st;
    value *pid = NULL;
    if ((st = pop(m, &pid)) != VTR_OK)
        return st;
    value **a = pid->items;
    if (pid->kind != K_TUPLE || pid->n != 5 || a[0]->kind != K_STR || a[0]->n != 7 ||
        memcmp(a[0]->s, "storage", 7) != 0 || a[1]->kind != K_GLOBAL ||
        globals[a[1]->i].what != STORAGE_TYPE || a[2]->kind != K_STR || a[3]->kind != K_STR ||
        a[4]->kind != K_INT || a[4]->i < 0)
        return FAIL(m, VTR_ERR_UNSUPPORTED, "a persistent id that is not ('storage', storage "
                    "type, key, location, element count)");
    vtr_dtype dtype = globals[a[1]->i].dtype;
    char key[MAX_MESSAGE_NAME];
    vtr_printable(a[2]->s, a[2]->n, key, sizeof key);
    size_t plen = strlen(m->prefix);
    char *name = malloc(plen + 5 + a[2]->n + 1);
    if (!name)
        return no_memory(m);
    memcpy(name, m->prefix, plen);
    memcpy(name + plen, "data/", 5);
    memcpy(name + plen + 5, a[2]->s, a[2]->n);
    name[plen + 5 + a[2]->n] = '\0';
    const vtr_zip_entry *e = vtr_zip_find(m->zip, name);
    free(name);
    if (!e)
        return FAIL(m, VTR_ERR_FORMAT, "storage '%s' has no entry data/%s in the archive", key, key);
    size_t esize = vtr_dtype_size(dtype);
    if ((uint64_t)a[4]->i > SIZE_MAX / esize || (size_t)a[4]->i * esize != e->size)
        return FAIL(m, VTR_ERR_FORMAT, "storage '%s' of %lld %s elements, but data/%s holds %zu "
                    "bytes", key, (long long)a[4]->i, vtr_dtype_name(dtype), key, e->size);
    value *s;
    if ((st = push_new(m, K_STORAGE, &s)) != VTR_OK)
        return st;
    s->s = a[2]->s;
    s->n = a[2]->n;
    s->t.dtype = dtype;
    s->t.ndim = 1;
    s->t.shape[0] = a[4]->i;
    s->t.data = (void *)(uintptr_t)e->data;
    return VTR_OK;
}

static int is_empty_dict(const value *v)
{
    return v->kind == K_DICT && v->n == 0;
}

/* _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks [, metadata]):
 * the view is checked against its storage once its name is known (check_tensor). */
static vtr_status rebuild_tensor(machine *m, const value *args)
{
    value **a = args->items;
    if (args->n < 6 || args->n > 7 || a[0]->kind != K_STORAGE || a[1]->kind != K_INT ||
        a[1]->i < 0 || a[2]->kind != K_TUPLE || a[3]->kind != K_TUPLE || a[2]->n != a[3]->n ||
        a[4]->kind != K_BOOL || !is_empty_dict(a[5]) ||
        (args->n == 7 && a[6]->kind != K_NONE && a[6]->kind != K_DICT))
        return FAIL(m, VTR_ERR_UNSUPPORTED, "_rebuild_tensor_v2 with arguments other than "
                    "(storage, offset, size, stride, requires_grad, no hooks[, metadata])");
    if (a[2]->n > VTR_MAX_DIMS)
        return FAIL(m, VTR_ERR_UNSUPPORTED, "a tensor of %zu dimensions (vtr handles at most %d)",
                    a[2]->n, VTR_MAX_DIMS);
    vtr_status st;
    value *t;
    if ((st = push_new(m, K_TENSOR, &t)) != VTR_OK)
        return st;
    t->storage = a[0];
    t->i = a[1]->i;
    t->t.dtype = a[0]->t.dtype;
    t->t.ndim = (int)a[2]->n;
    for (size_t d = 0; d < a[2]->n; d++) {
        const value *size = a[2]->items[d], *stride = a[3]->items[d];
        if (size->kind != K_INT || stride->kind != K_INT)
            return FAIL(m, VTR_ERR_FORMAT, "a tensor's size or stride is not a tuple of ints");
        t->t.shape[d] = size->i;
        t->stride[d] = stride->i;
    }
    return VTR_OK;
}

static vtr_status op_reduce(machine *m)
{
    vtr_status st;
    value *args = NULL, *f = NULL;
    if ((st = pop(m, &args)) != VTR_OK || (st = pop(m, &f)) != VTR_OK)
        return st;
    if (f->kind != K_GLOBAL || globals[f->i].what == STORAGE_TYPE)
        return FAIL(m, VTR_ERR_UNSUPPORTED, "calls %s", f->kind == K_GLOBAL
                                                            ? "a storage type"
                                                            : kind_names[f->kind]);
    if (args->kind != K_TUPLE)
        return FAIL(m, VTR_ERR_FORMAT, "arguments are %s, not a tuple", kind_names[args->kind]);
    switch (globals[f->i].what) {
    case ORDERED_DICT:
        if (args->n)
            return FAIL(m, VTR_ERR_UNSUPPORTED, "OrderedDict with arguments");
        return push_new(m, K_DICT, NULL);
    case REBUILD_TENSOR:
        return rebuild_tensor(m, args);
    default: /* REBUILD_PARAMETER(tensor, requires_grad, hooks): the tensor */
        if (args->n != 3 || args->items[0]->kind != K_TENSOR ||
            args->items[1]->kind != K_BOOL || !is_empty_dict(args->items[2]))
            return FAIL(m, VTR_ERR_UNSUPPORTED, "_rebuild_parameter with arguments other than "
                        "(tensor, requires_grad, no hooks)");
        return push(m, args->items[0]);
    }
}

static vtr_status op_memo(machine *m, size_t bytes, int put)
{
    vtr_status st;
    if ((st = need(m, bytes)) != VTR_OK)
        return st;
    uint64_t slot = take_le(m, bytes);
    if (!put) {
        if (slot >= m->n_memo)
            return FAIL(m, VTR_ERR_FORMAT, "memo slot %llu is empty", (unsigned long long)slot);
        return push(m, m->memo[slot]);
    }
    value *v;
    if ((st = top(m, &v)) != VTR_OK)
        return st;
    /* pickle numbers the memo from 0 without gaps */
    if (slot > m->n_memo)
        return FAIL(m, VTR_ERR_FORMAT, "memo slot %llu skips slot %zu", (unsigned long long)slot,
                    m->n_memo);
    if (slot == m->n_memo) {
        if (!reserve(&m->memo, &m->memo_cap, m->n_memo + 1, sizeof *m->memo))
            return no_memory(m);
        m->n_memo++;
    }
    m->memo[slot] = v;
    return VTR_OK;
}

/* Runs one opcode at m->pos. *stop is set by STOP. */
static vtr_status step(machine *m, int *stop)
{
    vtr_status st;
    value *v = NULL, *k = NULL, *d = NULL, **items = NULL;
    size_t n = 0;
    m->at = m->pos;
    m->op = m->p[m->pos++];
    switch (m->op) {
    case 0x80: /* PROTO */
        if ((st = need(m, 1)) != VTR_OK)
            return st;
        if (m->at != 0 || m->p[m->pos] < 2 || m->p[m->pos] > 5)
            return FAIL(m, VTR_ERR_UNSUPPORTED, "protocol %u%s", m->p[m->pos],
                        m->at ? " after the start" : "");
        m->pos++;
        return VTR_OK;
    case '.': /* STOP */
        *stop = 1;
        return VTR_OK;
    case '(': /* MARK */
        if (!reserve(&m->marks, &m->marks_cap, m->n_marks + 1, sizeof *m->marks))
            return no_memory(m);
        m->marks[m->n_marks++] = m->depth;
        return VTR_OK;
    case '}': return push_new(m, K_DICT, NULL);       /* EMPTY_DICT */
    case ')': return make_tuple(m, NULL, 0);          /* EMPTY_TUPLE */
    case 'N': return push_new(m, K_NONE, NULL);       /* NONE */
    case 0x88: /* NEWTRUE */
    case 0x89: /* NEWFALSE */
        if ((st = push_new(m, K_BOOL, &v)) == VTR_OK)
            v->i = m->op == 0x88;
        return st;
    case 't': /* TUPLE */
        if ((st = pop_mark(m, &items, &n)) != VTR_OK)
            return st;
        return make_tuple(m, items, n);
    case 0x85: /* TUPLE1 */
    case 0x86: /* TUPLE2 */
    case 0x87: /* TUPLE3 */
        n = (size_t)(m->op - 0x84);
        if (m->depth - stack_base(m) < n)
            return FAIL(m, VTR_ERR_FORMAT, "%zu values needed on the stack, %zu there", n,
                        m->depth - stack_base(m));
        m->depth -= n;
        return make_tuple(m, m->stack + m->depth, n);
    case 'X': return op_string(m, 4);                 /* BINUNICODE */
    case 0x8c: return op_string(m, 1);                /* SHORT_BINUNICODE */
    case 'K': return op_int(m, 1, 0);                 /* BININT1 */
    case 'M': return op_int(m, 2, 0);                 /* BININT2 */
    case 'J': return op_int(m, 4, 1);                 /* BININT */
    case 0x8a: return op_int(m, 0, 1);                /* LONG1 */
    case 'G': /* BINFLOAT: its value matters to nothing vtr reads */
        if ((st = need(m, 8)) != VTR_OK)
            return st;
        m->pos += 8;
        return push_new(m, K_FLOAT, NULL);
    case 'q': return op_memo(m, 1, 1);                /* BINPUT */
    case 'r': return op_memo(m, 4, 1);                /* LONG_BINPUT */
    case 'h': return op_memo(m, 1, 0);                /* BINGET */
    case 'j': return op_memo(m, 4, 0);                /* LONG_BINGET */
    case 'c': return op_global(m);                    /* GLOBAL */
    case 'R': return op_reduce(m);                    /* REDUCE */
    case 'Q': return op_persid(m);                    /* BINPERSID */
    case 's': /* SETITEM */
        if ((st = pop(m, &v)) != VTR_OK || (st = pop(m, &k)) != VTR_OK ||
            (st = top(m, &d)) != VTR_OK)
            return st;
        return dict_set(m, d, k, v);
    case 'u': /* SETITEMS */
        if ((st = pop_mark(m, &items, &n)) != VTR_OK || (st = top(m, &d)) != VTR_OK)
            return st;
        if (n % 2)
            return FAIL(m, VTR_ERR_FORMAT, "an odd number of values (%zu) for key-value pairs", n);
        for (size_t i = 0; i < n; i += 2)
            if ((st = dict_set(m, d, items[i], items[i + 1])) != VTR_OK)
                return st;
        return VTR_OK;
    case 'b': /* BUILD: a dict's attributes (a state_dict's _metadata), ignored */
        if ((st = pop(m, &v)) != VTR_OK || (st = top(m, &d)) != VTR_OK)
            return st;
        if (d->kind != K_DICT || v->kind != K_DICT)
            return FAIL(m, VTR_ERR_UNSUPPORTED, "sets the state of %s to %s (vtr reads the "
                        "attributes of a dict only)", kind_names[d->kind], kind_names[v->kind]);
        return VTR_OK;
    default:
        return FAIL(m, VTR_ERR_UNSUPPORTED, "not in the subset of pickle that torch.save writes "
                    "for a state_dict");
    }
}

/* Runs the pickle to its STOP; *root is the object saved. */
static vtr_status run(machine *m, value **root)
{
    vtr_status st;
    int stop = 0;
    while (!stop) {
        if (m->pos == m->len)
            return vtr_fail(m->err, VTR_ERR_FORMAT, "data.pkl: truncated pickle: it ends at "
                            "byte %zu without STOP", m->len);
        if ((st = step(m, &stop)) != VTR_OK)
            return st;
    }
    if (m->n_marks || m->depth != 1)
        return FAIL(m, VTR_ERR_FORMAT, "%zu values and %zu marks left on the stack (1 and 0 "
                    "expected)", m->depth, m->n_marks);
    if (m->pos != m->len)
        return FAIL(m, VTR_ERR_FORMAT, "%zu bytes after STOP", m->len - m->pos);
    *root = m->stack[0];
    return VTR_OK;
}

/* The view of tensor `name` within its storage: contiguous and inside it. */
static vtr_status check_tensor(const value *t, const char *name, vtr_tensor *out, vtr_error *err)
{
    size_t nbytes;
    vtr_status st = vtr_shape_nbytes(t->t.dtype, t->t.ndim, t->t.shape, SIZE_MAX, &nbytes, err);
    if (st != VTR_OK) {
        vtr_error_context(err, "tensor '%s'", name);
        return VTR_ERR_FORMAT;
    }
    size_t esize = vtr_dtype_size(t->t.dtype), numel = nbytes / esize;
    const value *s = t->storage;
    char shape[200], stride[200];
    if (numel > 0) {
        uint64_t expected = 1; /* the product of the later sizes: at most numel */
        for (int d = t->t.ndim - 1; d >= 0; d--) {
            if (t->t.shape[d] != 1 && (t->stride[d] < 0 || (uint64_t)t->stride[d] != expected))
                return vtr_fail(err, VTR_ERR_UNSUPPORTED, "tensor '%s' is not contiguous: size "
                                "%s, stride %s", name,
                                vtr_shape_str(t->t.ndim, t->t.shape, shape, sizeof shape),
                                vtr_shape_str(t->t.ndim, t->stride, stride, sizeof stride));
            expected *= (uint64_t)t->t.shape[d];
        }
        if ((uint64_t)t->i > (uint64_t)s->t.shape[0] ||
            numel > (uint64_t)s->t.shape[0] - (uint64_t)t->i) {
            char key[MAX_MESSAGE_NAME];
            return vtr_fail(err, VTR_ERR_FORMAT, "tensor '%s' (offset %lld, size %s) runs past "
                            "the end of its storage '%s' of %lld elements", name, (long long)t->i,
                            vtr_shape_str(t->t.ndim, t->t.shape, shape, sizeof shape),
                            vtr_printable(s->s, s->n, key, sizeof key),
                            (long long)s->t.shape[0]);
        }
    }
    *out = t->t;
    out->data = (unsigned char *)s->t.data + (numel ? (size_t)t->i * esize : 0);
    return VTR_OK;
}

/* The object saved as the table: a dict of names to tensors. */
static vtr_status collect(const value *root, vtr_safetensors *out, vtr_error *err)
{
    if (root->kind != K_DICT)
        return vtr_fail(err, VTR_ERR_FORMAT, "the object saved is %s, not a dict of tensors "
                        "(a state_dict)", kind_names[root->kind]);
    if (!(out->entries = calloc(root->n ? root->n : 1, sizeof *out->entries)))
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for %zu tensors", root->n);
    for (size_t i = 0; i < root->n; i++) {
        const value *key = root->items[2 * i], *v = root->items[2 * i + 1];
        if (key->kind != K_STR || key->n == 0)
            return vtr_fail(err, VTR_ERR_FORMAT, "a key of the state_dict is %s, not a name",
                            key->kind == K_STR ? "empty" : kind_names[key->kind]);
        char name[MAX_MESSAGE_NAME];
        vtr_printable(key->s, key->n, name, sizeof name);
        if (v->kind != K_TENSOR)
            return vtr_fail(err, VTR_ERR_FORMAT, "'%s' holds %s, not a tensor: vtr reads a "
                            "state_dict (torch.save(model.state_dict()))", name,
                            kind_names[v->kind]);
        vtr_safetensors_entry *e = &out->entries[out->count];
        vtr_status st = check_tensor(v, name, &e->tensor, err);
        if (st != VTR_OK)
            return st;
        if (!(e->name = strndup(key->s, key->n)))
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for tensor '%s'", name);
        out->count++;
    }
    return vtr_safetensors_index(out, err);
}

/* P/ of the one P/data.pkl; NULL (with err set) when there is none or several. */
static vtr_status find_prefix(const vtr_zip *zip, char **prefix, const vtr_zip_entry **pickle,
                              vtr_error *err)
{
    static const char pkl[] = "/data.pkl";
    size_t pl = sizeof pkl - 1;
    *pickle = NULL;
    for (size_t i = 0; i < zip->count; i++) {
        const char *name = zip->entries[i].name;
        size_t len = strlen(name);
        if (len <= pl || strcmp(name + len - pl, pkl) != 0 || memchr(name, '/', len - pl))
            continue;
        if (*pickle)
            return vtr_fail(err, VTR_ERR_FORMAT, "two data.pkl in the archive");
        *pickle = &zip->entries[i];
    }
    if (!*pickle)
        return vtr_fail(err, VTR_ERR_FORMAT, "no FOLDER/data.pkl: a zip archive, but not one "
                        "that torch.save wrote");
    const char *name = (*pickle)->name;
    if (!(*prefix = strndup(name, strlen(name) - pl + 1)))
        return vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
    return VTR_OK;
}

vtr_status vtr_pth_parse(const void *buf, size_t len, vtr_safetensors *out, vtr_error *err)
{
    memset(out, 0, sizeof *out);
    vtr_zip zip;
    machine m = {.err = err};
    char *prefix = NULL, *byteorder = NULL;
    const vtr_zip_entry *pickle;
    vtr_status st = vtr_zip_parse(buf, len, &zip, err);
    if (st != VTR_OK)
        return st;
    if ((st = find_prefix(&zip, &prefix, &pickle, err)) != VTR_OK)
        goto end;
    if (!(byteorder = malloc(strlen(prefix) + sizeof "byteorder"))) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "out of memory");
        goto end;
    }
    sprintf(byteorder, "%sbyteorder", prefix);
    const vtr_zip_entry *order = vtr_zip_find(&zip, byteorder);
    if (order && (order->size != 6 || memcmp(order->data, "little", 6) != 0)) {
        char shown[32];
        st = vtr_fail(err, VTR_ERR_UNSUPPORTED, "byteorder '%s': vtr reads little-endian "
                      "storages", vtr_printable((const char *)order->data, order->size, shown,
                                                sizeof shown));
        goto end;
    }
    m.p = pickle->data;
    m.len = pickle->size;
    m.zip = &zip;
    m.prefix = prefix;
    value *root = NULL;
    if ((st = run(&m, &root)) != VTR_OK || (st = collect(root, out, err)) != VTR_OK)
        goto end;
end:
    if (st != VTR_OK)
        vtr_safetensors_close(out);
    for (size_t i = 0; i < m.n_made; i++) {
        free(m.made[i]->items);
        free(m.made[i]);
    }
    free(m.made);
    free(m.stack);
    free(m.marks);
    free(m.memo);
    free(prefix);
    free(byteorder);
    vtr_zip_close(&zip);
    return st;
}
