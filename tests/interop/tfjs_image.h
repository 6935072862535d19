/* The two test pictures behind tests/fixtures/tfjs/ (the TF.js parity fixtures for the
 * MobileNetV2 and InceptionV3 forward passes). tests/fixtures/tfjs_features.js computes the
 * same integers (tfjsImagePixel); change both together and regenerate the fixtures.
 *
 * Picture n (0 or 1), 0 <= y, x < 299: one fixed picture, of which a 224x224 input sees the
 * top-left corner. On a smooth gradient (along x in picture 0, along y in picture 1) lie a
 * disc, a rectangle, a bar on the right (touching the 224 and the 299 border) and a patch of
 * fine diagonal stripes (period 6 pixels), placed and coloured differently in each picture.
 * The model's input is tfjs_image_pixel(...) / 255.0f, RGB, HWC.
 * tests/fixtures/tfjs/image_checksum.txt holds the sum of all pixels of both pictures. */
#ifndef VTR_TEST_TFJS_IMAGE_H
#define VTR_TEST_TFJS_IMAGE_H

#include <stdint.h>

static inline uint8_t tfjs_image_pixel(int n, int y, int x, int c)
{
    static const uint8_t disc[2][3] = {{230, 40, 40}, {250, 220, 30}};
    static const uint8_t rect[2][3] = {{30, 60, 210}, {20, 170, 60}};
    static const uint8_t bar[2][3] = {{250, 250, 250}, {10, 10, 10}};
    int cx = 80 + 70 * n, cy = 90 - 20 * n, r = 40 + 12 * n;
    if ((x - cx) * (x - cx) + (y - cy) * (y - cy) <= r * r)
        return disc[n][c];
    if (x >= 130 - 90 * n && x < 200 - 90 * n && y >= 140 && y < 175 + 40 * n)
        return rect[n][c];
    if (x >= 190 && y >= 20 && y < 60 + 30 * n)
        return bar[n][c];
    if (x >= 20 + 130 * n && x < 120 + 130 * n && y >= 185 && y < 220)
        return (x + y) / 3 % 2 ? 245 : 15;
    int u = n ? y : x, v = n ? x : y; /* u: the gradient's main direction */
    switch (c) {
    case 0: return (uint8_t)(20 + u * 200 / 299);
    case 1: return (uint8_t)(40 + v * 120 / 299);
    default: return (uint8_t)(100 + (u + v) * 90 / 598);
    }
}

#endif
