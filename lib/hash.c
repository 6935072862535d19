#include "hash.h"

#include <libavutil/hash.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define READ_CHUNK (1 << 20)

vtr_status vtr_file_sha256(const char *path, char hex[VTR_SHA256_HEX_SIZE], vtr_error *err)
{
    hex[0] = '\0';
    vtr_status st = VTR_OK;
    struct AVHashContext *ctx = NULL;
    uint8_t *buf = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return vtr_fail_errno(err, "%s", path);
    buf = malloc(READ_CHUNK);
    if (!buf || av_hash_alloc(&ctx, "SHA256") < 0) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory for hashing", path);
        goto end;
    }
    av_hash_init(ctx);
    size_t n;
    while ((n = fread(buf, 1, READ_CHUNK, fp)) > 0)
        av_hash_update(ctx, buf, n);
    if (ferror(fp)) {
        st = vtr_fail_errno(err, "%s: read", path);
        goto end;
    }
    av_hash_final_hex(ctx, (uint8_t *)hex, VTR_SHA256_HEX_SIZE);
end:
    av_hash_freep(&ctx);
    free(buf);
    fclose(fp);
    return st;
}
