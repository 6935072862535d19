/* HEIF images through libheif (heif_image.h). */
#include "heif_image.h"

#include <libheif/heif.h>
#include <stdlib.h>
#include <string.h>

#include "lib/file.h"

bool vtr_heif_is(const char *path)
{
    static const char brands[][4] = {"heic", "heix", "heim", "heis", "hevc",
                                     "hevx", "mif1", "msf1", "avif"};
    uint8_t b[12];
    if (vtr_read_head(path, b, sizeof b) < sizeof b || memcmp(b + 4, "ftyp", 4))
        return false;
    for (size_t i = 0; i < sizeof brands / sizeof brands[0]; i++)
        if (!memcmp(b + 8, brands[i], 4))
            return true;
    return false;
}

static vtr_status heif_failed(vtr_error *err, const char *path, struct heif_error e)
{
    /* libheif files its security limits (a picture too large) under memory errors */
    if (e.code == heif_error_Memory_allocation_error &&
        e.subcode != heif_suberror_Security_limit_exceeded)
        return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", path);
    /* its messages may end with a line break */
    return vtr_fail(err, VTR_ERR_FORMAT, "%s: HEIF image libheif cannot decode: %.*s", path,
                    (int)strcspn(e.message, "\n"), e.message);
}

vtr_status vtr_heif_decode(const char *path, vtr_heif_picture *out, vtr_error *err)
{
    *out = (vtr_heif_picture){0};
    struct heif_context *ctx = heif_context_alloc();
    struct heif_image_handle *handle = NULL;
    struct heif_image *img = NULL;
    if (!ctx)
        return vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", path);
    /* at most 16384 x 16384 pixels, about FFmpeg's cap for a picture (libheif's own:
     * 32768 x 32768, 3 GiB of RGB from a file of a few kilobytes) */
    heif_context_set_maximum_image_size_limit(ctx, 16384);
    vtr_status st = VTR_OK;
    struct heif_error e = heif_context_read_from_file(ctx, path, NULL);
    if (e.code == heif_error_Ok)
        e = heif_context_get_primary_image_handle(ctx, &handle);
    /* default options: the file's rotation and mirroring applied */
    if (e.code == heif_error_Ok)
        e = heif_decode_image(handle, &img, heif_colorspace_RGB, heif_chroma_interleaved_RGB, NULL);
    if (e.code != heif_error_Ok) {
        st = heif_failed(err, path, e);
        goto end;
    }
    int stride;
    const uint8_t *rgb = heif_image_get_plane_readonly(img, heif_channel_interleaved, &stride);
    int w = heif_image_get_width(img, heif_channel_interleaved);
    int h = heif_image_get_height(img, heif_channel_interleaved);
    if (!rgb || w <= 0 || h <= 0) {
        st = vtr_fail(err, VTR_ERR_FORMAT, "%s: HEIF image without RGB pixels", path);
        goto end;
    }
    size_t row = (size_t)w * 3;
    if (!(out->rgb = malloc(row * (size_t)h))) {
        st = vtr_fail(err, VTR_ERR_NOMEM, "%s: out of memory", path);
        goto end;
    }
    for (int y = 0; y < h; y++)
        memcpy(out->rgb + row * (size_t)y, rgb + (size_t)stride * (size_t)y, row);
    out->width = w;
    out->height = h;
end:
    heif_image_release(img);
    heif_image_handle_release(handle);
    heif_context_free(ctx);
    return st;
}

void vtr_heif_picture_free(vtr_heif_picture *p)
{
    free(p->rgb);
    *p = (vtr_heif_picture){0};
}
