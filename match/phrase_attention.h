/* HGR's verb-level and noun-level matching score (conventions: lib/nn.h): every phrase of
 * a caption attends over the frames of a video, and the score of a (video, caption) pair is
 * the mean over the caption's valid phrases of the cosine between the phrase and its
 * attended frames (REFERENCE.md, "HGR"; the reference's generate_phrase_scores with
 * attn_fusion 'embed', simattn_sigma 4).
 *
 * vid (Bv,T,D): frames of Bv videos, vid_lengths (Bv), 1 <= vid_lengths[v] <= T.
 * phrases (Bc,P,D): phrase nodes of Bc captions; phrase p of caption c is valid iff
 * p < n_phrases[c], 0 <= n_phrases[c] <= P (the reference's sequence_mask of the count of
 * non-empty phrases). For every pair (v, c), phrase p, real frame t < vid_lengths[v]:
 *
 *     g[t]    = cosine(vid[v,t], phrases[c,p]), norms sqrt(sum x^2 + 1e-18)   (cosine_sim)
 *     a[t]    = max(g[t], 0) / max(|max(g, 0)|, 1e-10)       (l2norm over the real frames)
 *     w[t]    = softmax over the real frames of sigma * a     (0 at padded frames)
 *     att     = sum_t w[t] vid[v,t]
 *     sim[p]  = <att / max(|att|, 1e-10), phrases[c,p] / max(|phrases[c,p]|, 1e-10)>
 *     score[v,c] = sum_{p < n_phrases[c]} sim[p] / max(1, n_phrases[c])
 *
 * How it is computed. All frame-phrase dot products of a block are one sgemm,
 * R (Bc*P, Bv*T) = phrases · vidᵀ, scaled into cosines g. The attended frames are never
 * formed (Bv*Bc*P*D floats, 400 MB at a training batch): <att, phrase> = sum_t w[t] R[t]
 * and |att|^2 = wᵀ K w with K (T,T) the Gram matrix of the video's frames (one small sgemm
 * per video), so each (v, c, p) costs O(T^2) after the sgemm. K is summed in double (a
 * float K would lose |att|'s digits as soon as frames partly cancel: its error is relative
 * to (sum_t w[t] |x_t|)^2, not to |att|^2). <att, phrase> comes from the float sgemm, as the
 * reference's cosines do: its absolute error is ~1e-7 sqrt(D) sum_t w[t] |x_t| |phrase|, so
 * sim loses relative accuracy where the attended frames are much shorter than the frames
 * (frames that cancel each other, e.g. |att| at 1% of |x_t|: sim to ~1e-4).
 *
 * Only the valid phrases enter the products: their rows are packed (the others' cosines
 * are left 0 and their gradients are 0), which at HGR's training sizes skips about 40% of
 * the phrase slots.
 *
 * Blocks. The op works on any block of videos x captions (evaluation calls it per block
 * at test-set size; a block's scores equal those of the same pairs in a larger block).
 * Memory: the workspace holds the cosines and the attention weights, 4 * Bv*Bc*P*(2T + 3)
 * bytes, and the packed phrases, 4 * Bc*P*D, plus O(Bv*T*T + Bc*P); the scratch
 * 4 * Bv*Bc*(2P*T + T + 3P) + 4 * Bc*P*D bytes plus the same O(). At Bv = Bc = 128, T = 20,
 * P = 6, D = 1024: workspace 21 MB, scratch 22 MB.
 *
 * Cost. Forward one sgemm (nr, Bv*T, D) over the nr valid phrases, backward two of the
 * same size; the rest is O(Bv*Bc*P*T^2 + Bv*T^2*D). Measured (2 shared cores, OpenBLAS pthreads with its
 * Prescott kernel, OMP_WAIT_POLICY=passive, Bv = Bc = 128, T = 20, P = 6, D = 1024):
 * forward 300-340 ms, backward 510-610 ms, the sgemms about 250 ms each of that.
 *
 * Arguments. Callers check vid_lengths once with vtr_nn_check_lengths; n_phrases may be
 * 0 (a caption whose parse found no phrase of this level scores 0 and passes no gradient).
 *
 * Determinism. The per-pair math runs in parallel over (v, c) pairs, each writing only its
 * own outputs; dvid is reduced per video and dphrases per caption, in a fixed order, so
 * the result does not depend on the OpenMP thread count (BLAS gives identical bytes for
 * the same BLAS thread count).
 */
#ifndef VTR_PHRASE_ATTENTION_H
#define VTR_PHRASE_ATTENTION_H

#include <math.h>
#include <stddef.h>

#include "lib/hostdevice.h"
#include "lib/nn.h"
#include "lib/norm.h"
#include "lib/softmax.h"

#ifdef __cplusplus
extern "C" {
#endif

/* softmax(sigma * a) over frames: HGR's simattn_sigma */
#define VTR_PHRASE_ATTENTION_SIGMA 4.0f
/* the reference's l2norm clamps the norm to at least this (framework/ops.py) */
#define VTR_PHRASE_ATTENTION_NORM_MIN 1e-10f
/* the reference's cosine_sim adds this under the square root (criterion.py) */
#define VTR_PHRASE_ATTENTION_COSINE_EPS 1e-18

/* The per-(video, caption, phrase) math below reads its frames contiguously: the op keeps
 * the cosines g and the weights w in the layout (Bc,P,Bv,T), so the T frames of one
 * (c, p, v) are adjacent. */

/* The frames' attention of one (video, caption, phrase): g (T) the frame-phrase cosines,
 * len real frames. Writes w (T), zero at padded frames, and returns the l2 norm of the
 * clamped cosines before its 1e-10 clamp (the backward needs it). */
static VTR_HD float vtr_phrase_attention_weights(float *w, const float *g, int len, int T,
                                                 float sigma)
{
    double ss = 0.0;
    for (int t = 0; t < len; t++) {
        w[t] = g[t] > 0.0f ? g[t] : 0.0f;
        ss += (double)w[t] * w[t];
    }
    float norm = (float)sqrt(ss);
    float clamped = norm > VTR_PHRASE_ATTENTION_NORM_MIN ? norm : VTR_PHRASE_ATTENTION_NORM_MIN;
    for (int t = 0; t < len; t++)
        w[t] /= clamped;
    /* temperature 1/sigma: x / (1/sigma) == sigma * x exactly when sigma is a power of 2 */
    vtr_masked_softmax_row_forward(w, w, len, T, 1.0f / sigma);
    return norm;
}

/* |sum_t w[t] x_t| from the Gram matrix K (T,T) of the x_t, in double: sqrt(wᵀ K w) over
 * t < len */
static VTR_HD float vtr_phrase_attention_attended_norm(const float *w, const double *K, int len,
                                                       int T)
{
    double q = 0.0;
    for (int t = 0; t < len; t++) {
        double Kw = 0.0;
        for (int s = 0; s < len; s++)
            Kw += K[t * T + s] * w[s];
        q += Kw * w[t];
    }
    return q > 0.0 ? (float)sqrt(q) : 0.0f;
}

/* <att, phrase> / max(|phrase|, 1e-10) = sum_t w[t] u[t] with u[t] = g[t] * nv[t] *
 * u_scale, nv (T) the frames' cosine norms and u_scale = (the phrase's cosine norm) /
 * max(|phrase|, 1e-10). */
static VTR_HD float vtr_phrase_attention_dot(const float *w, const float *g, const float *nv,
                                             float u_scale, int len)
{
    float dot = 0.0f;
    for (int t = 0; t < len; t++)
        dot += w[t] * (g[t] * nv[t] * u_scale);
    return dot;
}

/* sim = dot / max(att_norm, 1e-10) */
static VTR_HD float vtr_phrase_attention_sim(float dot, float att_norm)
{
    return dot / (att_norm > VTR_PHRASE_ATTENTION_NORM_MIN ? att_norm
                                                           : VTR_PHRASE_ATTENTION_NORM_MIN);
}

/* Backward of one (video, caption, phrase), dsim the gradient of its sim; g, w, norm, nv,
 * u_scale, K, att_norm and sim as in the forward. Writes dg (T) = d/d g (zero at padded
 * frames) and returns through the pointers the two coefficients of the other gradients:
 *   *du_coef:    d/d u[t] = *du_coef * w[t];
 *   *dgram_coef: the frames' gradient through |att| is *dgram_coef * w wᵀ vid (K = vid vidᵀ).
 * dw (T) is scratch. */
static VTR_HD void vtr_phrase_attention_backward_one(float *dg, float *du_coef, float *dgram_coef,
                                                     float *dw, float dsim, const float *g,
                                                     const float *w, float norm, const float *nv,
                                                     float u_scale, const double *K, float att_norm,
                                                     float sim, int len, int T, float sigma)
{
    int live = att_norm > VTR_PHRASE_ATTENTION_NORM_MIN; /* the clamp passes no gradient */
    float ddot = dsim / (live ? att_norm : VTR_PHRASE_ATTENTION_NORM_MIN);
    float gram = live ? -dsim * sim / (att_norm * att_norm) : 0.0f;
    for (int t = 0; t < len; t++) {
        double Kw = 0.0;
        for (int s = 0; s < len; s++)
            Kw += K[t * T + s] * w[s];
        dw[t] = ddot * (g[t] * nv[t] * u_scale) + gram * (float)Kw;
    }
    for (int t = 0; t < T; t++)
        dg[t] = 0.0f;
    vtr_masked_softmax_row_backward(dg, dw, w, len, 1.0f / sigma);
    /* through a = c / max(|c|, 1e-10), c = max(g, 0): dc = da / |c| - c (da·c) / |c|^3 */
    if (norm > VTR_PHRASE_ATTENTION_NORM_MIN) {
        double dot = 0.0;
        for (int t = 0; t < len; t++)
            dot += (double)dg[t] * (g[t] > 0.0f ? g[t] : 0.0f);
        float k = (float)(dot / ((double)norm * norm * norm));
        for (int t = 0; t < len; t++)
            dg[t] = dg[t] / norm - (g[t] > 0.0f ? g[t] : 0.0f) * k;
    } else {
        for (int t = 0; t < len; t++)
            dg[t] /= VTR_PHRASE_ATTENTION_NORM_MIN;
    }
    /* the reference zeroes g < 0 in place: g == 0 keeps its gradient */
    for (int t = 0; t < len; t++)
        if (g[t] < 0.0f)
            dg[t] = 0.0f;
    *du_coef = ddot;
    *dgram_coef = gram;
}

/* The cosine norm sqrt(|x|^2 + 1e-18) of a row x (D); with clamped not NULL, also the
 * l2norm's max(|x|, 1e-10) into *clamped. */
static VTR_HD float vtr_phrase_attention_row_norms(float *clamped, const float *x, int D)
{
    double ss = vtr_row_sum_squares(x, D);
    if (clamped) {
        float norm = (float)sqrt(ss);
        *clamped = norm > VTR_PHRASE_ATTENTION_NORM_MIN ? norm : VTR_PHRASE_ATTENTION_NORM_MIN;
    }
    return (float)sqrt(ss + VTR_PHRASE_ATTENTION_COSINE_EPS);
}

/* cosine_sim's division of a frame-phrase product R by the two cosine norms */
static VTR_HD float vtr_phrase_attention_cosine(float R, float np, float nv)
{
    return R / (np * nv);
}

/* Entry (t, u) of the Gram matrix of the frames x (T,D) of one video, in double */
static VTR_HD double vtr_phrase_attention_gram_at(const float *x, int t, int u, int D)
{
    double dot = 0.0;
    for (int d = 0; d < D; d++)
        dot += (double)x[(size_t)t * D + d] * x[(size_t)u * D + d];
    return dot;
}

/* One (video, caption) pair's score: the mean of its n valid phrases' sims. Its P phrases'
 * cosines g and weights w (T each, phrase p at p * stride, the op's (Bc,P,Bv,T) layout), and
 * cnorm, att_norm, sim (P, the pair's) written; the phrases p >= n get zero weights and
 * zeros. K (T,T) the video's Gram matrix, nv (T) its frames' cosine norms, len its frames;
 * np, pnorm (P) the caption's phrases' cosine and clamped norms. */
static VTR_HD float vtr_phrase_attention_pair_forward(float *w, float *cnorm, float *att_norm,
                                                      float *sim, const float *g, size_t stride,
                                                      const double *K, const float *nv,
                                                      const float *np, const float *pnorm, int len,
                                                      int n, int T, int P, float sigma)
{
    float sum = 0.0f;
    for (int p = 0; p < P; p++) {
        float *wp = w + p * stride;
        const float *gp = g + p * stride;
        if (p >= n) { /* not a phrase: no score, no gradient */
            for (int t = 0; t < T; t++)
                wp[t] = 0.0f;
            cnorm[p] = att_norm[p] = sim[p] = 0.0f;
            continue;
        }
        cnorm[p] = vtr_phrase_attention_weights(wp, gp, len, T, sigma);
        att_norm[p] = vtr_phrase_attention_attended_norm(wp, K, len, T);
        float dot = vtr_phrase_attention_dot(wp, gp, nv, np[p] / pnorm[p], len);
        sim[p] = vtr_phrase_attention_sim(dot, att_norm[p]);
        sum += sim[p];
    }
    return sum / (float)(n > 1 ? n : 1);
}

/* The backward of vtr_phrase_attention_pair_forward, dscore the pair's score gradient: its P
 * phrases' dg (T each, at p * stride, as g and w) and du_coef, dgram_coef, gg (P, the
 * pair's; gg = sum_t dg g) written, zero for the phrases p >= n; dw (T) scratch. The rest as
 * the forward read and left it. */
static VTR_HD void vtr_phrase_attention_pair_backward(
    float *dg, float *du_coef, float *dgram_coef, float *gg, float *dw, float dscore,
    const float *g, const float *w, size_t stride, const float *cnorm, const double *K,
    const float *nv, const float *np, const float *pnorm, const float *att_norm, const float *sim,
    int len, int n, int T, int P, float sigma)
{
    float dsim = dscore / (float)(n > 1 ? n : 1);
    for (int p = 0; p < P; p++) {
        float *dgp = dg + p * stride;
        const float *gp = g + p * stride;
        du_coef[p] = dgram_coef[p] = gg[p] = 0.0f;
        if (p >= n) {
            for (int t = 0; t < T; t++)
                dgp[t] = 0.0f;
            continue;
        }
        vtr_phrase_attention_backward_one(dgp, &du_coef[p], &dgram_coef[p], dw, dsim, gp,
                                          w + p * stride, cnorm[p], nv, np[p] / pnorm[p], K,
                                          att_norm[p], sim[p], len, T, sigma);
        float acc = 0.0f;
        for (int t = 0; t < len; t++)
            acc += dgp[t] * gp[t];
        gg[p] = acc;
    }
}

/* Row t of one video's backward, over the CP = Bc*P phrase rows in order: *dnv = the
 * gradient coefficient of frame t's cosine norm nv_t (-sum dg g / nv_t^2), and Mt (T) = row t
 * of M = sum over (c, p) of dgram_coef w wᵀ; both 0 past len. dg, g, w at frame 0 of the video
 * in phrase row 0 (rows VT apart), dgram_coef at the video's first pair ((Bc,P) of them). */
static VTR_HD void vtr_phrase_attention_frame_backward(float *Mt, float *dnv, const float *dg,
                                                       const float *g, const float *w,
                                                       const float *dgram_coef, long CP, size_t VT,
                                                       int t, int len, int T, float nv)
{
    for (int u = 0; u < T; u++)
        Mt[u] = 0.0f;
    *dnv = 0.0f;
    if (t >= len)
        return;
    float acc = 0.0f;
    for (long cp = 0; cp < CP; cp++) {
        size_t at = (size_t)cp * VT;
        acc += dg[at + t] * g[at + t];
        float k = dgram_coef[cp];
        if (k == 0.0f)
            continue;
        for (int u = 0; u < len; u++)
            Mt[u] += k * w[at + t] * w[at + u];
    }
    /* g = R / (nv np): d nv = -sum dg g / nv, and d|x| / dx = x / nv */
    *dnv = -acc / (nv * nv);
}

/* The gradient coefficient of phrase (c, p)'s norms, over the Bv videos in order: d np (the
 * cosine norm, -sum dg g / np^2) plus d pnorm (the clamped norm, -sum du u / pnorm^2, 0 under
 * the clamp). gg, du_coef, sim, att_norm (Bv,Bc,P). */
static VTR_HD float vtr_phrase_attention_phrase_norm_grad(const float *gg, const float *du_coef,
                                                          const float *sim, const float *att_norm,
                                                          float np, float pnorm, int Bv, int Bc,
                                                          int P, int c, int p)
{
    float sum_gg = 0.0f, sum_uu = 0.0f;
    for (int v = 0; v < Bv; v++) {
        size_t pair = ((size_t)v * Bc + c) * P + p;
        float den = att_norm[pair] > VTR_PHRASE_ATTENTION_NORM_MIN ? att_norm[pair]
                                                                   : VTR_PHRASE_ATTENTION_NORM_MIN;
        sum_gg += gg[pair];
        sum_uu += du_coef[pair] * sim[pair] * den; /* du_coef * sum_t w u */
    }
    /* d np / dx = x / np; d pnorm / dx = x / |x| (0 under the clamp) */
    float norm = pnorm > VTR_PHRASE_ATTENTION_NORM_MIN ? pnorm : 0.0f;
    return -sum_gg / (np * np) - (norm > 0.0f ? sum_uu / (pnorm * norm) : 0.0f);
}

/* d/d R of one (phrase, frame) from d/d g: dg / (nv np) + du_coef / pnorm * w */
static VTR_HD float vtr_phrase_attention_dR(float dg, float nv, float np, float du_coef,
                                            float pnorm, float w)
{
    float k = du_coef / pnorm;
    return dg / (nv * np) + k * w;
}

/* Byte offsets of the workspace's regions (total: vtr_phrase_attention_workspace_size):
 *   g        (Bc*P, Bv*T)  frame-phrase cosines, row (c, p), column (v, t); 0 in the rows
 *                          of the phrases past n_phrases
 *   w        (Bc*P, Bv*T)  attention weights, the same layout, 0 at padded frames
 *   gram     (Bv,T,T)      frames' Gram matrices in double (the real len x len block)
 *   nv       (Bv*T)        frames' cosine norms sqrt(|x|^2 + 1e-18)
 *   np       (Bc*P)        phrases' cosine norms sqrt(|x|^2 + 1e-18)
 *   pnorm    (Bc*P)        max(|phrase|, 1e-10), the final l2norm's
 *   cnorm, att_norm, sim (Bv,Bc,P): the clamped cosines' norm, |attended|, the phrase's sim
 *   valid    (Bc*P + 1)    int: the rows (c, p) of the valid phrases, ascending, then their
 *                          count nr; the CPU's products run over these rows only
 *   packed   (Bc*P, D)     the valid phrases' rows, packed (the CPU's) */
typedef struct vtr_phrase_attention_workspace_layout {
    size_t g, w, gram, nv, np, pnorm, cnorm, att_norm, sim, valid, packed, total;
} vtr_phrase_attention_workspace_layout;

/* Byte offsets of the backward's scratch regions (total: vtr_phrase_attention_scratch_size):
 *   dg       (Bc*P, Bv*T)  d/d g, then d/d R (R = phrases · vidᵀ)
 *   dw       (Bv*Bc, T)    one row per pair, vtr_phrase_attention_backward_one's scratch
 *   du_coef, dgram_coef, gg (Bv,Bc,P): the pair's coefficients; gg = sum_t dg g
 *   M        (Bv,T,T)      sum over (c, p) of dgram_coef w wᵀ
 *   dnv      (Bv*T), dnp (Bc*P): the norms' coefficients
 *   dg_packed (Bc*P, Bv*T), dp_packed (Bc*P, D): the valid rows of dg, and their dphrases
 *                          (the CPU's) */
typedef struct vtr_phrase_attention_scratch_layout {
    size_t dg, dw, du_coef, dgram_coef, gg, M, dnv, dnp, dg_packed, dp_packed, total;
} vtr_phrase_attention_scratch_layout;

static inline vtr_phrase_attention_workspace_layout
vtr_phrase_attention_workspace_layout_of(int Bv, int Bc, int T, int P, int D)
{
    size_t big = (size_t)Bc * P * Bv * T, pairs = (size_t)Bv * Bc * P, f = sizeof(float);
    vtr_phrase_attention_workspace_layout l;
    l.g = 0;
    l.w = l.g + vtr_workspace_align(f * big);
    l.gram = l.w + vtr_workspace_align(f * big);
    l.nv = l.gram + vtr_workspace_align(sizeof(double) * Bv * T * T);
    l.np = l.nv + vtr_workspace_align(f * Bv * T);
    l.pnorm = l.np + vtr_workspace_align(f * Bc * P);
    l.cnorm = l.pnorm + vtr_workspace_align(f * Bc * P);
    l.att_norm = l.cnorm + vtr_workspace_align(f * pairs);
    l.sim = l.att_norm + vtr_workspace_align(f * pairs);
    l.valid = l.sim + vtr_workspace_align(f * pairs);
    l.packed = l.valid + vtr_workspace_align(sizeof(int) * ((size_t)Bc * P + 1));
    l.total = l.packed + vtr_workspace_align(f * Bc * P * D);
    return l;
}

static inline vtr_phrase_attention_scratch_layout
vtr_phrase_attention_scratch_layout_of(int Bv, int Bc, int T, int P, int D)
{
    size_t big = (size_t)Bc * P * Bv * T, pairs = (size_t)Bv * Bc * P, f = sizeof(float);
    vtr_phrase_attention_scratch_layout l;
    l.dg = 0;
    l.dw = l.dg + vtr_workspace_align(f * big);
    l.du_coef = l.dw + vtr_workspace_align(f * Bv * Bc * T);
    l.dgram_coef = l.du_coef + vtr_workspace_align(f * pairs);
    l.gg = l.dgram_coef + vtr_workspace_align(f * pairs);
    l.M = l.gg + vtr_workspace_align(f * pairs);
    l.dnv = l.M + vtr_workspace_align(f * Bv * T * T);
    l.dnp = l.dnv + vtr_workspace_align(f * Bv * T);
    l.dg_packed = l.dnp + vtr_workspace_align(f * Bc * P);
    l.dp_packed = l.dg_packed + vtr_workspace_align(f * big);
    l.total = l.dp_packed + vtr_workspace_align(f * Bc * P * D);
    return l;
}

/* Workspace of the forward, read by the backward: bytes */
size_t vtr_phrase_attention_workspace_size(int Bv, int Bc, int T, int P, int D);
/* Scratch of the backward: bytes */
size_t vtr_phrase_attention_scratch_size(int Bv, int Bc, int T, int P, int D);

// scores (Bv,Bc); workspace of vtr_phrase_attention_workspace_size bytes;
// vid (Bv,T,D), vid_lengths (Bv); phrases (Bc,P,D), n_phrases (Bc); sigma (HGR: 4; sigma * a
// is computed as a / (1/sigma), the same number when sigma is a power of 2). Padded frames
// and phrases past n_phrases change no output, but must be finite (the sgemms read them).
void vtr_phrase_attention_score_forward(float *scores, void *workspace, const float *vid,
                                        const int *vid_lengths, const float *phrases,
                                        const int *n_phrases, int Bv, int Bc, int T, int P, int D,
                                        float sigma);

// dvid (Bv,T,D) or NULL, dphrases (Bc,P,D) or NULL, both +=; scratch of
// vtr_phrase_attention_scratch_size bytes; dscores (Bv,Bc); the forward's inputs and its
// workspace, untouched since
void vtr_phrase_attention_score_backward(float *dvid, float *dphrases, void *scratch,
                                         const float *dscores, const float *vid,
                                         const int *vid_lengths, const float *phrases,
                                         const int *n_phrases, const void *workspace, int Bv,
                                         int Bc, int T, int P, int D, float sigma);

/* The CUDA side (match/phrase_attention.cu, through match/cuda_entries.c): the CPU functions'
 * arguments as device buffers (vid_lengths and n_phrases included; the workspace and scratch
 * of the CPU's sizes and layouts), with lib/nn_cuda.h's conventions. The per-pair, per-frame
 * and per-phrase math is the CPU's VTR_HD functions above, one thread per (video, caption)
 * pair, per (video, frame), per phrase or per element, each sum in the CPU's order; the
 * products go through cuBLAS. The products run over all Bc*P phrase rows, the invalid ones'
 * cosines then set to 0 (the count of valid rows is on the device): the same numbers as the
 * CPU's packed products, whose buffers (valid, packed, dg_packed, dp_packed) are not filled. */
vtr_status vtr_cuda_phrase_attention_score_forward(float *scores, void *workspace, const float *vid,
                                                   const int *vid_lengths, const float *phrases,
                                                   const int *n_phrases, int Bv, int Bc, int T,
                                                   int P, int D, float sigma, vtr_error *err);
vtr_status vtr_cuda_phrase_attention_score_backward(float *dvid, float *dphrases, void *scratch,
                                                    const float *dscores, const float *vid,
                                                    const int *vid_lengths, const float *phrases,
                                                    const int *n_phrases, const void *workspace,
                                                    int Bv, int Bc, int T, int P, int D,
                                                    float sigma, vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
