#include "similarity.h"

#include <cblas.h>

void vtr_cosine_similarity_forward(float *S, const float *a, const float *b, int NA, int NB, int D)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, NA, NB, D, 1.0f, a, D, b, D, 0.0f, S, NB);
}

void vtr_cosine_similarity_backward(float *da, float *db, const float *dS, const float *a,
                                    const float *b, int NA, int NB, int D)
{
    if (da)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, NA, D, NB, 1.0f, dS, NB, b, D, 1.0f,
                    da, D);
    if (db)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, NB, D, NA, 1.0f, dS, NB, a, D, 1.0f,
                    db, D);
}
