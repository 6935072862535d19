/* Files of named tensors in either format vtr reads, told apart by their first bytes, not
 * their names: a torch.save zip ("PK\3\4", lib/pth.h) or safetensors (anything else,
 * lib/safetensors.h). Weights come in both (vtr-features, vtr-index).
 */
#ifndef VTR_TENSOR_FILE_H
#define VTR_TENSOR_FILE_H

#include "error.h"
#include "safetensors.h"

/* Maps path read-only and parses it as a torch.save zip or a safetensors file into out
 * (the table of lib/safetensors.h; its data points into the mapping; release it with
 * vtr_safetensors_close). Errors are those of vtr_pth_parse or vtr_safetensors_parse
 * prefixed with the path, VTR_ERR_IO when it cannot be mapped; a torch.save file of the
 * format before PyTorch 1.6 (a bare pickle) is VTR_ERR_UNSUPPORTED saying how to convert
 * it. */
vtr_status vtr_tensor_file_open(const char *path, vtr_safetensors *out, vtr_error *err);

#endif
