#define _POSIX_C_SOURCE 200809L /* fdopen */
#include "hash.h"

#include <libavutil/hash.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "file.h"

#define READ_CHUNK (1 << 20)

vtr_status vtr_file_sha256(const char *path, char hex[VTR_SHA256_HEX_SIZE], vtr_error *err)
{
    hex[0] = '\0';
    vtr_status st = VTR_OK;
    struct AVHashContext *ctx = NULL;
    uint8_t *buf = NULL;
    int fd;
    if ((st = vtr_open_regular(path, &fd, NULL, err)) != VTR_OK)
        return st;
    FILE *fp = fdopen(fd, "rb");
    if (!fp) {
        st = vtr_fail_errno(err, "%s", path);
        close(fd);
        return st;
    }
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
