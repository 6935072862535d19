/* Files of named tensors in either format (tensor_file.h). */
#include "tensor_file.h"

#include <string.h>

#include "pth.h"

static vtr_status parse_either(const void *buf, size_t len, vtr_safetensors *out, vtr_error *err)
{
    /* torch.save's legacy format starts with pickle protocol 2 and a LONG1 magic number */
    static const unsigned char legacy[] = {0x80, 0x02, 0x8a, 0x0a};
    if (len >= 4 && !memcmp(buf, "PK\3\4", 4))
        return vtr_pth_parse(buf, len, out, err);
    if (len >= sizeof legacy && !memcmp(buf, legacy, sizeof legacy)) {
        memset(out, 0, sizeof *out);
        return vtr_fail(err, VTR_ERR_UNSUPPORTED, "a torch.save file of the format before "
                        "PyTorch 1.6, which vtr does not read: convert it with "
                        "torch.save(torch.load(f), f) in PyTorch 1.6 or later");
    }
    return vtr_safetensors_parse(buf, len, out, err);
}

vtr_status vtr_tensor_file_open(const char *path, vtr_safetensors *out, vtr_error *err)
{
    return vtr_safetensors_open_with(path, parse_either, out, err);
}
