/* The Orientation tag of a TIFF file (tiff_orientation.h). */
#include "tiff_orientation.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { TAG_ORIENTATION = 274, TYPE_SHORT = 3 };

/* The n-byte (2 or 4) unsigned integer at p in the file's byte order. */
static uint32_t get(const uint8_t *p, int n, bool big_endian)
{
    uint32_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint32_t)p[big_endian ? n - 1 - i : i] << (8 * i);
    return v;
}

int vtr_tiff_orientation(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    uint8_t b[12];
    bool big = false;
    int value = 0;
    /* the header (byte order, 42, the first directory's offset), then the directory: a
     * count and 12-byte entries (tag, type, count, value) */
    if (fread(b, 1, 8, f) == 8 && (!memcmp(b, "II*\0", 4) || (big = !memcmp(b, "MM\0*", 4))) &&
        fseek(f, (long)get(b + 4, 4, big), SEEK_SET) == 0 && fread(b, 1, 2, f) == 2) {
        uint32_t n = get(b, 2, big);
        for (uint32_t i = 0; i < n && fread(b, 1, 12, f) == 12; i++)
            if (get(b, 2, big) == TAG_ORIENTATION) {
                if (get(b + 2, 2, big) == TYPE_SHORT && get(b + 4, 4, big) == 1)
                    value = (int)get(b + 8, 2, big);
                break;
            }
    }
    fclose(f);
    return value >= 1 && value <= 8 ? value : 0;
}
