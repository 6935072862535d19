/* Building a model's parameter set (lib/params.h) under the reference's state_dict names,
 * shared by the matching models (vse_model.h, hgr_model.h): one tensor, a GRU's four
 * tensors per direction, a GPO's block; and the uniform and orthogonal fills of their
 * initializations.
 */
#ifndef VTR_MODEL_PARAMS_H
#define VTR_MODEL_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"
#include "lib/params.h"
#include "lib/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Adds the tensor prefix + name (e.g. "img_enc." + "fc.weight") of ndim 0, 1 or 2 and shape
 * (d0, d1) (the first ndim used). Fails as vtr_param_set_add does. */
vtr_status vtr_model_param_add(vtr_param_set *ps, const char *prefix, const char *name,
                               vtr_dtype dtype, bool trainable, int ndim, int64_t d0, int64_t d1,
                               vtr_error *err);

/* A two-direction GRU's tensors (input D, hidden H) in state_dict (= lib/gru.h) order under
 * prefix ("txt_enc.rnn."), so that they form lib/gru.h's flat block. */
vtr_status vtr_model_param_add_gru(vtr_param_set *ps, const char *prefix, int D, int H,
                                   vtr_error *err);

/* A GPO's tensors under prefix + "gpool." (prefix "img_enc." gives img_enc.gpool.gru.* and
 * img_enc.gpool.linear.weight (1,hidden)), in aggregate/gpo.h's flat layout. */
vtr_status vtr_model_param_add_gpo(vtr_param_set *ps, const char *prefix, int d_pe, int hidden,
                                   vtr_error *err);

/* x (n) uniform in (-bound, bound) from rng */
void vtr_model_fill_uniform(float *x, size_t n, float bound, vtr_rng *rng);

/* PyTorch's default initialization of entry i of a finalized set, from rng, by its name and
 * shape: a GRU tensor (".gru." or ".rnn." in its name) uniform(±1/sqrt(hidden)), hidden =
 * rows / 3; otherwise a Linear weight (2-D, (out, in)) kaiming-uniform(a = sqrt 5) =
 * uniform(±1/sqrt(in)), or a Linear bias (1-D) uniform(±1/sqrt(in)) of its weight, the
 * entry before it. */
void vtr_model_fill_default(const vtr_param_set *ps, size_t i, vtr_rng *rng);

/* Doubles of vtr_model_fill_orthogonal's scratch for a (rows, cols) tensor. */
size_t vtr_model_orthogonal_scratch_size(int rows, int cols);

/* nn.init.orthogonal_ (gain 1) of x, a (rows, cols) row-major tensor: a Gaussian matrix
 * from rng (row-major order), its QR decomposition (of the transpose when rows < cols), Q's
 * columns signed by R's diagonal, as PyTorch does; so x has orthonormal columns when rows >=
 * cols (xᵀ x = I) and orthonormal rows when rows < cols (x xᵀ = I). The QR runs in double
 * (LAPACK's dgeqrf and dorgqr, which OpenBLAS exports) and the result is rounded to float.
 * scratch: vtr_model_orthogonal_scratch_size(rows, cols) doubles. */
void vtr_model_fill_orthogonal(float *x, int rows, int cols, vtr_rng *rng, double *scratch);

#ifdef __cplusplus
}
#endif

#endif
