#include "gru.h"

#include <string.h>

#include "linear.h"
#include "matmul.h"

/* The input projections (x · W_ihᵀ and their gradients) run over the real positions only,
 * packed by item: item b's position t is row first[b] + t of a (total, *) matrix, total the
 * sum of the lengths, so padding costs no multiply-adds.
 *
 * The regions up to hg (workspace) and dh (scratch) are laid out as the CUDA backend
 * (lib/gru.cu) expects them; the packed regions come after. */

/* Byte offsets of the workspace's regions. */
typedef struct workspace_layout {
    size_t order; /* int (B): items by length, longest first */
    size_t gates; /* float (dirs, B*T, 4H): r, z, n and W_hn h + b_hn per real position,
                     packed by item (the first `total` rows) */
    size_t hprev; /* float (dirs, B*T, H): the state each step read, packed by step */
    size_t h;     /* float (B, H): the running state, in sorted order */
    size_t hg;    /* float (B, 3H): W_hh h + b_hh of one step */
    size_t first; /* int (B): packed row of each item's position 0 */
    size_t xpack; /* float (B*T, D): the real input rows, packed by item */
    size_t total;
} workspace_layout;

static workspace_layout workspace_layout_of(int B, int T, int D, int H, int dirs)
{
    size_t bt = (size_t)B * T;
    workspace_layout l;
    l.order = 0;
    l.gates = vtr_workspace_align(sizeof(int) * (size_t)B);
    l.hprev = l.gates + vtr_workspace_align(sizeof(float) * dirs * bt * 4 * H);
    l.h = l.hprev + vtr_workspace_align(sizeof(float) * dirs * bt * H);
    l.hg = l.h + vtr_workspace_align(sizeof(float) * (size_t)B * H);
    l.first = l.hg + vtr_workspace_align(sizeof(float) * (size_t)B * 3 * H);
    l.xpack = l.first + vtr_workspace_align(sizeof(int) * (size_t)B);
    l.total = l.xpack + vtr_workspace_align(sizeof(float) * bt * D);
    return l;
}

/* Byte offsets of the scratch's regions (one direction at a time). */
typedef struct scratch_layout {
    size_t dxg;    /* float (B*T, 3H): gradients of the input pre-activations, packed by
                      item */
    size_t dhg;    /* float (B*T, 3H): gradients of the hidden pre-activations, packed */
    size_t dh;     /* float (B, H): gradient of the running state, sorted order */
    size_t dxpack; /* float (B*T, D): the input gradient of both directions, packed by item */
    size_t total;
} scratch_layout;

static scratch_layout scratch_layout_of(int B, int T, int D, int H)
{
    size_t bt = (size_t)B * T;
    scratch_layout l;
    l.dxg = 0;
    l.dhg = vtr_workspace_align(sizeof(float) * bt * 3 * H);
    l.dh = l.dhg + vtr_workspace_align(sizeof(float) * bt * 3 * H);
    l.dxpack = l.dh + vtr_workspace_align(sizeof(float) * (size_t)B * H);
    l.total = l.dxpack + vtr_workspace_align(sizeof(float) * bt * D);
    return l;
}

size_t vtr_gru_param_count(int D, int H, int num_directions)
{
    return (size_t)num_directions * (3 * (size_t)H * D + 3 * (size_t)H * H + 6 * (size_t)H);
}

size_t vtr_gru_param_offset(int D, int H, int direction, vtr_gru_tensor tensor)
{
    size_t off = vtr_gru_param_count(D, H, 1) * (size_t)direction;
    size_t wih = 3 * (size_t)H * D, whh = 3 * (size_t)H * H;
    switch (tensor) {
    case VTR_GRU_WEIGHT_IH: return off;
    case VTR_GRU_WEIGHT_HH: return off + wih;
    case VTR_GRU_BIAS_IH: return off + wih + whh;
    case VTR_GRU_BIAS_HH: return off + wih + whh + 3 * (size_t)H;
    }
    return off;
}

const char *vtr_gru_param_name(int direction, vtr_gru_tensor tensor)
{
    static const char *const names[2][4] = {
        {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"},
        {"weight_ih_l0_reverse", "weight_hh_l0_reverse", "bias_ih_l0_reverse",
         "bias_hh_l0_reverse"},
    };
    return names[direction != 0][tensor];
}

double vtr_gru_train_flops(double ntok, double B, double D, double H, int num_directions, bool dinp)
{
    double gates = 3 * H;
    double input = 2 * ntok * D * gates * (dinp ? 3 : 2);
    double hidden = 2 * (ntok - B) * H * gates * 3;
    return num_directions * (input + hidden);
}

size_t vtr_gru_workspace_size(int B, int T, int D, int H, int num_directions)
{
    return workspace_layout_of(B, T, D, H, num_directions).total;
}

size_t vtr_gru_scratch_size(int B, int T, int D, int H, int num_directions)
{
    (void)num_directions;
    return scratch_layout_of(B, T, D, H).total;
}

/* order (B) = items by length, longest first; ties keep the batch order. */
static void sort_by_length(int *order, const int *lengths, int B)
{
    for (int i = 0; i < B; i++) {
        int b = i, k = i;
        while (k > 0 && lengths[order[k - 1]] < lengths[b]) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = b;
    }
}

/* Items still running at step s: a prefix of the sorted order. */
static int active_at(const int *order, const int *lengths, int B, int s)
{
    int n = B;
    while (n > 0 && lengths[order[n - 1]] <= s)
        n--;
    return n;
}

/* The (b, t) that the item at sorted index i reads at step s: its position b*T + t in the
 * padded batch and its packed row first[b] + t. */
typedef struct step_position {
    size_t pos, row;
} step_position;

static step_position position(const int *order, const int *first, const int *lengths, int T, int i,
                              int s, int dir)
{
    int b = order[i];
    int t = dir == 0 ? s : lengths[b] - 1 - s;
    step_position p = {(size_t)b * T + t, (size_t)first[b] + t};
    return p;
}

void vtr_gru_forward(float *out, void *workspace, const float *inp, const int *lengths,
                     const float *params, int B, int T, int D, int H, int num_directions,
                     vtr_gru_merge merge)
{
    workspace_layout l = workspace_layout_of(B, T, D, H, num_directions);
    char *ws = workspace;
    int *order = (int *)(ws + l.order), *first = (int *)(ws + l.first);
    float *h = (float *)(ws + l.h), *hg = (float *)(ws + l.hg);
    float *xpack = (float *)(ws + l.xpack);
    size_t bt = (size_t)B * T;
    int concat = num_directions == 2 && merge == VTR_GRU_CONCAT;
    int OH = concat ? 2 * H : H;

    sort_by_length(order, lengths, B);
    int maxlen = lengths[order[0]];
    memset(out, 0, sizeof(float) * bt * OH);
    // xpack (total, D): the real rows of inp, item after item
    size_t total = 0;
    for (int b = 0; b < B; b++) {
        first[b] = (int)total;
        memcpy(xpack + total * D, inp + (size_t)b * T * D, sizeof(float) * lengths[b] * D);
        total += (size_t)lengths[b];
    }

    for (int dir = 0; dir < num_directions; dir++) {
        /* out = (forward + reverse) / 2 when averaging, written as
         * (mix * out + h) * keep for SIMD lanes: out starts at zero */
        bool average = dir == 1 && !concat;
        float mix = average ? 1.0f : 0.0f, keep = average ? 0.5f : 1.0f;
        const float *w_ih = params + vtr_gru_param_offset(D, H, dir, VTR_GRU_WEIGHT_IH);
        const float *w_hh = params + vtr_gru_param_offset(D, H, dir, VTR_GRU_WEIGHT_HH);
        const float *b_ih = params + vtr_gru_param_offset(D, H, dir, VTR_GRU_BIAS_IH);
        const float *b_hh = params + vtr_gru_param_offset(D, H, dir, VTR_GRU_BIAS_HH);
        float *gates = (float *)(ws + l.gates) + (size_t)dir * bt * 4 * H;
        float *hprev = (float *)(ws + l.hprev) + (size_t)dir * bt * H;

        // gates[:, 0:3H] = xpack · W_ihᵀ for every real position at once (row stride 4H)
        vtr_matmul(CblasNoTrans, CblasTrans, (int)total, 3 * H, D, 1.0f, xpack, D, w_ih, D, 0.0f,
                   gates, 4 * H);
        memset(h, 0, sizeof(float) * (size_t)B * H);
        /* W_hh multiplies at every step: rounded to bfloat16 once, when that is the
         * precision (lib/matmul.h) */
        vtr_matmul_operand whh = vtr_matmul_hold(w_hh, 3 * H, H, H);
        /* The gate math of a step runs on one thread: the step's matrix product dominates,
         * and an OpenMP region between two BLAS calls leaves its idle threads spinning
         * against OpenBLAS's own threads (libgomp's default wait policy). */
        size_t packed = 0; /* packed row of the first active item of this step */
        for (int s = 0; s < maxlen; s++) {
            int nact = active_at(order, lengths, B, s);
            // hg (nact,3H) = h (nact,H) · W_hhᵀ; h is zero at the first step
            if (s == 0)
                memset(hg, 0, sizeof(float) * (size_t)nact * 3 * H);
            else
                vtr_matmul_held(CblasNoTrans, CblasTrans, nact, 3 * H, H, 1.0f, h, H, &whh, 0.0f,
                                hg, 3 * H);
            for (int i = 0; i < nact; i++) {
                step_position p = position(order, first, lengths, T, i, s, dir);
                float *g = gates + p.row * 4 * H;
                float *hp = hprev + (packed + i) * H;
                float *hi = h + (size_t)i * H;
                const float *hgi = hg + (size_t)i * 3 * H;
                float *o = out + p.pos * OH + (concat ? dir * H : 0);
                memcpy(hp, hi, sizeof(float) * H);
                /* g, hp, hi, hgi and o are disjoint rows: SIMD lanes over j (the gate math
                 * is plain arithmetic, lib/activation.h) */
#pragma omp simd
                for (int j = 0; j < H; j++) {
                    float r, z, n;
                    float hn = hgi[2 * H + j] + b_hh[2 * H + j];
                    float hnew = vtr_gru_unit_forward(
                        g[j] + b_ih[j], g[H + j] + b_ih[H + j], g[2 * H + j] + b_ih[2 * H + j],
                        hgi[j] + b_hh[j], hgi[H + j] + b_hh[H + j], hn, hp[j], &r, &z, &n);
                    g[j] = r;
                    g[H + j] = z;
                    g[2 * H + j] = n;
                    g[3 * H + j] = hn;
                    hi[j] = hnew;
                    o[j] = (mix * o[j] + hnew) * keep;
                }
            }
            packed += (size_t)nact;
        }
    }
}

void vtr_gru_backward(float *dinp, float *dparams, void *scratch, const float *dout,
                      const float *inp, const int *lengths, const float *params,
                      const void *workspace, int B, int T, int D, int H, int num_directions,
                      vtr_gru_merge merge)
{
    workspace_layout l = workspace_layout_of(B, T, D, H, num_directions);
    scratch_layout sl = scratch_layout_of(B, T, D, H);
    const char *ws = workspace;
    char *sc = scratch;
    const int *order = (const int *)(ws + l.order), *first = (const int *)(ws + l.first);
    const float *xpack = (const float *)(ws + l.xpack); /* inp's real rows, as forward saw them */
    float *dxg = (float *)(sc + sl.dxg), *dhg = (float *)(sc + sl.dhg);
    float *dh = (float *)(sc + sl.dh), *dxpack = (float *)(sc + sl.dxpack);
    size_t bt = (size_t)B * T;
    int concat = num_directions == 2 && merge == VTR_GRU_CONCAT;
    int OH = concat ? 2 * H : H;
    /* the share of dout each direction's state receives */
    float dout_scale = num_directions == 2 && !concat ? 0.5f : 1.0f;
    int maxlen = lengths[order[0]];
    size_t total = 0;
    for (int b = 0; b < B; b++)
        total += (size_t)lengths[b];

    for (int dir = 0; dir < num_directions; dir++) {
        const float *w_ih = params + vtr_gru_param_offset(D, H, dir, VTR_GRU_WEIGHT_IH);
        const float *w_hh = params + vtr_gru_param_offset(D, H, dir, VTR_GRU_WEIGHT_HH);
        float *dw_ih = dparams + vtr_gru_param_offset(D, H, dir, VTR_GRU_WEIGHT_IH);
        float *dw_hh = dparams + vtr_gru_param_offset(D, H, dir, VTR_GRU_WEIGHT_HH);
        float *db_ih = dparams + vtr_gru_param_offset(D, H, dir, VTR_GRU_BIAS_IH);
        float *db_hh = dparams + vtr_gru_param_offset(D, H, dir, VTR_GRU_BIAS_HH);
        const float *gates = (const float *)(ws + l.gates) + (size_t)dir * bt * 4 * H;
        const float *hprev = (const float *)(ws + l.hprev) + (size_t)dir * bt * H;

        vtr_matmul_operand whh = vtr_matmul_hold(w_hh, 3 * H, H, H);
        /* every packed row of dxg is written once below: no zeroing */
        memset(dh, 0, sizeof(float) * (size_t)B * H);
        size_t packed = total;
        for (int s = maxlen - 1; s >= 0; s--) {
            int nact = active_at(order, lengths, B, s);
            packed -= (size_t)nact;
            for (int i = 0; i < nact; i++) {
                step_position p = position(order, first, lengths, T, i, s, dir);
                const float *g = gates + p.row * 4 * H;
                const float *hp = hprev + (packed + i) * H;
                const float *dy = dout + p.pos * OH + (concat ? dir * H : 0);
                float *dhi = dh + (size_t)i * H;
                float *dx = dxg + p.row * 3 * H;
                float *dg = dhg + (packed + i) * 3 * H;
                for (int j = 0; j < H; j++) {
                    float d = dhi[j] + dout_scale * dy[j];
                    dhi[j] =
                        vtr_gru_unit_backward(d, g[j], g[H + j], g[2 * H + j], g[3 * H + j], hp[j],
                                              &dx[j], &dx[H + j], &dx[2 * H + j], &dg[2 * H + j]);
                    dg[j] = dx[j];
                    dg[H + j] = dx[H + j];
                }
            }
            // dh (nact,H) += dhg rows of this step (nact,3H) · W_hh (3H,H); the state read
            // at step 0 is the zero h0, whose gradient nobody wants
            if (s > 0)
                vtr_matmul_held(CblasNoTrans, CblasNoTrans, nact, H, 3 * H, 1.0f,
                                dhg + packed * 3 * H, 3 * H, &whh, 1.0f, dh, H);
        }
        // dW_hh (3H,H) += dhgᵀ (3H,total) · hprev (total,H), over the packed rows after
        // step 0's, whose hprev is the zero h0
        size_t first_step = (size_t)active_at(order, lengths, B, 0);
        if (total > first_step)
            vtr_matmul(CblasTrans, CblasNoTrans, 3 * H, H, (int)(total - first_step), 1.0f,
                       dhg + first_step * 3 * H, 3 * H, hprev + first_step * H, H, 1.0f, dw_hh, H);
        vtr_bias_backward(db_hh, dhg, (int)total, 3 * H);
        // dW_ih (3H,D) += dxgᵀ (3H,total) · xpack (total,D), over the real positions
        vtr_matmul(CblasTrans, CblasNoTrans, 3 * H, D, (int)total, 1.0f, dxg, 3 * H, xpack, D, 1.0f,
                   dw_ih, D);
        vtr_bias_backward(db_ih, dxg, (int)total, 3 * H);
        // dxpack (total,D) (+)= dxg (total,3H) · W_ih (3H,D), both directions summed
        if (dinp)
            vtr_matmul(CblasNoTrans, CblasNoTrans, (int)total, D, 3 * H, 1.0f, dxg, 3 * H, w_ih, D,
                       dir == 0 ? 0.0f : 1.0f, dxpack, D);
    }
    // dinp (B,T,D) += dxpack at the real positions
    if (dinp)
        for (int b = 0; b < B; b++) {
            const float *src = dxpack + (size_t)first[b] * D;
            float *dst = dinp + (size_t)b * T * D;
            for (size_t k = 0; k < (size_t)lengths[b] * D; k++)
                dst[k] += src[k];
        }
}
