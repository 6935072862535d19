#include "precision.h"

#include <string.h>

const char *vtr_precision_name(vtr_precision p)
{
    return p == VTR_PRECISION_BF16 ? "bfloat16" : p == VTR_PRECISION_TF32 ? "tf32" : "float32";
}

bool vtr_precision_parse(const char *name, vtr_precision *out)
{
    if (strcmp(name, "float32") == 0)
        *out = VTR_PRECISION_F32;
    else if (strcmp(name, "bfloat16") == 0)
        *out = VTR_PRECISION_BF16;
    else if (strcmp(name, "tf32") == 0)
        *out = VTR_PRECISION_TF32;
    else
        return false;
    return true;
}
