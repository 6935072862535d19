/* The precision of a training step's matrix products (train.precision; lib/matmul.h runs
 * them on the CPU, cuBLAS on a GPU). */
#ifndef VTR_PRECISION_H
#define VTR_PRECISION_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum vtr_precision {
    VTR_PRECISION_F32,  /* "float32" */
    VTR_PRECISION_BF16, /* "bfloat16": bfloat16 products, float32 everything else (CPUs) */
    VTR_PRECISION_TF32, /* "tf32": a GPU's tensor-core products, operands rounded to 10
                           mantissa bits, float32 sums and everything else (GPUs) */
} vtr_precision;

/* "float32" / "bfloat16" / "tf32". */
const char *vtr_precision_name(vtr_precision p);

/* The precision named `name`; false for any other name. */
bool vtr_precision_parse(const char *name, vtr_precision *out);

#ifdef __cplusplus
}
#endif

#endif
