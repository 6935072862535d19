/* The entries of the hinge loss (match/hinge_loss.h): each loads the CUDA backend on
 * first use and calls its function of the same name (lib/cuda_loader.h). */
#include "match/hinge_loss.h"
#include "lib/cuda_loader.h"

VTR_CUDA_ENTRY(vtr_cuda_hinge_loss_backward,
               (float *dS, float dloss, const float *S, int B, float margin,
                vtr_hinge_negatives negatives, vtr_reduction reduction, vtr_error *err),
               (dS, dloss, S, B, margin, negatives, reduction, err))

VTR_CUDA_ENTRY(vtr_cuda_hinge_loss_forward,
               (float *loss, const float *S, int B, float margin, vtr_hinge_negatives negatives,
                vtr_reduction reduction, vtr_error *err),
               (loss, S, B, margin, negatives, reduction, err))
