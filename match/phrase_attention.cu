// CUDA side of match/phrase_attention.h: the CPU's steps with its VTR_HD functions, one thread
// per row for the norms, per element for the cosines and the gradients' elementwise terms, per
// (video, frame, frame) for the Gram matrices, per (video, caption) pair for the pairs' math,
// per (video, frame) for the frames' backward and per phrase for the phrases' norm gradients;
// each sum runs in the CPU's order, with no atomics. The frame-phrase products are cuBLAS
// products over all Bc*P phrase rows (the invalid rows' cosines are then set to 0, and their
// gradients are 0), and the per-video products M vid one batched product over all T frames
// (M is 0 past each video's length).
#include "lib/cuda_launch.h"
#include "lib/nn_cuda.h"
#include "match/phrase_attention.h"

// The workspace's and scratch's regions (vtr_phrase_attention_*_layout_of), as device pointers.
struct phrase_attention_workspace {
    float *g, *w;
    double *gram;
    float *nv, *np, *pnorm, *cnorm, *att_norm, *sim;
};

static phrase_attention_workspace phrase_attention_workspace_of(const void *workspace, int Bv,
                                                                int Bc, int T, int P, int D)
{
    vtr_phrase_attention_workspace_layout l =
        vtr_phrase_attention_workspace_layout_of(Bv, Bc, T, P, D);
    char *ws = (char *)workspace;
    phrase_attention_workspace w = {
        (float *)(ws + l.g),     (float *)(ws + l.w),        (double *)(ws + l.gram),
        (float *)(ws + l.nv),    (float *)(ws + l.np),       (float *)(ws + l.pnorm),
        (float *)(ws + l.cnorm), (float *)(ws + l.att_norm), (float *)(ws + l.sim)};
    return w;
}

struct phrase_attention_scratch {
    float *dg, *dw, *du_coef, *dgram_coef, *gg, *M, *dnv, *dnp;
};

static phrase_attention_scratch phrase_attention_scratch_of(void *scratch, int Bv, int Bc, int T,
                                                            int P, int D)
{
    vtr_phrase_attention_scratch_layout l = vtr_phrase_attention_scratch_layout_of(Bv, Bc, T, P, D);
    char *sc = (char *)scratch;
    phrase_attention_scratch s = {(float *)(sc + l.dg),      (float *)(sc + l.dw),
                                  (float *)(sc + l.du_coef), (float *)(sc + l.dgram_coef),
                                  (float *)(sc + l.gg),      (float *)(sc + l.M),
                                  (float *)(sc + l.dnv),     (float *)(sc + l.dnp)};
    return s;
}

// cosine_norm (N), clamped (N) or NULL: the norms of the rows of x (N,D), one row per thread
__global__ static void phrase_attention_norms_kernel(float *cosine_norm, float *clamped,
                                                     const float *x, long N, int D)
{
    for (size_t n = vtr_cuda_first(); n < (size_t)N; n += vtr_cuda_stride())
        cosine_norm[n] = vtr_phrase_attention_row_norms(clamped ? clamped + n : NULL, x + n * D, D);
}

// g (Bc*P, Bv*T): the products R it holds -> the cosines, 0 in the invalid phrases' rows; one
// element per thread
__global__ static void phrase_attention_cosine_kernel(float *g, const float *np, const float *nv,
                                                      const int *n_phrases, long CP, long VT, int P)
{
    size_t total = (size_t)CP * VT;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        size_t cp = e / (size_t)VT, vt = e % (size_t)VT;
        int valid = (int)(cp % (size_t)P) < n_phrases[cp / (size_t)P];
        g[e] = valid ? vtr_phrase_attention_cosine(g[e], np[cp], nv[vt]) : 0.0f;
    }
}

// gram (Bv,T,T): entry (t, u) of each video's real block, one per thread
__global__ static void phrase_attention_gram_kernel(double *gram, const float *vid,
                                                    const int *vid_lengths, int Bv, int T, int D)
{
    size_t total = (size_t)Bv * T * T;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        size_t v = e / ((size_t)T * T);
        int t = (int)(e / (size_t)T % (size_t)T), u = (int)(e % (size_t)T);
        if (t < vid_lengths[v] && u < vid_lengths[v])
            gram[e] = vtr_phrase_attention_gram_at(vid + v * T * D, t, u, D);
    }
}

// scores (Bv,Bc), w, cnorm, att_norm, sim: one (video, caption) pair per thread
__global__ static void phrase_attention_pair_kernel(float *scores, phrase_attention_workspace ws,
                                                    const int *vid_lengths, const int *n_phrases,
                                                    int Bv, int Bc, int T, int P, float sigma)
{
    size_t total = (size_t)Bv * Bc, VT = (size_t)Bv * T;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        size_t v = e / (size_t)Bc, c = e % (size_t)Bc;
        size_t at = c * P * VT + v * T, pair = e * P;
        scores[e] = vtr_phrase_attention_pair_forward(
            ws.w + at, ws.cnorm + pair, ws.att_norm + pair, ws.sim + pair, ws.g + at, VT,
            ws.gram + v * T * T, ws.nv + v * T, ws.np + c * P, ws.pnorm + c * P, vid_lengths[v],
            n_phrases[c], T, P, sigma);
    }
}

// dg, du_coef, dgram_coef, gg (and dw): one (video, caption) pair per thread
__global__ static void phrase_attention_pair_backward_kernel(
    phrase_attention_scratch sc, phrase_attention_workspace ws, const float *dscores,
    const int *vid_lengths, const int *n_phrases, int Bv, int Bc, int T, int P, float sigma)
{
    size_t total = (size_t)Bv * Bc, VT = (size_t)Bv * T;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        size_t v = e / (size_t)Bc, c = e % (size_t)Bc;
        size_t at = c * P * VT + v * T, pair = e * P;
        vtr_phrase_attention_pair_backward(
            sc.dg + at, sc.du_coef + pair, sc.dgram_coef + pair, sc.gg + pair, sc.dw + e * T,
            dscores[e], ws.g + at, ws.w + at, VT, ws.cnorm + pair, ws.gram + v * T * T,
            ws.nv + v * T, ws.np + c * P, ws.pnorm + c * P, ws.att_norm + pair, ws.sim + pair,
            vid_lengths[v], n_phrases[c], T, P, sigma);
    }
}

// M (Bv,T,T) and dnv (Bv*T): one (video, frame) per thread, over the phrase rows in order
__global__ static void phrase_attention_frame_backward_kernel(phrase_attention_scratch sc,
                                                              phrase_attention_workspace ws,
                                                              const int *vid_lengths, int Bv,
                                                              int Bc, int T, int P)
{
    size_t total = (size_t)Bv * T, CP = (size_t)Bc * P;
    for (size_t vt = vtr_cuda_first(); vt < total; vt += vtr_cuda_stride()) {
        size_t v = vt / (size_t)T;
        vtr_phrase_attention_frame_backward(sc.M + vt * T, &sc.dnv[vt], sc.dg + v * T, ws.g + v * T,
                                            ws.w + v * T, sc.dgram_coef + v * CP, (long)CP, total,
                                            (int)(vt % (size_t)T), vid_lengths[v], T, ws.nv[vt]);
    }
}

// dnp (Bc*P): one phrase per thread, over the videos in order
__global__ static void phrase_attention_phrase_norm_kernel(phrase_attention_scratch sc,
                                                           phrase_attention_workspace ws, int Bv,
                                                           int Bc, int P)
{
    size_t total = (size_t)Bc * P;
    for (size_t cp = vtr_cuda_first(); cp < total; cp += vtr_cuda_stride())
        sc.dnp[cp] = vtr_phrase_attention_phrase_norm_grad(
            sc.gg, sc.du_coef, ws.sim, ws.att_norm, ws.np[cp], ws.pnorm[cp], Bv, Bc, P,
            (int)(cp / (size_t)P), (int)(cp % (size_t)P));
}

// dg (Bc*P, Bv*T): d/d g -> d/d R, one element per thread
__global__ static void phrase_attention_dR_kernel(phrase_attention_scratch sc,
                                                  phrase_attention_workspace ws, int Bv, int Bc,
                                                  int T, int P)
{
    size_t VT = (size_t)Bv * T, total = (size_t)Bc * P * VT;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        size_t cp = e / VT, vt = e % VT, v = vt / (size_t)T;
        size_t c = cp / (size_t)P, p = cp % (size_t)P;
        sc.dg[e] = vtr_phrase_attention_dR(sc.dg[e], ws.nv[vt], ws.np[cp],
                                           sc.du_coef[(v * Bc + c) * P + p], ws.pnorm[cp], ws.w[e]);
    }
}

// dx (N,D) += coef[n] x[n] at the rows n with (n % T) < lengths[n / T] (lengths NULL: all
// rows), one element per thread: the norms' gradients
__global__ static void phrase_attention_norm_grad_kernel(float *dx, const float *coef,
                                                         const float *x, const int *lengths, long N,
                                                         int T, int D)
{
    size_t total = (size_t)N * D;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        size_t n = e / (size_t)D;
        if (!lengths || (int)(n % (size_t)T) < lengths[n / (size_t)T])
            dx[e] += coef[n] * x[e];
    }
}

extern "C" vtr_status vtr_cuda_phrase_attention_score_forward(
    float *scores, void *workspace, const float *vid, const int *vid_lengths, const float *phrases,
    const int *n_phrases, int Bv, int Bc, int T, int P, int D, float sigma, vtr_error *err)
{
    phrase_attention_workspace ws = phrase_attention_workspace_of(workspace, Bv, Bc, T, P, D);
    long VT = (long)Bv * T, CP = (long)Bc * P;

    phrase_attention_norms_kernel<<<vtr_cuda_blocks((size_t)VT), VTR_CUDA_THREADS>>>(ws.nv, NULL,
                                                                                     vid, VT, D);
    VTR_TRY(vtr_cuda_launched("phrase attention frame norms", err));
    phrase_attention_norms_kernel<<<vtr_cuda_blocks((size_t)CP), VTR_CUDA_THREADS>>>(
        ws.np, ws.pnorm, phrases, CP, D);
    VTR_TRY(vtr_cuda_launched("phrase attention phrase norms", err));
    // R (CP, VT) = phrases · vidᵀ into g, then cosine_sim's division (0 in the invalid rows)
    VTR_TRY(vtr_cuda_sgemm(false, true, (int)CP, (int)VT, D, 1.0f, phrases, D, vid, D, 0.0f, ws.g,
                           (int)VT, err));
    phrase_attention_cosine_kernel<<<vtr_cuda_blocks((size_t)CP * VT), VTR_CUDA_THREADS>>>(
        ws.g, ws.np, ws.nv, n_phrases, CP, VT, P);
    VTR_TRY(vtr_cuda_launched("phrase attention cosines", err));
    // |attended| comes from the Gram matrix of the video's real frames
    phrase_attention_gram_kernel<<<vtr_cuda_blocks((size_t)Bv * T * T), VTR_CUDA_THREADS>>>(
        ws.gram, vid, vid_lengths, Bv, T, D);
    VTR_TRY(vtr_cuda_launched("phrase attention Gram matrices", err));
    phrase_attention_pair_kernel<<<vtr_cuda_blocks((size_t)Bv * Bc), VTR_CUDA_THREADS>>>(
        scores, ws, vid_lengths, n_phrases, Bv, Bc, T, P, sigma);
    return vtr_cuda_launched("phrase attention pairs", err);
}

extern "C" vtr_status vtr_cuda_phrase_attention_score_backward(
    float *dvid, float *dphrases, void *scratch, const float *dscores, const float *vid,
    const int *vid_lengths, const float *phrases, const int *n_phrases, const void *workspace,
    int Bv, int Bc, int T, int P, int D, float sigma, vtr_error *err)
{
    if (!dvid && !dphrases)
        return VTR_OK;
    phrase_attention_workspace ws = phrase_attention_workspace_of(workspace, Bv, Bc, T, P, D);
    phrase_attention_scratch sc = phrase_attention_scratch_of(scratch, Bv, Bc, T, P, D);
    long VT = (long)Bv * T, CP = (long)Bc * P;

    // 1. per pair: d/d g and the pair's coefficients
    phrase_attention_pair_backward_kernel<<<vtr_cuda_blocks((size_t)Bv * Bc), VTR_CUDA_THREADS>>>(
        sc, ws, dscores, vid_lengths, n_phrases, Bv, Bc, T, P, sigma);
    VTR_TRY(vtr_cuda_launched("phrase attention pairs backward", err));
    // 2. per video and frame: the frames' norm coefficient and the Gram term
    phrase_attention_frame_backward_kernel<<<vtr_cuda_blocks((size_t)VT), VTR_CUDA_THREADS>>>(
        sc, ws, vid_lengths, Bv, Bc, T, P);
    VTR_TRY(vtr_cuda_launched("phrase attention frames backward", err));
    // 3. per phrase: its norm coefficients; then d/d g becomes d/d R
    phrase_attention_phrase_norm_kernel<<<vtr_cuda_blocks((size_t)CP), VTR_CUDA_THREADS>>>(
        sc, ws, Bv, Bc, P);
    VTR_TRY(vtr_cuda_launched("phrase attention phrase norms backward", err));
    phrase_attention_dR_kernel<<<vtr_cuda_blocks((size_t)CP * VT), VTR_CUDA_THREADS>>>(sc, ws, Bv,
                                                                                       Bc, T, P);
    VTR_TRY(vtr_cuda_launched("phrase attention product gradient", err));

    // 4. through R = phrases · vidᵀ (dg is 0 in the invalid rows) and the norms
    if (dvid) {
        VTR_TRY(vtr_cuda_sgemm(true, false, (int)VT, D, (int)CP, 1.0f, sc.dg, (int)VT, phrases, D,
                               1.0f, dvid, D, err));
        phrase_attention_norm_grad_kernel<<<vtr_cuda_blocks((size_t)VT * D), VTR_CUDA_THREADS>>>(
            dvid, sc.dnv, vid, vid_lengths, VT, T, D);
        VTR_TRY(vtr_cuda_launched("phrase attention frame norm gradient", err));
        long long tt = (long long)T * T, td = (long long)T * D;
        VTR_TRY(vtr_cuda_sgemm_batched(false, false, T, D, T, 1.0f, sc.M, T, tt, vid, D, td, 1.0f,
                                       dvid, D, td, Bv, err));
    }
    if (dphrases) {
        VTR_TRY(vtr_cuda_sgemm(false, false, (int)CP, D, (int)VT, 1.0f, sc.dg, (int)VT, vid, D,
                               1.0f, dphrases, D, err));
        phrase_attention_norm_grad_kernel<<<vtr_cuda_blocks((size_t)CP * D), VTR_CUDA_THREADS>>>(
            dphrases, sc.dnp, phrases, NULL, CP, P, D);
        VTR_TRY(vtr_cuda_launched("phrase attention phrase norm gradient", err));
    }
    return VTR_OK;
}
