/* A GIF of one picture (a logo, a still saved as GIF) told from an animation: FFmpeg's GIF
 * demuxer makes every GIF a video, a still one a 0.1-s clip of one frame. */
#ifndef VTR_GIF_STILL_H
#define VTR_GIF_STILL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether the GIF file's `size` bytes at `data` hold exactly one picture (image
 * descriptor), counted through its blocks up to the trailer or the end of the data. False
 * for two or more, none, and for bytes that are not GIF blocks (FFmpeg then decides). */
bool vtr_gif_is_still(const uint8_t *data, size_t size);

#endif
