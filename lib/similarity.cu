// CUDA side of lib/similarity.h: the cosine similarity matrix of l2-normalized rows is a
// matrix product, through cuBLAS.
#include "lib/cuda_launch.h"
#include "lib/nn_cuda.h"
#include "lib/similarity.h"

// a (NA,D), b (NB,D), S (NA,NB) = a · bᵀ
extern "C" vtr_status vtr_cuda_cosine_similarity_forward(float *S, const float *a, const float *b,
                                                         int NA, int NB, int D, vtr_error *err)
{
    return vtr_cuda_sgemm(false, true, NA, NB, D, 1.0f, a, D, b, D, 0.0f, S, NB, err);
}

// da (NA,D) += dS · b, db (NB,D) += dSᵀ · a; either may be NULL
extern "C" vtr_status vtr_cuda_cosine_similarity_backward(float *da, float *db, const float *dS,
                                                          const float *a, const float *b, int NA,
                                                          int NB, int D, vtr_error *err)
{
    if (da)
        VTR_TRY(vtr_cuda_sgemm(false, false, NA, D, NB, 1.0f, dS, NB, b, D, 1.0f, da, D, err));
    if (db)
        VTR_TRY(vtr_cuda_sgemm(true, false, NB, D, NA, 1.0f, dS, NB, a, D, 1.0f, db, D, err));
    return VTR_OK;
}
