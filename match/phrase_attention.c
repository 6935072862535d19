#include "phrase_attention.h"

#include <string.h>

#include "lib/embedding.h"
#include "lib/matmul.h"
#include "lib/norm.h"

/* Workspace, written by the forward (floats):
 *   g        (Bc*P, Bv*T)  frame-phrase cosines, row (c, p), column (v, t); 0 in the rows
 *                          of the phrases past n_phrases
 *   w        (Bc*P, Bv*T)  attention weights, the same layout, 0 at padded frames
 *   gram     (Bv,T,T)      frames' Gram matrices in double (the real len x len block)
 *   nv       (Bv*T)        frames' cosine norms sqrt(|x|^2 + 1e-18)
 *   np       (Bc*P)        phrases' cosine norms sqrt(|x|^2 + 1e-18)
 *   pnorm    (Bc*P)        max(|phrase|, 1e-10), the final l2norm's
 *   cnorm, att_norm, sim (Bv,Bc,P): the clamped cosines' norm, |attended|, the phrase's sim
 *   valid    (Bc*P + 1)    int: the rows (c, p) of the valid phrases, ascending, then their
 *                          count nr; the products run over these rows only
 *   packed   (Bc*P, D)     the valid phrases' rows, packed
 * Scratch of the backward (floats):
 *   dg       (Bc*P, Bv*T)  d/d g, then d/d R (R = phrases · vidᵀ)
 *   dw       (Bv*Bc, T)    one row per pair, vtr_phrase_attention_backward_one's scratch
 *   du_coef, dgram_coef, gg (Bv,Bc,P): the pair's coefficients; gg = sum_t dg g
 *   M        (Bv,T,T)      sum over (c, p) of dgram_coef w wᵀ
 *   dnv      (Bv*T), dnp (Bc*P): the norms' coefficients
 *   dg_packed (Bc*P, Bv*T), dp_packed (Bc*P, D): the valid rows of dg, and their dphrases */
typedef struct {
    size_t g, w, gram, nv, np, pnorm, cnorm, att_norm, sim, valid, packed, total;
} workspace_layout;

typedef struct {
    size_t dg, dw, du_coef, dgram_coef, gg, M, dnv, dnp, dg_packed, dp_packed, total;
} scratch_layout;

static size_t floats(size_t n)
{
    return vtr_workspace_align(sizeof(float) * n);
}

static workspace_layout workspace_layout_of(int Bv, int Bc, int T, int P, int D)
{
    size_t big = (size_t)Bc * P * Bv * T, pairs = (size_t)Bv * Bc * P;
    workspace_layout l;
    l.g = 0;
    l.w = l.g + floats(big);
    l.gram = l.w + floats(big);
    l.nv = l.gram + vtr_workspace_align(sizeof(double) * Bv * T * T);
    l.np = l.nv + floats((size_t)Bv * T);
    l.pnorm = l.np + floats((size_t)Bc * P);
    l.cnorm = l.pnorm + floats((size_t)Bc * P);
    l.att_norm = l.cnorm + floats(pairs);
    l.sim = l.att_norm + floats(pairs);
    l.valid = l.sim + floats(pairs);
    l.packed = l.valid + vtr_workspace_align(sizeof(int) * ((size_t)Bc * P + 1));
    l.total = l.packed + floats((size_t)Bc * P * D);
    return l;
}

static scratch_layout scratch_layout_of(int Bv, int Bc, int T, int P, int D)
{
    size_t big = (size_t)Bc * P * Bv * T, pairs = (size_t)Bv * Bc * P;
    scratch_layout l;
    l.dg = 0;
    l.dw = l.dg + floats(big);
    l.du_coef = l.dw + floats((size_t)Bv * Bc * T);
    l.dgram_coef = l.du_coef + floats(pairs);
    l.gg = l.dgram_coef + floats(pairs);
    l.M = l.gg + floats(pairs);
    l.dnv = l.M + floats((size_t)Bv * T * T);
    l.dnp = l.dnv + floats((size_t)Bv * T);
    l.dg_packed = l.dnp + floats((size_t)Bc * P);
    l.dp_packed = l.dg_packed + floats(big);
    l.total = l.dp_packed + floats((size_t)Bc * P * D);
    return l;
}

size_t vtr_phrase_attention_workspace_size(int Bv, int Bc, int T, int P, int D)
{
    return workspace_layout_of(Bv, Bc, T, P, D).total;
}

size_t vtr_phrase_attention_scratch_size(int Bv, int Bc, int T, int P, int D)
{
    return scratch_layout_of(Bv, Bc, T, P, D).total;
}

#define REGION(base, offset) ((float *)((char *)(base) + (offset)))
#define CREGION(base, offset) ((const float *)((const char *)(base) + (offset)))

/* The cosine norm sqrt(|x|^2 + 1e-18) of each row of x (N,D); with clamped not NULL, also
 * the l2norm's max(|x|, 1e-10). */
static void row_norms(float *cosine_norm, float *clamped, const float *x, long N, int D)
{
#pragma omp parallel for schedule(static) if (N * D > 65536)
    for (long n = 0; n < N; n++) {
        double ss = vtr_row_sum_squares(x + n * D, D);
        cosine_norm[n] = (float)sqrt(ss + VTR_PHRASE_ATTENTION_COSINE_EPS);
        if (clamped) {
            float norm = (float)sqrt(ss);
            clamped[n] = norm > VTR_PHRASE_ATTENTION_NORM_MIN ? norm : VTR_PHRASE_ATTENTION_NORM_MIN;
        }
    }
}

void vtr_phrase_attention_score_forward(float *scores, void *workspace, const float *vid,
                                        const int *vid_lengths, const float *phrases,
                                        const int *n_phrases, int Bv, int Bc, int T, int P, int D,
                                        float sigma)
{
    workspace_layout l = workspace_layout_of(Bv, Bc, T, P, D);
    float *g = REGION(workspace, l.g), *w = REGION(workspace, l.w);
    double *gram = (double *)((char *)workspace + l.gram);
    float *nv = REGION(workspace, l.nv);
    float *np = REGION(workspace, l.np), *pnorm = REGION(workspace, l.pnorm);
    float *cnorm = REGION(workspace, l.cnorm), *att_norm = REGION(workspace, l.att_norm);
    float *sim = REGION(workspace, l.sim), *packed = REGION(workspace, l.packed);
    int *valid = (int *)((char *)workspace + l.valid);
    long VT = (long)Bv * T, CP = (long)Bc * P;

    row_norms(nv, NULL, vid, VT, D);
    row_norms(np, pnorm, phrases, CP, D);
    /* the frame-phrase products of the block's valid phrases (packed; w holds them until
     * the weights are written), then cosine_sim's division */
    int nr = 0;
    for (int c = 0; c < Bc; c++)
        for (int p = 0; p < n_phrases[c]; p++)
            valid[nr++] = c * P + p;
    valid[CP] = nr;
    vtr_embedding_forward(packed, valid, phrases, nr, D);
    if (nr > 0)
        vtr_matmul(CblasNoTrans, CblasTrans, nr, (int)VT, D, 1.0f, packed, D, vid, D, 0.0f, w,
                   (int)VT);
    memset(g, 0, sizeof(float) * (size_t)CP * VT);
    vtr_embedding_backward(g, w, valid, nr, (int)VT);
#pragma omp parallel for schedule(static) if (CP * VT > 65536)
    for (long cp = 0; cp < CP; cp++)
        for (long vt = 0; vt < VT; vt++)
            g[cp * VT + vt] /= np[cp] * nv[vt];
    /* |attended| comes from the Gram matrix of the video's real frames */
#pragma omp parallel for schedule(static) if (VT * T * D > 65536)
    for (int v = 0; v < Bv; v++) {
        const float *x = vid + (size_t)v * T * D;
        double *K = gram + (size_t)v * T * T;
        for (int t = 0; t < vid_lengths[v]; t++)
            for (int u = 0; u <= t; u++) {
                double dot = 0.0;
                for (int d = 0; d < D; d++)
                    dot += (double)x[(size_t)t * D + d] * x[(size_t)u * D + d];
                K[t * T + u] = K[u * T + t] = dot;
            }
    }

#pragma omp parallel for collapse(2) schedule(static) if ((long)Bv * Bc * P * T > 4096)
    for (int v = 0; v < Bv; v++)
        for (int c = 0; c < Bc; c++) {
            int len = vid_lengths[v], n = n_phrases[c];
            const double *K = gram + (size_t)v * T * T;
            float sum = 0.0f;
            for (int p = 0; p < P; p++) {
                long cp = (long)c * P + p;
                size_t at = (size_t)cp * VT + (size_t)v * T, pair = ((size_t)v * Bc + c) * P + p;
                if (p >= n) { /* not a phrase: no score, no gradient */
                    memset(w + at, 0, sizeof(float) * T);
                    cnorm[pair] = att_norm[pair] = sim[pair] = 0.0f;
                    continue;
                }
                cnorm[pair] = vtr_phrase_attention_weights(w + at, g + at, len, T, sigma);
                att_norm[pair] = vtr_phrase_attention_attended_norm(w + at, K, len, T);
                float dot = vtr_phrase_attention_dot(w + at, g + at, nv + (size_t)v * T,
                                                     np[cp] / pnorm[cp], len);
                sim[pair] = vtr_phrase_attention_sim(dot, att_norm[pair]);
                sum += sim[pair];
            }
            scores[(size_t)v * Bc + c] = sum / (float)(n > 1 ? n : 1);
        }
}

void vtr_phrase_attention_score_backward(float *dvid, float *dphrases, void *scratch,
                                         const float *dscores, const float *vid,
                                         const int *vid_lengths, const float *phrases,
                                         const int *n_phrases, const void *workspace, int Bv,
                                         int Bc, int T, int P, int D, float sigma)
{
    if (!dvid && !dphrases)
        return;
    workspace_layout l = workspace_layout_of(Bv, Bc, T, P, D);
    const float *g = CREGION(workspace, l.g), *w = CREGION(workspace, l.w);
    const double *gram = (const double *)((const char *)workspace + l.gram);
    const float *nv = CREGION(workspace, l.nv);
    const float *np = CREGION(workspace, l.np), *pnorm = CREGION(workspace, l.pnorm);
    const float *cnorm = CREGION(workspace, l.cnorm);
    const float *att_norm = CREGION(workspace, l.att_norm), *sim = CREGION(workspace, l.sim);
    const float *packed = CREGION(workspace, l.packed);
    const int *valid = (const int *)((const char *)workspace + l.valid);
    scratch_layout s = scratch_layout_of(Bv, Bc, T, P, D);
    float *dg = REGION(scratch, s.dg), *dw = REGION(scratch, s.dw);
    float *du_coef = REGION(scratch, s.du_coef), *dgram_coef = REGION(scratch, s.dgram_coef);
    float *gg = REGION(scratch, s.gg), *M = REGION(scratch, s.M);
    float *dnv = REGION(scratch, s.dnv), *dnp = REGION(scratch, s.dnp);
    float *dg_packed = REGION(scratch, s.dg_packed), *dp_packed = REGION(scratch, s.dp_packed);
    long VT = (long)Bv * T, CP = (long)Bc * P;
    int nr = valid[CP];

    /* 1. per pair: d/d g and the pair's coefficients */
#pragma omp parallel for collapse(2) schedule(static) if ((long)Bv * Bc * P * T > 4096)
    for (int v = 0; v < Bv; v++)
        for (int c = 0; c < Bc; c++) {
            int len = vid_lengths[v], n = n_phrases[c];
            float dsim = dscores[(size_t)v * Bc + c] / (float)(n > 1 ? n : 1);
            for (int p = 0; p < P; p++) {
                long cp = (long)c * P + p;
                size_t at = (size_t)cp * VT + (size_t)v * T, pair = ((size_t)v * Bc + c) * P + p;
                du_coef[pair] = dgram_coef[pair] = gg[pair] = 0.0f;
                if (p >= n) {
                    memset(dg + at, 0, sizeof(float) * T);
                    continue;
                }
                vtr_phrase_attention_backward_one(
                    dg + at, &du_coef[pair], &dgram_coef[pair], dw + ((size_t)v * Bc + c) * T,
                    dsim, g + at, w + at, cnorm[pair], nv + (size_t)v * T, np[cp] / pnorm[cp],
                    gram + (size_t)v * T * T, att_norm[pair], sim[pair], len, T, sigma);
                float acc = 0.0f;
                for (int t = 0; t < len; t++)
                    acc += dg[at + t] * g[at + t];
                gg[pair] = acc;
            }
        }

    /* 2. per video, over (c, p) in order: the frames' norm coefficient and the Gram term */
#pragma omp parallel for schedule(static) if ((long)Bv * Bc * P * T > 4096)
    for (int v = 0; v < Bv; v++) {
        int len = vid_lengths[v];
        float *Mv = M + (size_t)v * T * T;
        memset(Mv, 0, sizeof(float) * T * T);
        for (int t = 0; t < T; t++)
            dnv[(size_t)v * T + t] = 0.0f;
        for (long cp = 0; cp < CP; cp++) {
            size_t at = (size_t)cp * VT + (size_t)v * T;
            size_t pair = ((size_t)v * Bc + cp / P) * P + cp % P;
            for (int t = 0; t < len; t++)
                dnv[(size_t)v * T + t] += dg[at + t] * g[at + t];
            float k = dgram_coef[pair];
            if (k == 0.0f)
                continue;
            for (int t = 0; t < len; t++)
                for (int u = 0; u < len; u++)
                    Mv[t * T + u] += k * w[at + t] * w[at + u];
        }
        /* g = R / (nv np): d nv = -sum dg g / nv, and d|x| / dx = x / nv */
        for (int t = 0; t < len; t++) {
            float n = nv[(size_t)v * T + t];
            dnv[(size_t)v * T + t] = -dnv[(size_t)v * T + t] / (n * n);
        }
    }

    /* 3. per phrase, over v in order: the phrase's norm coefficients; then d/d g becomes
     * d/d R = dg / (nv np) + du / pnorm */
#pragma omp parallel for schedule(static) if (CP * VT > 65536)
    for (long cp = 0; cp < CP; cp++) {
        int c = (int)(cp / P), p = (int)(cp % P);
        float sum_gg = 0.0f, sum_uu = 0.0f;
        for (int v = 0; v < Bv; v++) {
            size_t pair = ((size_t)v * Bc + c) * P + p;
            float den = att_norm[pair] > VTR_PHRASE_ATTENTION_NORM_MIN
                            ? att_norm[pair]
                            : VTR_PHRASE_ATTENTION_NORM_MIN;
            sum_gg += gg[pair];
            sum_uu += du_coef[pair] * sim[pair] * den; /* du_coef * sum_t w u */
        }
        /* d np = -sum dg g / np with d np / dx = x / np; d pnorm = -sum du u / pnorm with
         * d pnorm / dx = x / |x| (0 under the clamp) */
        float norm = pnorm[cp] > VTR_PHRASE_ATTENTION_NORM_MIN ? pnorm[cp] : 0.0f;
        dnp[cp] = -sum_gg / (np[cp] * np[cp]) -
                  (norm > 0.0f ? sum_uu / (pnorm[cp] * norm) : 0.0f);
        float *row = dg + cp * VT;
        for (int v = 0; v < Bv; v++) {
            float k = du_coef[((size_t)v * Bc + c) * P + p] / pnorm[cp];
            for (int t = 0; t < T; t++) {
                long vt = (long)v * T + t;
                row[vt] = row[vt] / (nv[vt] * np[cp]) + k * w[cp * VT + vt];
            }
        }
    }

    /* 4. through R = phrases · vidᵀ (the valid rows: dg is 0 in the others) and the norms */
    vtr_embedding_forward(dg_packed, valid, dg, nr, (int)VT);
    if (dvid) {
        if (nr > 0)
            vtr_matmul(CblasTrans, CblasNoTrans, (int)VT, D, nr, 1.0f, dg_packed, (int)VT, packed,
                       D, 1.0f, dvid, D);
#pragma omp parallel for schedule(static) if (VT * D > 65536)
        for (long vt = 0; vt < VT; vt++)
            if ((int)(vt % T) < vid_lengths[vt / T])
                for (int d = 0; d < D; d++)
                    dvid[vt * D + d] += dnv[vt] * vid[vt * D + d];
        for (int v = 0; v < Bv; v++) {
            int len = vid_lengths[v];
            vtr_matmul(CblasNoTrans, CblasNoTrans, len, D, len, 1.0f, M + (size_t)v * T * T, T,
                       vid + (size_t)v * T * D, D, 1.0f, dvid + (size_t)v * T * D, D);
        }
    }
    if (dphrases) {
        if (nr > 0)
            vtr_matmul(CblasNoTrans, CblasNoTrans, nr, D, (int)VT, 1.0f, dg_packed, (int)VT, vid, D,
                       0.0f, dp_packed, D);
        vtr_embedding_backward(dphrases, dp_packed, valid, nr, D);
#pragma omp parallel for schedule(static) if (CP * D > 65536)
        for (long cp = 0; cp < CP; cp++)
            for (int d = 0; d < D; d++)
                dphrases[cp * D + d] += dnp[cp] * phrases[cp * D + d];
    }
}
