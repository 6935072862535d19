#include "presentation_order.h"

#include <stdlib.h>
#include <string.h>

void vtr_presentation_order_reset(vtr_presentation_order *po)
{
    po->count = 0;
    po->complete = false;
}

void vtr_presentation_order_free(vtr_presentation_order *po)
{
    free(po->pts);
    memset(po, 0, sizeof *po);
}

/* first index with pts[i] > p */
static int64_t upper_bound(const vtr_presentation_order *po, int64_t p)
{
    int64_t lo = 0, hi = po->count;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (po->pts[mid] <= p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* first index with pts[i] >= p */
static int64_t lower_bound(const vtr_presentation_order *po, int64_t p)
{
    int64_t lo = 0, hi = po->count;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (po->pts[mid] < p)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

bool vtr_presentation_order_fits(const vtr_presentation_order *po, int64_t pts)
{
    int64_t i = upper_bound(po, pts);
    return (i == 0 || po->pts[i - 1] != pts) && po->count - i <= VTR_MAX_REORDER;
}

vtr_status vtr_presentation_order_add(vtr_presentation_order *po, int64_t pts, vtr_error *err)
{
    if (po->count == po->capacity) {
        int64_t cap = po->capacity ? 2 * po->capacity : 256;
        int64_t *p = realloc(po->pts, (size_t)cap * sizeof *p);
        if (!p)
            return vtr_fail(err, VTR_ERR_NOMEM, "out of memory for timestamps");
        po->pts = p;
        po->capacity = cap;
    }
    /* packets arrive nearly sorted: search from the end */
    int64_t i = po->count;
    while (i > 0 && po->pts[i - 1] > pts)
        i--;
    memmove(po->pts + i + 1, po->pts + i, (size_t)(po->count - i) * sizeof *po->pts);
    po->pts[i] = pts;
    po->count++;
    return VTR_OK;
}

bool vtr_presentation_order_settled(const vtr_presentation_order *po, int64_t t)
{
    return po->complete || po->count - upper_bound(po, t) > VTR_MAX_REORDER;
}

int64_t vtr_presentation_order_next(const vtr_presentation_order *po, int64_t p)
{
    int64_t i = upper_bound(po, p);
    return i < po->count ? po->pts[i] : INT64_MAX;
}

bool vtr_presentation_order_at(const vtr_presentation_order *po, int64_t t, int64_t *pts)
{
    int64_t i = upper_bound(po, t);
    if (i == 0)
        return false;
    *pts = po->pts[i - 1];
    return true;
}

int64_t vtr_presentation_order_rank(const vtr_presentation_order *po, int64_t p)
{
    return lower_bound(po, p);
}
