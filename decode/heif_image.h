/* HEIF images: a phone's HEIC photos, which FFmpeg 5.1 cannot read, and AVIF stills,
 * which it reads as a one-frame video: decoded with libheif into one packed RGB picture
 * (its rotation applied), which the video reader then demuxes as a raw frame. */
#ifndef VTR_HEIF_IMAGE_H
#define VTR_HEIF_IMAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/error.h"

typedef struct vtr_heif_picture {
    uint8_t *rgb; /* height rows of width * 3 bytes, no padding; NULL when empty */
    int width, height;
} vtr_heif_picture;

/* Whether path begins as a HEIF still image: ISO media (an ftyp box) of a HEIF brand
 * (heic, heix, mif1, ..., avif). An image sequence (avis, a video) is not one. */
bool vtr_heif_is(const char *path);

/* Decodes the primary image of the HEIF file at path into *out, turned and mirrored as the
 * file says (its irot and imir properties, applied by libheif), 8-bit RGB. A file libheif
 * cannot decode fails with VTR_ERR_FORMAT naming path and libheif's reason. */
vtr_status vtr_heif_decode(const char *path, vtr_heif_picture *out, vtr_error *err);

void vtr_heif_picture_free(vtr_heif_picture *p);

#endif
