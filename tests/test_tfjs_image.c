/* tests/interop/tfjs_image.h draws the same pictures as tests/fixtures/tfjs_features.js:
 * the pixel sums of both pictures at 224 and 299 must equal the ones the JS wrote to
 * tests/fixtures/tfjs/image_checksum.txt ("SIZE SUM" lines). */
#include <stdio.h>

#include "check.h"
#include "interop/tfjs_image.h"

TEST(tfjs_image_matches_js_checksum)
{
    int size[2];
    long long js_sum[2];
    FILE *f = fopen("tests/fixtures/tfjs/image_checksum.txt", "r");
    CHECK_MSG(f, "tests/fixtures/tfjs/image_checksum.txt not found (run from the top)");
    int read = fscanf(f, "%d %lld %d %lld", &size[0], &js_sum[0], &size[1], &js_sum[1]);
    fclose(f);
    CHECK_EQ_INT(read, 4);
    for (int k = 0; k < 2; k++) {
        long long sum = 0;
        for (int n = 0; n < 2; n++)
            for (int y = 0; y < size[k]; y++)
                for (int x = 0; x < size[k]; x++)
                    for (int c = 0; c < 3; c++)
                        sum += tfjs_image_pixel(n, y, x, c);
        CHECK_MSG(sum == js_sum[k], "size %d: C sum %lld, JS sum %lld", size[k], sum, js_sum[k]);
    }
}
