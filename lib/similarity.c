#include "similarity.h"

#include "matmul.h"

void vtr_cosine_similarity_forward(float *S, const float *a, const float *b, int NA, int NB, int D)
{
    vtr_matmul(CblasNoTrans, CblasTrans, NA, NB, D, 1.0f, a, D, b, D, 0.0f, S, NB);
}

void vtr_cosine_similarity_backward(float *da, float *db, const float *dS, const float *a,
                                    const float *b, int NA, int NB, int D)
{
    if (da)
        vtr_matmul(CblasNoTrans, CblasNoTrans, NA, D, NB, 1.0f, dS, NB, b, D, 1.0f, da, D);
    if (db)
        vtr_matmul(CblasTrans, CblasNoTrans, NB, D, NA, 1.0f, dS, NB, a, D, 1.0f, db, D);
}
