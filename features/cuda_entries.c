/* The entries of the backbone's cuDNN engine (features/conv.h): each loads the CUDA backend on
 * first use and calls its function of the same name (lib/cuda_loader.h). */
#include "features/conv.h"
#include "lib/cuda_loader.h"

VTR_CUDA_FREE_ENTRY(vtr_conv_cuda_free, vtr_conv_cuda)

VTR_CUDA_ENTRY(vtr_conv_cuda_new, (const vtr_conv_net *net, vtr_conv_cuda **out, vtr_error *err),
               (net, out, err))

VTR_CUDA_ENTRY(vtr_conv_cuda_set_bf16, (vtr_conv_cuda * c, bool bf16, vtr_error *err),
               (c, bf16, err))

VTR_CUDA_ENTRY(vtr_conv_cuda_run,
               (vtr_conv_cuda *c, const float *in, int n, int h, int w, float *out,
                vtr_error *err),
               (c, in, n, h, w, out, err))
