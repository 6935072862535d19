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

#ifdef __cplusplus
}
#endif

#endif
