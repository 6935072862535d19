/* lib/device.h's device names. The rest of lib/device.h is lib/device.cu, reached through
 * lib/cuda_entries.c. */
#include "device.h"

#include <stdlib.h>
#include <string.h>

vtr_status vtr_device_parse(const char *name, vtr_device *out, int *index, vtr_error *err)
{
    *index = 0;
    if (strcmp(name, "cpu") == 0) {
        *out = VTR_DEVICE_CPU;
        return VTR_OK;
    }
    *out = VTR_DEVICE_CUDA;
    if (strcmp(name, "cuda") == 0)
        return VTR_OK;
    if (strncmp(name, "cuda:", 5) == 0 && name[5] >= '0' && name[5] <= '9') {
        char *end;
        long n = strtol(name + 5, &end, 10);
        if (!*end && n <= 1024) {
            *index = (int)n;
            return VTR_OK;
        }
    }
    char shown[64];
    return vtr_fail(err, VTR_ERR_INVALID, "unknown device '%s' (expected cpu, cuda or cuda:N)",
                    vtr_printable(name, strlen(name), shown, sizeof shown));
}
