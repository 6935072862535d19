/* Small JPEG pictures of frames, for vtr-serve's result pages: a frame scaled (bicubic,
 * keeping its shape) to fit a box and encoded with FFmpeg's MJPEG encoder. */
#ifndef VTR_THUMBNAIL_H
#define VTR_THUMBNAIL_H

#include <stddef.h>
#include <stdint.h>

#include "lib/error.h"

/* The box vtr-index's pictures fit in. */
#define VTR_THUMBNAIL_WIDTH 160
#define VTR_THUMBNAIL_HEIGHT 120
#define VTR_THUMBNAIL_QUALITY 5 /* FFmpeg's qscale: about 5 KB a picture */

/* Encodes the RGB frame rgb (h, w, 3; uint8, rows packed) scaled to fit max_w x max_h
 * (never enlarged; at least 1 x 1) as a JPEG of quality q (2 best .. 31 worst): *jpeg
 * (malloc'ed, *size bytes). VTR_ERR_INVALID for a frame or box of no pixels,
 * VTR_ERR_CODEC when FFmpeg lacks the encoder or fails, VTR_ERR_NOMEM. */
vtr_status vtr_thumbnail_jpeg(const uint8_t *rgb, int h, int w, int max_w, int max_h, int q,
                              uint8_t **jpeg, size_t *size, vtr_error *err);

#endif
