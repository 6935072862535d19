/* Frame preprocessing for the CNN backbones: torchvision's ImageNet eval transform
 *     Resize(256) -> CenterCrop(224) -> ToTensor() -> Normalize(mean, std)
 * applied, as torchvision's reference scripts do, to a PIL image.
 *
 * Resize: the shorter side becomes `resize`, the longer int(resize * long / short);
 * nothing happens when the shorter side already has that length (torchvision returns
 * the image as is). The resampling is Pillow's (9.x) Image.resize with BILINEAR, which
 * always antialiases: a triangle filter widened by the scale when shrinking, fixed-point
 * weights of 22 bits, a horizontal then a vertical pass, each rounded and clipped to
 * uint8. vtr reproduces it bit for bit, so the cropped uint8 picture equals
 * np.array(CenterCrop(Resize(PIL.Image.fromarray(frame)))). (torchvision's tensor path,
 * antialias=True, differs from PIL by up to a few levels; antialias=False more.)
 *
 * CenterCrop: the crop x crop window at top = round((H - crop) / 2), left likewise,
 * round() being Python's (halves to even); a side shorter than crop is first padded with
 * zeros, (crop - side) // 2 before and the rest after, as torchvision does.
 *
 * ToTensor + Normalize: x = (v / 255 - mean[c]) / std[c] in float32, in that order of
 * operations, giving the same floats as torchvision.
 *
 * Frames already prepared: a frame of exactly crop x crop pixels is taken as resized and
 * cropped already (vtr-decode --size 224x224 does both, with its own resampler) and is
 * only normalized. torchvision would enlarge it to 256 and crop it back.
 *
 * Layouts: frames are uint8 RGB (H, W, 3), C order, as in frame records; the output is
 * float32 (3, OH, OW), the backbone's NCHW for one image.
 */
#ifndef VTR_PREPROCESS_H
#define VTR_PREPROCESS_H

#include <stdint.h>

#include "lib/error.h"

typedef struct vtr_preprocess_options {
    int resize;    /* length of the shorter side after resizing; 0: no resizing */
    int crop;      /* side of the square center crop; 0: no crop */
    float mean[3]; /* per channel, of v / 255 */
    float std[3];
} vtr_preprocess_options;

/* torchvision's ImageNet eval transform: 256, 224, mean (0.485, 0.456, 0.406), std
 * (0.229, 0.224, 0.225). */
void vtr_preprocess_defaults(vtr_preprocess_options *opt);

/* Marks every field unset (resize and crop -1, mean and std NaN), for a program that
 * learns its defaults from the backbone's weights (vtr_backbone_preprocess) only after
 * parsing its options. */
void vtr_preprocess_unset(vtr_preprocess_options *opt);

/* Sets the fields of opt that vtr_preprocess_unset left unset (a channel at a time) to
 * those of defaults. */
void vtr_preprocess_fill(vtr_preprocess_options *opt, const vtr_preprocess_options *defaults);

/* Checks the options: resize and crop in 0 .. 65536, std positive and finite, mean
 * finite; VTR_ERR_INVALID naming the field. */
vtr_status vtr_preprocess_check(const vtr_preprocess_options *opt, vtr_error *err);

/* Size (oh, ow) of the output for an h x w frame. */
void vtr_preprocess_size(const vtr_preprocess_options *opt, int h, int w, int *oh, int *ow);

/* Resize and crop: frame (h, w, 3) uint8 -> out (oh, ow, 3) uint8. Allocates scratch;
 * VTR_ERR_NOMEM when that fails, VTR_ERR_INVALID for an empty frame (h or w < 1) or a
 * resize that would make a side of more than 65536 pixels. Thread-safe. */
vtr_status vtr_preprocess_geometry(const uint8_t *frame, int h, int w,
                                   const vtr_preprocess_options *opt, uint8_t *out,
                                   vtr_error *err);

/* ToTensor + Normalize: img (h, w, 3) uint8 -> out (3, h, w) float32. */
void vtr_preprocess_normalize(const uint8_t *img, int h, int w, const float mean[3],
                              const float std[3], float *out);

/* The whole transform: frame (h, w, 3) uint8 -> out (3, oh, ow) float32 (sizes from
 * vtr_preprocess_size). Errors as vtr_preprocess_geometry. Thread-safe. */
vtr_status vtr_preprocess_frame(const uint8_t *frame, int h, int w,
                                const vtr_preprocess_options *opt, float *out, vtr_error *err);

#endif
