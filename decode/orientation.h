/* Orientation: how a coded picture must be turned and mirrored to be shown upright.
 *
 * Phone video is often coded sideways with a display matrix (mp4 tkhd, FFmpeg's
 * AV_PKT_DATA_DISPLAYMATRIX side data) that tells players how to turn it. vtr applies
 * it the way FFmpeg's command-line tool autorotates (fftools, FFmpeg 6.1): the rotation
 * theta = -round(av_display_rotation_get(matrix)) modulo 360, clockwise, snapped to a
 * multiple of 90 degrees, plus the mirror images that the matrix's signs call for.
 *
 * A vtr_orientation maps a pixel (dx, dy) of the displayed picture to the coded picture
 * (cw x ch) as: (u, v) = transpose ? (dy, dx) : (dx, dy);
 *               sx = flip_x ? cw - 1 - u : u;  sy = flip_y ? ch - 1 - v : v.
 */
#ifndef VTR_ORIENTATION_H
#define VTR_ORIENTATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct vtr_orientation {
    int rotation;   /* clockwise degrees applied for display: 0, 90, 180 or 270 */
    bool mirrored;  /* a mirror image on top of the rotation */
    bool transpose; /* the display swaps width and height */
    bool flip_x, flip_y;
} vtr_orientation;

/* The identity: shown as coded. */
vtr_orientation vtr_orientation_identity(void);

/* From a 3x3 display matrix (16.16 and 2.30 fixed point, FFmpeg layout); NULL or a
 * degenerate matrix gives the identity. */
vtr_orientation vtr_orientation_from_matrix(const int32_t *matrix);

/* From an EXIF (TIFF) Orientation value, 1..8, as FFmpeg's JPEG decoder turns it into a
 * display matrix; any other value gives the identity. */
vtr_orientation vtr_orientation_from_exif(int value);

/* The orientation that turns a picture `degrees` (a multiple of 90) clockwise. */
vtr_orientation vtr_orientation_from_rotation(int degrees);

/* Displayed size of a coded w x h picture. */
void vtr_orientation_display_size(const vtr_orientation *o, int w, int h, int *dw, int *dh);

/* Copies the displayed window (x0, y0, ow, oh) of the coded RGB24 picture src (sw x sh,
 * rows src_stride bytes apart) into dst (ow x oh, packed rows of ow * 3 bytes). The window
 * must lie inside the displayed picture. */
void vtr_orientation_copy_rgb(const vtr_orientation *o, const uint8_t *src, int sw, int sh,
                              size_t src_stride, int x0, int y0, int ow, int oh, uint8_t *dst);

#endif
