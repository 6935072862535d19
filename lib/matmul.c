/* Matrix products in float32 or bfloat16; the contract is in matmul.h.
 *
 * bfloat16: each operand is rounded into a compact buffer of the calling thread, as it is
 * stored (a transposed operand stays transposed: oneDNN reads it through strides), and one
 * oneDNN matmul primitive per shape multiplies them: alpha as its output scale, beta as a
 * sum post-op. Primitives, their stream and the buffers are per thread (the two BiGRU
 * directions multiply at the same time), the primitives kept in a small cache per thread,
 * since a GRU asks for the same few shapes at every step. */
#include "matmul.h"

#include <dnnl.h>
#include <dnnl_debug.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensor.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define TARGET_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#endif

#define CACHE_SIZE 64 /* primitives kept per thread: a GRU step's shapes, and the rest */

typedef struct shape {
    int M, N, K, ldc;
    CBLAS_TRANSPOSE ta, tb;
    float alpha, beta;
} shape;

typedef struct cached {
    shape key;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t a, b, c;
} cached;

typedef struct buffer {
    uint16_t *p;
    size_t cap; /* elements */
} buffer;

typedef struct thread_state {
    dnnl_stream_t stream;
    cached cache[CACHE_SIZE];
    int n_cached, next_evict;
    buffer a, b, held;
} thread_state;

static _Atomic int precision = VTR_PRECISION_F32;
static atomic_int_fast64_t fallbacks;
static dnnl_engine_t engine;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;
static pthread_key_t state_key;
static _Thread_local thread_state *state;

bool vtr_matmul_have_bf16(void)
{
    /* the ISAs are bit sets, each including the ones below it */
    unsigned isa = (unsigned)dnnl_get_effective_cpu_isa(), bf16 = dnnl_cpu_isa_avx512_core_bf16;
    return (isa & bf16) == bf16;
}

/* "avx512_core_amx" for dnnl_cpu_isa_avx512_core_amx */
static const char *isa_name(void)
{
    const char *isa = dnnl_cpu_isa2str(dnnl_get_effective_cpu_isa());
    return strncmp(isa, "cpu_isa_", 8) == 0 ? isa + 8 : isa;
}

const char *vtr_matmul_report(void)
{
    static char line[128];
    const dnnl_version_t *v = dnnl_version();
    snprintf(line, sizeof line, "bfloat16 products: oneDNN %d.%d.%d, ISA %s%s", v->major, v->minor,
             v->patch, isa_name(), vtr_matmul_have_bf16() ? "" : " (not native: off)");
    return line;
}

vtr_precision vtr_matmul_use(vtr_precision p)
{
    if ((p == VTR_PRECISION_BF16 && !vtr_matmul_have_bf16()) || p == VTR_PRECISION_TF32)
        p = VTR_PRECISION_F32;
    return (vtr_precision)atomic_exchange(&precision, (int)p);
}

vtr_precision vtr_matmul_precision(void)
{
    return (vtr_precision)atomic_load(&precision);
}

vtr_status vtr_matmul_check(vtr_precision p, vtr_error *err)
{
    if (p == VTR_PRECISION_TF32)
        return vtr_fail(err, VTR_ERR_UNSUPPORTED,
                        "tf32 products are a GPU's (train.device cuda); a CPU has none");
    if (p == VTR_PRECISION_BF16 && !vtr_matmul_have_bf16())
        return vtr_fail(err, VTR_ERR_UNSUPPORTED,
                        "bfloat16 products need a CPU with AVX512-BF16 or AMX (oneDNN runs this "
                        "one with %s, where it would emulate them, slower than float32)",
                        isa_name());
    return VTR_OK;
}

int64_t vtr_matmul_fallbacks(void)
{
    return (int64_t)atomic_load(&fallbacks);
}

/* ---- per-thread state ---- */

static void state_free(void *p)
{
    thread_state *s = p;
    for (int i = 0; i < s->n_cached; i++)
        dnnl_primitive_destroy(s->cache[i].prim);
    if (s->stream)
        dnnl_stream_destroy(s->stream);
    free(s->a.p);
    free(s->b.p);
    free(s->held.p);
    free(s);
}

static void engine_init(void)
{
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success)
        engine = NULL;
    pthread_key_create(&state_key, state_free);
}

/* This thread's state, made on first use; NULL when oneDNN cannot start. */
static thread_state *thread_state_get(void)
{
    if (state)
        return state;
    pthread_once(&engine_once, engine_init);
    if (!engine)
        return NULL;
    thread_state *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    if (dnnl_stream_create(&s->stream, engine, dnnl_stream_default_flags) != dnnl_success) {
        free(s);
        return NULL;
    }
    pthread_setspecific(state_key, s); /* freed when the thread ends */
    return state = s;
}

static uint16_t *buffer_reserve(buffer *b, size_t n)
{
    if (n > b->cap) {
        uint16_t *p = malloc(n * sizeof *p);
        if (!p)
            return NULL;
        free(b->p);
        b->p = p;
        b->cap = n;
    }
    return b->p;
}

/* ---- rounding to bfloat16 ---- */

#ifdef TARGET_BF16
/* dst (rows, cols), compact = src (rows, cols) with row stride ld, rounded to nearest even
 * (only called where vtr_matmul_have_bf16: the CPU has AVX512-BF16). */
TARGET_BF16 static void round_rows(uint16_t *dst, const float *src, int rows, int cols, int ld)
{
    for (int r = 0; r < rows; r++) {
        const float *s = src + (size_t)r * ld;
        uint16_t *d = dst + (size_t)r * cols;
        int c = 0;
        for (; c + 32 <= cols; c += 32) {
            __m512bh b = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(s + c + 16), _mm512_loadu_ps(s + c));
            _mm512_storeu_si512((void *)(d + c), (__m512i)b);
        }
        for (; c < cols; c += 16) {
            __mmask16 m = cols - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (cols - c)) - 1);
            __m256bh b = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, s + c));
            _mm256_mask_storeu_epi16(d + c, m, (__m256i)b);
        }
    }
}
#else
static void round_rows(uint16_t *dst, const float *src, int rows, int cols, int ld)
{
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < cols; c++)
            dst[(size_t)r * cols + c] = vtr_float_to_bf16(src[(size_t)r * ld + c]);
}
#endif

/* The rounded copy of a (rows, cols) operand in buf; NULL when out of memory. */
static const uint16_t *round_operand(buffer *buf, const float *src, int rows, int cols, int ld)
{
    uint16_t *dst = buffer_reserve(buf, (size_t)rows * cols);
    if (dst)
        round_rows(dst, src, rows, cols, ld);
    return dst;
}

/* ---- oneDNN ---- */

static bool shape_equal(const shape *a, const shape *b)
{
    return a->M == b->M && a->N == b->N && a->K == b->K && a->ldc == b->ldc && a->ta == b->ta &&
           a->tb == b->tb && a->alpha == b->alpha && a->beta == b->beta;
}

/* A (M,K) stored (M,K) or, transposed, (K,M); compact either way. */
static dnnl_status_t operand_md(dnnl_memory_desc_t *md, int rows, int cols, bool transposed,
                                dnnl_data_type_t dt, int ld)
{
    dnnl_dims_t dims = {rows, cols};
    dnnl_dims_t strides = {transposed ? 1 : ld, transposed ? ld : 1};
    return dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides);
}

static dnnl_status_t create(cached *e, const shape *k)
{
    bool ta = k->ta == CblasTrans, tb = k->tb == CblasTrans;
    dnnl_status_t s;
    dnnl_matmul_desc_t desc;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    if ((s = operand_md(&e->a, k->M, k->K, ta, dnnl_bf16, ta ? k->M : k->K)) ||
        (s = operand_md(&e->b, k->K, k->N, tb, dnnl_bf16, tb ? k->K : k->N)) ||
        (s = operand_md(&e->c, k->M, k->N, false, dnnl_f32, k->ldc)) ||
        (s = dnnl_matmul_desc_init(&desc, &e->a, &e->b, NULL, &e->c)) ||
        (s = dnnl_primitive_attr_create(&attr)))
        goto end;
    if (k->alpha != 1.0f && (s = dnnl_primitive_attr_set_output_scales(attr, 1, 0, &k->alpha)))
        goto end;
    if (k->beta != 0.0f &&
        ((s = dnnl_post_ops_create(&po)) || (s = dnnl_post_ops_append_sum(po, k->beta)) ||
         (s = dnnl_primitive_attr_set_post_ops(attr, po))))
        goto end;
    if ((s = dnnl_primitive_desc_create(&pd, &desc, attr, engine, NULL)) ||
        (s = dnnl_primitive_create(&e->prim, pd)))
        goto end;
    e->key = *k;
end:
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (po)
        dnnl_post_ops_destroy(po);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return s;
}

/* The primitive for k, from the cache or made (evicting the oldest when full). */
static cached *primitive_for(thread_state *t, const shape *k)
{
    for (int i = 0; i < t->n_cached; i++)
        if (shape_equal(&t->cache[i].key, k))
            return &t->cache[i];
    cached fresh;
    if (create(&fresh, k) != dnnl_success)
        return NULL;
    int slot;
    if (t->n_cached < CACHE_SIZE) {
        slot = t->n_cached++;
    } else {
        slot = t->next_evict++ % CACHE_SIZE;
        dnnl_primitive_destroy(t->cache[slot].prim);
    }
    t->cache[slot] = fresh;
    return &t->cache[slot];
}

static dnnl_status_t run(cached *e, thread_state *t, const uint16_t *a, const uint16_t *b, float *c)
{
    dnnl_memory_t ma = NULL, mb = NULL, mc = NULL;
    dnnl_status_t s;
    if (!(s = dnnl_memory_create(&ma, &e->a, engine, (void *)a)) &&
        !(s = dnnl_memory_create(&mb, &e->b, engine, (void *)b)) &&
        !(s = dnnl_memory_create(&mc, &e->c, engine, c))) {
        dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}};
        if (!(s = dnnl_primitive_execute(e->prim, t->stream, 3, args)))
            s = dnnl_stream_wait(t->stream);
    }
    dnnl_memory_destroy(ma);
    dnnl_memory_destroy(mb);
    dnnl_memory_destroy(mc);
    return s;
}

/* The bfloat16 product; false (C untouched) when oneDNN or memory failed. */
static bool matmul_bf16(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
                        const float *A, int lda, const vtr_matmul_operand *B, float beta, float *C,
                        int ldc)
{
    thread_state *t = thread_state_get();
    if (!t)
        return false;
    bool trans_a = ta == CblasTrans, trans_b = tb == CblasTrans;
    const uint16_t *a = round_operand(&t->a, A, trans_a ? K : M, trans_a ? M : K, lda);
    const uint16_t *b =
        B->bf16 ? B->bf16 : round_operand(&t->b, B->f32, trans_b ? N : K, trans_b ? K : N, B->ld);
    shape k = {M, N, K, ldc, ta, tb, alpha, beta};
    cached *e = a && b ? primitive_for(t, &k) : NULL;
    return e && run(e, t, a, b, C) == dnnl_success;
}

void vtr_matmul_held(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
                     const float *A, int lda, const vtr_matmul_operand *B, float beta, float *C,
                     int ldc)
{
    if (M <= 0 || N <= 0)
        return;
    if (K > 0 && vtr_matmul_precision() == VTR_PRECISION_BF16) {
        if (matmul_bf16(ta, tb, M, N, K, alpha, A, lda, B, beta, C, ldc))
            return;
        atomic_fetch_add(&fallbacks, 1);
    }
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B->f32, B->ld, beta, C, ldc);
}

void vtr_matmul(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha,
                const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    vtr_matmul_operand b = {B, ldb, NULL};
    vtr_matmul_held(ta, tb, M, N, K, alpha, A, lda, &b, beta, C, ldc);
}

vtr_matmul_operand vtr_matmul_hold(const float *B, int rows, int cols, int ld)
{
    vtr_matmul_operand op = {B, ld, NULL};
    if (vtr_matmul_precision() != VTR_PRECISION_BF16)
        return op;
    thread_state *t = thread_state_get();
    if (t)
        op.bf16 = round_operand(&t->held, B, rows, cols, ld);
    return op;
}
