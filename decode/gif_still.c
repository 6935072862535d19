/* A GIF of one picture (gif_still.h), from the block structure of GIF89a: a header, the
 * logical screen descriptor and its colour table, then extensions and pictures, each
 * followed by data sub-blocks, up to the trailer. */
#include "gif_still.h"

#include <string.h>

enum { EXTENSION = 0x21, PICTURE = 0x2c, TRAILER = 0x3b };

/* The size of the colour table a descriptor's flags byte announces. */
static size_t colour_table(uint8_t flags)
{
    return flags & 0x80 ? 3u << ((flags & 7) + 1) : 0;
}

/* The offset after the data sub-blocks (a length byte, that many bytes; length 0 ends
 * them) from offset at; size when they run past the end. */
static size_t skip_sub_blocks(const uint8_t *d, size_t size, size_t at)
{
    while (at < size && d[at])
        at += 1 + (size_t)d[at];
    return at < size ? at + 1 : size;
}

bool vtr_gif_is_still(const uint8_t *d, size_t size)
{
    /* "GIF87a" or "GIF89a", width, height, flags, background, aspect */
    if (size < 13 || (memcmp(d, "GIF87a", 6) && memcmp(d, "GIF89a", 6)))
        return false;
    size_t at = 13 + colour_table(d[10]);
    int pictures = 0;
    while (at < size && d[at] != TRAILER) {
        if (d[at] == EXTENSION) { /* introducer, label, sub-blocks */
            at = skip_sub_blocks(d, size, at + 2);
        } else if (d[at] == PICTURE) { /* left, top, width, height, flags; LZW code size */
            if (++pictures > 1 || at + 10 > size)
                break;
            at = skip_sub_blocks(d, size, at + 10 + colour_table(d[at + 9]) + 1);
        } else {
            return false;
        }
    }
    return pictures == 1;
}
