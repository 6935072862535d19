/* Frame conversion: a decoded picture to upright RGB24 at the requested size.
 *
 * Order of operations, all in one place so that every path (sampled or straight decode)
 * gives the same bytes for the same frame:
 *   1. plan (vtr_frame_geometry_plan): the displayed size dw x dh (the coded size with
 *      square pixels, widened by a sample aspect ratio over 1, heightened by one under 1,
 *      as players show it, then turned by the orientation); the scaled size sw x sh in
 *      display space:
 *        no size requested:  dw x dh;
 *        stretch:            exactly W x H;
 *        shorter-side:       the aspect ratio kept, the smallest size covering W x H
 *                            (for a square W x H: the shorter side becomes W);
 *      then the output: with --crop center the W x H window at ((sw - W) / 2,
 *      (sh - H) / 2); with --crop none all of sw x sh;
 *   2. libswscale converts the coded picture to RGB24 at sw x sh turned back to coded
 *      orientation (bicubic, accurate rounding, full chroma interpolation; the YUV matrix
 *      and range the frame declares, BT.601 limited when it declares none); an HDR frame
 *      (PQ or HLG) to 16-bit YUV 4:4:4 instead, which decode/hdr_tone.h makes SDR RGB24;
 *   3. the RGB picture is turned/mirrored upright and cropped in one copy.
 */
#ifndef VTR_FRAME_CONVERT_H
#define VTR_FRAME_CONVERT_H

#include <libavutil/frame.h>
#include <stddef.h>
#include <stdint.h>

#include "decode/orientation.h"
#include "lib/error.h"

typedef enum vtr_resize_mode { VTR_RESIZE_SHORTER_SIDE, VTR_RESIZE_STRETCH } vtr_resize_mode;
typedef enum vtr_crop_mode { VTR_CROP_CENTER, VTR_CROP_NONE } vtr_crop_mode;

typedef struct vtr_geometry_request {
    int width, height; /* 0 x 0: the displayed size, unscaled */
    vtr_resize_mode resize;
    vtr_crop_mode crop;
} vtr_geometry_request;

typedef struct vtr_frame_geometry {
    vtr_orientation orientation;
    int coded_w, coded_h;
    int display_w, display_h;
    int scaled_w, scaled_h;    /* display space */
    int crop_x, crop_y;        /* in the scaled picture */
    int out_w, out_h;
} vtr_frame_geometry;

/* Plans the conversion of coded_w x coded_h pictures of sample aspect ratio
 * sar_num:sar_den shown with orientation o. */
vtr_status vtr_frame_geometry_plan(int coded_w, int coded_h, int sar_num, int sar_den,
                                   const vtr_orientation *o, const vtr_geometry_request *req,
                                   vtr_frame_geometry *g, vtr_error *err);

typedef struct vtr_frame_converter vtr_frame_converter;

/* NULL when out of memory. */
vtr_frame_converter *vtr_frame_converter_new(void);
void vtr_frame_converter_free(vtr_frame_converter *c);

/* Converts frame to out: g->out_h rows of g->out_w * 3 bytes, RGB. A frame whose size
 * differs from the planned coded size is scaled to the same output. */
vtr_status vtr_frame_convert(vtr_frame_converter *c, const AVFrame *frame,
                             const vtr_frame_geometry *g, uint8_t *out, vtr_error *err);

/* out[i] = (rgb[i] / 255 - mean[i % 3]) / std[i % 3] for `pixels` RGB pixels. */
void vtr_rgb_normalize(const uint8_t *rgb, size_t pixels, const float mean[3],
                       const float std[3], float *out);

#endif
