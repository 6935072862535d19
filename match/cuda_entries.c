/* The entries of the hinge and ADOPT losses (match/hinge_loss.h, match/adopt_loss.h), of
 * the evaluation's similarity tiles (match/retrieval_metrics.h), of HGR's scores
 * (match/phrase_attention.h, match/hgr_score.h) and of set embeddings' similarity and
 * regularisers (match/set_similarity.h): each loads the CUDA backend on first use and calls
 * its function of the same name (lib/cuda_loader.h). */
#include "lib/cuda_loader.h"
#include "match/adopt_loss.h"
#include "match/hgr_score.h"
#include "match/hinge_loss.h"
#include "match/phrase_attention.h"
#include "match/retrieval_metrics.h"
#include "match/set_similarity.h"

VTR_CUDA_ENTRY(vtr_cuda_hinge_loss_backward,
               (float *dS, float dloss, const float *S, int B, float margin,
                vtr_hinge_negatives negatives, vtr_reduction reduction, vtr_error *err),
               (dS, dloss, S, B, margin, negatives, reduction, err))

VTR_CUDA_ENTRY(vtr_cuda_hinge_loss_forward,
               (float *loss, const float *S, int B, float margin, vtr_hinge_negatives negatives,
                vtr_reduction reduction, vtr_error *err),
               (loss, S, B, margin, negatives, reduction, err))

VTR_CUDA_ENTRY(vtr_cuda_adopt_negatives,
               (int *K, const float *S, int B, int fixed_K, vtr_error *err),
               (K, S, B, fixed_K, err))

VTR_CUDA_ENTRY(vtr_cuda_adopt_loss_forward,
               (float *loss, const float *S, int B, const int *K, float tau,
                bool positive_in_denominator, vtr_reduction reduction, vtr_error *err),
               (loss, S, B, K, tau, positive_in_denominator, reduction, err))

VTR_CUDA_ENTRY(vtr_cuda_adopt_loss_backward,
               (float *dS, float dloss, const float *S, int B, const int *K, float tau,
                bool positive_in_denominator, vtr_reduction reduction, vtr_error *err),
               (dS, dloss, S, B, K, tau, positive_in_denominator, reduction, err))

VTR_CUDA_ENTRY(vtr_similarity_cuda_new,
               (const vtr_similarity_ensemble *e, int n_items, int n_caps,
                vtr_similarity_cuda **out, vtr_error *err),
               (e, n_items, n_caps, out, err))

VTR_CUDA_ENTRY(vtr_similarity_cuda_block,
               (void *ctx, int item0, int n_items, const int *caps, int n_caps, float *S,
                vtr_error *err),
               (ctx, item0, n_items, caps, n_caps, S, err))

VTR_CUDA_FREE_ENTRY(vtr_similarity_cuda_free, vtr_similarity_cuda)

VTR_CUDA_ENTRY(vtr_similarity_cuda_count,
               (vtr_similarity_cuda * g, int item0, const int *caps, int tile_items, int tile_caps,
                const vtr_rank_lists *rows, const vtr_rank_lists *cols, vtr_error *err),
               (g, item0, caps, tile_items, tile_caps, rows, cols, err))

VTR_CUDA_ENTRY(vtr_cuda_smooth_chamfer_forward,
               (float *S, long ldS, void *scratch, const float *a, const float *b, int Na, int Nb,
                int Ka, int Kb, int D, float alpha, vtr_error *err),
               (S, ldS, scratch, a, b, Na, Nb, Ka, Kb, D, alpha, err))

VTR_CUDA_ENTRY(vtr_cuda_smooth_chamfer_backward,
               (float *da, float *db, void *scratch, const float *dS, long ldS, const float *a,
                const float *b, int Na, int Nb, int Ka, int Kb, int D, float alpha, vtr_error *err),
               (da, db, scratch, dS, ldS, a, b, Na, Nb, Ka, Kb, D, alpha, err))

VTR_CUDA_ENTRY(vtr_cuda_set_diversity_forward,
               (float *loss, const float *r, int N, int K, int D, vtr_error *err),
               (loss, r, N, K, D, err))

VTR_CUDA_ENTRY(vtr_cuda_set_diversity_backward,
               (float *dr, float dloss, const float *r, int N, int K, int D, vtr_error *err),
               (dr, dloss, r, N, K, D, err))

VTR_CUDA_ENTRY(vtr_cuda_set_mmd_forward,
               (float *loss, void *scratch, const float *X, const float *Y, long nx, long ny, int D,
                float gamma, vtr_error *err),
               (loss, scratch, X, Y, nx, ny, D, gamma, err))

VTR_CUDA_ENTRY(vtr_cuda_set_mmd_backward,
               (float *dx, float *dy, float dloss, void *scratch, const float *X, const float *Y,
                long nx, long ny, int D, float gamma, vtr_error *err),
               (dx, dy, dloss, scratch, X, Y, nx, ny, D, gamma, err))

VTR_CUDA_ENTRY(vtr_cuda_hgr_fused_score_backward,
               (float *dglobal, float *dverb, float *dnoun, const float *dout, size_t n,
                vtr_error *err),
               (dglobal, dverb, dnoun, dout, n, err))

VTR_CUDA_ENTRY(vtr_cuda_hgr_fused_score_forward,
               (float *out, const float *global, const float *verb, const float *noun, size_t n,
                vtr_error *err),
               (out, global, verb, noun, n, err))

VTR_CUDA_ENTRY(vtr_cuda_phrase_attention_score_backward,
               (float *dvid, float *dphrases, void *scratch, const float *dscores, const float *vid,
                const int *vid_lengths, const float *phrases, const int *n_phrases,
                const void *workspace, int Bv, int Bc, int T, int P, int D, float sigma,
                vtr_error *err),
               (dvid, dphrases, scratch, dscores, vid, vid_lengths, phrases, n_phrases, workspace,
                Bv, Bc, T, P, D, sigma, err))

VTR_CUDA_ENTRY(vtr_cuda_phrase_attention_score_forward,
               (float *scores, void *workspace, const float *vid, const int *vid_lengths,
                const float *phrases, const int *n_phrases, int Bv, int Bc, int T, int P, int D,
                float sigma, vtr_error *err),
               (scores, workspace, vid, vid_lengths, phrases, n_phrases, Bv, Bc, T, P, D, sigma,
                err))
