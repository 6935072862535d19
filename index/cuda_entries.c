/* The entries of the search's top-k (index/topk.h): each loads the CUDA backend on
 * first use and calls its function of the same name (lib/cuda_loader.h). */
#include "index/topk.h"
#include "lib/cuda_loader.h"

VTR_CUDA_FREE_ENTRY(vtr_topk_cuda_free, vtr_topk_cuda)

VTR_CUDA_ENTRY(vtr_topk_cuda_new, (const vtr_topk_matrix *m, vtr_topk_cuda **out, vtr_error *err),
               (m, out, err))

VTR_CUDA_ENTRY(vtr_topk_cuda_search,
               (vtr_topk_cuda *c, const vtr_tensor *queries, int64_t k, int64_t *rows,
                float *scores, int64_t *found, vtr_error *err),
               (c, queries, k, rows, scores, found, err))
