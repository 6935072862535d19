/* Stretch plan (stretch_plan.h). */
#include "stretch_plan.h"

#include <stdbool.h>

/* Seconds a target costs beyond the video before it: about one frame's decoding. */
#define TARGET_COST_S 0.04
/* Less video than this in all: one decoder (opening the file again costs more). */
#define MIN_TOTAL_S 2.0
/* A plan whose longest stretch keeps more than this share of the cost: one decoder. */
#define MAX_SHARE 0.8

/* Whether the picker jumps to targets[k]'s keyframe: it comes after targets[k-1]'s. */
static bool jumps_at(const int64_t *keyframes, int64_t k)
{
    return keyframes[k] != VTR_STRETCH_NO_KEYFRAME &&
           (keyframes[k - 1] == VTR_STRETCH_NO_KEYFRAME || keyframes[k] > keyframes[k - 1]);
}

/* Whether one decoder surely jumps somewhere (stretch_plan.h): at a target whose keyframe
 * comes after the previous target's and more than lead ticks after the previous target. */
static bool surely_jumps(const int64_t *targets, const int64_t *keyframes, int64_t n, int64_t lead)
{
    for (int64_t k = 1; k < n; k++)
        if (jumps_at(keyframes, k) && keyframes[k] - targets[k - 1] > lead)
            return true;
    return false;
}

/* The seconds of video decoded to reach targets[k] from where the previous one left. */
static double cost(const int64_t *targets, const int64_t *keyframes, int64_t k, int64_t start,
                   double tick_s)
{
    int64_t from;
    if (k == 0)
        from =
            keyframes[0] != VTR_STRETCH_NO_KEYFRAME && keyframes[0] > start ? keyframes[0] : start;
    else
        from = jumps_at(keyframes, k) ? keyframes[k] : targets[k - 1];
    double s = targets[k] > from ? (double)(targets[k] - from) * tick_s : 0;
    return s + TARGET_COST_S;
}

int vtr_stretch_plan(const int64_t *targets, const int64_t *keyframes, int64_t n, int64_t start,
                     double tick_s, int64_t lead, int max, int64_t *first)
{
    first[0] = 0;
    if (max < 2 || n < 2 ||
        (lead != VTR_STRETCH_JUMPS_LOSE_NOTHING && !surely_jumps(targets, keyframes, n, lead)))
        return 1;
    double total = 0;
    for (int64_t k = 0; k < n; k++)
        total += cost(targets, keyframes, k, start, tick_s);
    if (total < MIN_TOTAL_S)
        return 1;
    /* cut at the jump nearest each share total * c / max, in one pass: prev is the last
     * jump before the share, still free */
    int count = 1;
    int64_t prev = -1;
    double acc = cost(targets, keyframes, 0, start, tick_s), prev_acc = 0;
    for (int64_t k = 1; k < n && count < max; k++) {
        double c = cost(targets, keyframes, k, start, tick_s);
        if (!jumps_at(keyframes, k)) {
            acc += c;
            continue;
        }
        bool used = false;
        while (count < max && acc >= total * count / max) {
            double share = total * count / max;
            if (prev > first[count - 1] && share - prev_acc < acc - share) {
                first[count++] = prev;
                prev = -1;
            } else {
                first[count++] = k;
                used = true;
                break;
            }
        }
        if (!used) {
            prev = k;
            prev_acc = acc;
        }
        acc += c;
    }
    if (count < max && prev > first[count - 1])
        first[count++] = prev;
    /* the longest stretch's cost */
    double longest = 0, here = 0;
    for (int64_t k = 0, s = 1; k < n; k++) {
        if (s < count && k == first[s]) {
            longest = here > longest ? here : longest;
            here = 0;
            s++;
        }
        here += cost(targets, keyframes, k, start, tick_s);
    }
    longest = here > longest ? here : longest;
    return longest > MAX_SHARE * total ? 1 : count;
}
