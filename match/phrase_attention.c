#include "phrase_attention.h"

#include <string.h>

#include "lib/embedding.h"
#include "lib/matmul.h"
#include "lib/norm.h"

size_t vtr_phrase_attention_workspace_size(int Bv, int Bc, int T, int P, int D)
{
    return vtr_phrase_attention_workspace_layout_of(Bv, Bc, T, P, D).total;
}

size_t vtr_phrase_attention_scratch_size(int Bv, int Bc, int T, int P, int D)
{
    return vtr_phrase_attention_scratch_layout_of(Bv, Bc, T, P, D).total;
}

#define REGION(base, offset) ((float *)((char *)(base) + (offset)))
#define CREGION(base, offset) ((const float *)((const char *)(base) + (offset)))

/* The cosine norm sqrt(|x|^2 + 1e-18) of each row of x (N,D); with clamped not NULL, also
 * the l2norm's max(|x|, 1e-10). */
static void row_norms(float *cosine_norm, float *clamped, const float *x, long N, int D)
{
#pragma omp parallel for schedule(static) if (N * D > 65536)
    for (long n = 0; n < N; n++)
        cosine_norm[n] = vtr_phrase_attention_row_norms(clamped ? clamped + n : NULL, x + n * D, D);
}

void vtr_phrase_attention_score_forward(float *scores, void *workspace, const float *vid,
                                        const int *vid_lengths, const float *phrases,
                                        const int *n_phrases, int Bv, int Bc, int T, int P, int D,
                                        float sigma)
{
    vtr_phrase_attention_workspace_layout l =
        vtr_phrase_attention_workspace_layout_of(Bv, Bc, T, P, D);
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
            g[cp * VT + vt] = vtr_phrase_attention_cosine(g[cp * VT + vt], np[cp], nv[vt]);
            /* |attended| comes from the Gram matrix of the video's real frames */
#pragma omp parallel for schedule(static) if (VT * T * D > 65536)
    for (int v = 0; v < Bv; v++) {
        const float *x = vid + (size_t)v * T * D;
        double *K = gram + (size_t)v * T * T;
        for (int t = 0; t < vid_lengths[v]; t++)
            for (int u = 0; u <= t; u++)
                K[t * T + u] = K[u * T + t] = vtr_phrase_attention_gram_at(x, t, u, D);
    }

#pragma omp parallel for collapse(2) schedule(static) if ((long)Bv * Bc * P * T > 4096)
    for (int v = 0; v < Bv; v++)
        for (int c = 0; c < Bc; c++) {
            size_t at = (size_t)c * P * VT + (size_t)v * T, pair = ((size_t)v * Bc + c) * P;
            scores[(size_t)v * Bc + c] = vtr_phrase_attention_pair_forward(
                w + at, cnorm + pair, att_norm + pair, sim + pair, g + at, (size_t)VT,
                gram + (size_t)v * T * T, nv + (size_t)v * T, np + (size_t)c * P,
                pnorm + (size_t)c * P, vid_lengths[v], n_phrases[c], T, P, sigma);
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
    vtr_phrase_attention_workspace_layout l =
        vtr_phrase_attention_workspace_layout_of(Bv, Bc, T, P, D);
    const float *g = CREGION(workspace, l.g), *w = CREGION(workspace, l.w);
    const double *gram = (const double *)((const char *)workspace + l.gram);
    const float *nv = CREGION(workspace, l.nv);
    const float *np = CREGION(workspace, l.np), *pnorm = CREGION(workspace, l.pnorm);
    const float *cnorm = CREGION(workspace, l.cnorm);
    const float *att_norm = CREGION(workspace, l.att_norm), *sim = CREGION(workspace, l.sim);
    const float *packed = CREGION(workspace, l.packed);
    const int *valid = (const int *)((const char *)workspace + l.valid);
    vtr_phrase_attention_scratch_layout s = vtr_phrase_attention_scratch_layout_of(Bv, Bc, T, P, D);
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
            size_t at = (size_t)c * P * VT + (size_t)v * T, pair = ((size_t)v * Bc + c) * P;
            vtr_phrase_attention_pair_backward(
                dg + at, du_coef + pair, dgram_coef + pair, gg + pair,
                dw + ((size_t)v * Bc + c) * T, dscores[(size_t)v * Bc + c], g + at, w + at,
                (size_t)VT, cnorm + pair, gram + (size_t)v * T * T, nv + (size_t)v * T,
                np + (size_t)c * P, pnorm + (size_t)c * P, att_norm + pair, sim + pair,
                vid_lengths[v], n_phrases[c], T, P, sigma);
        }

        /* 2. per video and frame, over (c, p) in order: the frames' norm coefficient and the Gram
         * term */
#pragma omp parallel for schedule(static) if ((long)Bv * Bc * P * T > 4096)
    for (int v = 0; v < Bv; v++)
        for (int t = 0; t < T; t++)
            vtr_phrase_attention_frame_backward(
                M + ((size_t)v * T + t) * T, &dnv[(size_t)v * T + t], dg + (size_t)v * T,
                g + (size_t)v * T, w + (size_t)v * T, dgram_coef + (size_t)v * CP, CP, (size_t)VT,
                t, vid_lengths[v], T, nv[(size_t)v * T + t]);

            /* 3. per phrase, over v in order: the phrase's norm coefficients; then d/d g becomes
             * d/d R = dg / (nv np) + du / pnorm */
#pragma omp parallel for schedule(static) if (CP * VT > 65536)
    for (long cp = 0; cp < CP; cp++) {
        int c = (int)(cp / P), p = (int)(cp % P);
        dnp[cp] = vtr_phrase_attention_phrase_norm_grad(gg, du_coef, sim, att_norm, np[cp],
                                                        pnorm[cp], Bv, Bc, P, c, p);
        float *row = dg + cp * VT;
        for (int v = 0; v < Bv; v++) {
            float du = du_coef[((size_t)v * Bc + c) * P + p];
            for (int t = 0; t < T; t++) {
                long vt = (long)v * T + t;
                row[vt] = vtr_phrase_attention_dR(row[vt], nv[vt], np[cp], du, pnorm[cp],
                                                  w[cp * VT + vt]);
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
