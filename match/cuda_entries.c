/* The entries of the hinge and ADOPT losses (match/hinge_loss.h, match/adopt_loss.h), of
 * the evaluation's similarity tiles (match/retrieval_metrics.h) and of HGR's scores
 * (match/phrase_attention.h, match/hgr_score.h): each loads the CUDA
 * backend on first use and calls its function of the same name (lib/cuda_loader.h). */
#include "lib/cuda_loader.h"
#include "match/adopt_loss.h"
#include "match/hgr_score.h"
#include "match/hinge_loss.h"
#include "match/phrase_attention.h"
#include "match/retrieval_metrics.h"

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
