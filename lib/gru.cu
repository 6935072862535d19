// CUDA side of lib/gru.h. Per direction: one cuBLAS product for the input projections of
// every position, then per step s = 0 .. T-1 one product for the hidden projections of the
// whole batch and one elementwise kernel (one thread per (item, unit)) running the CPU's
// VTR_HD gate math. Items run in batch order; an item takes part in step s iff
// s < lengths[b] (the CPU sorts the items instead, to shrink each step's product), and reads
// position t = s (forward) or lengths[b] - 1 - s (reverse). Backward runs the steps in
// reverse with the same split.
#include "lib/cuda_launch.h"
#include "lib/gru.h"
#include "lib/nn_cuda.h"

// The workspace's regions: those of the CPU's layout (lib/gru.c), so vtr_gru_workspace_size
// covers them. The CPU's order region goes unused here, and hprev holds rows by (step, item)
// instead of packed by step.
struct gru_workspace {
    float *gates; // (dirs, B*T, 4H): r, z, n and W_hn h + b_hn per position
    float *hprev; // (dirs, T, B, H): the state each (step, item) read; zero when inactive
    float *h;     // (B, H): the running state
    float *hg;    // (B, 3H): W_hh h of one step
};

static gru_workspace gru_workspace_of(void *workspace, int B, int T, int H, int dirs)
{
    size_t bt = (size_t)B * T;
    char *ws = (char *)workspace;
    size_t gates = vtr_workspace_align(sizeof(int) * (size_t)B);
    size_t hprev = gates + vtr_workspace_align(sizeof(float) * dirs * bt * 4 * H);
    size_t h = hprev + vtr_workspace_align(sizeof(float) * dirs * bt * H);
    size_t hg = h + vtr_workspace_align(sizeof(float) * (size_t)B * H);
    gru_workspace l = {(float *)(ws + gates), (float *)(ws + hprev), (float *)(ws + h),
                       (float *)(ws + hg)};
    return l;
}

// The scratch's regions, as the CPU's (lib/gru.c), dhg by (step, item).
struct gru_scratch {
    float *dxg; // (B*T, 3H): gradients of the input pre-activations, per position
    float *dhg; // (T, B, 3H): gradients of the hidden pre-activations; zero when inactive
    float *dh;  // (B, H): gradient of the running state
};

static gru_scratch gru_scratch_of(void *scratch, int B, int T, int H)
{
    size_t bt = (size_t)B * T;
    char *sc = (char *)scratch;
    size_t dhg = vtr_workspace_align(sizeof(float) * bt * 3 * H);
    size_t dh = dhg + vtr_workspace_align(sizeof(float) * bt * 3 * H);
    gru_scratch l = {(float *)sc, (float *)(sc + dhg), (float *)(sc + dh)};
    return l;
}

// Step s of one direction, one thread per (b, j). gates (B*T, 4H) holds W_ih x at positions
// on entry and leaves r, z, n, W_hn h + b_hn there; hprev_s (B, H) the state read (zero for
// inactive items); h (B, H) the running state; out (B*T, OH) at column offset `column`,
// averaged into what the forward direction left when `average`.
__global__ static void gru_step_forward_kernel(float *out, float *gates, float *hprev_s, float *h,
                                               const float *hg, const float *b_ih,
                                               const float *b_hh, const int *lengths, int B, int T,
                                               int H, int s, int dir, int OH, int column,
                                               int average)
{
    size_t total = (size_t)B * H;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        size_t b = e / (size_t)H;
        int j = (int)(e % (size_t)H), len = lengths[b];
        if (s >= len) {
            hprev_s[e] = 0.0f;
            continue;
        }
        size_t pos = b * T + (dir == 0 ? s : len - 1 - s);
        float *g = gates + pos * 4 * H;
        const float *hgi = hg + b * 3 * H;
        float hold = h[e], r, z, n;
        float hn = hgi[2 * H + j] + b_hh[2 * H + j];
        float hnew = vtr_gru_unit_forward(g[j] + b_ih[j], g[H + j] + b_ih[H + j],
                                          g[2 * H + j] + b_ih[2 * H + j], hgi[j] + b_hh[j],
                                          hgi[H + j] + b_hh[H + j], hn, hold, &r, &z, &n);
        g[j] = r;
        g[H + j] = z;
        g[2 * H + j] = n;
        g[3 * H + j] = hn;
        hprev_s[e] = hold;
        h[e] = hnew;
        float *o = out + pos * OH + column + j;
        *o = average ? (*o + hnew) * 0.5f : hnew;
    }
}

// Step s of one direction backward, one thread per (b, j): dh (B, H) the gradient of the
// state after the step on entry, of the state before it (direct path only) on exit;
// dxg (B*T, 3H) per position, dhg_s (B, 3H) this step's rows.
__global__ static void gru_step_backward_kernel(float *dxg, float *dhg_s, float *dh,
                                                const float *dout, const float *gates,
                                                const float *hprev_s, const int *lengths, int B,
                                                int T, int H, int s, int dir, int OH, int column,
                                                float dout_scale)
{
    size_t total = (size_t)B * H;
    for (size_t e = vtr_cuda_first(); e < total; e += vtr_cuda_stride()) {
        size_t b = e / (size_t)H;
        int j = (int)(e % (size_t)H), len = lengths[b];
        if (s >= len)
            continue;
        size_t pos = b * T + (dir == 0 ? s : len - 1 - s);
        const float *g = gates + pos * 4 * H;
        float *dx = dxg + pos * 3 * H;
        float *dg = dhg_s + b * 3 * H;
        float d = dh[e] + dout_scale * dout[pos * OH + column + j];
        dh[e] = vtr_gru_unit_backward(d, g[j], g[H + j], g[2 * H + j], g[3 * H + j], hprev_s[e],
                                      &dx[j], &dx[H + j], &dx[2 * H + j], &dg[2 * H + j]);
        dg[j] = dx[j];
        dg[H + j] = dx[H + j];
    }
}

extern "C" vtr_status vtr_cuda_gru_forward(float *out, void *workspace, const float *inp,
                                           const int *lengths, const float *params, int B, int T,
                                           int D, int H, int num_directions, vtr_gru_merge merge,
                                           vtr_error *err)
{
    gru_workspace ws = gru_workspace_of(workspace, B, T, H, num_directions);
    size_t bt = (size_t)B * T;
    int concat = num_directions == 2 && merge == VTR_GRU_CONCAT;
    int OH = concat ? 2 * H : H;

    VTR_TRY(vtr_cuda_zero(out, sizeof(float) * bt * OH, err));
    for (int dir = 0; dir < num_directions; dir++) {
        const float *w_ih = params + vtr_gru_param_offset(D, H, dir, VTR_GRU_WEIGHT_IH);
        const float *w_hh = params + vtr_gru_param_offset(D, H, dir, VTR_GRU_WEIGHT_HH);
        const float *b_ih = params + vtr_gru_param_offset(D, H, dir, VTR_GRU_BIAS_IH);
        const float *b_hh = params + vtr_gru_param_offset(D, H, dir, VTR_GRU_BIAS_HH);
        float *gates = ws.gates + (size_t)dir * bt * 4 * H;
        float *hprev = ws.hprev + (size_t)dir * bt * H;

        // gates[:, 0:3H] = inp (BT,D) · W_ihᵀ for every position at once (row stride 4H)
        VTR_TRY(vtr_cuda_sgemm(false, true, (int)bt, 3 * H, D, 1.0f, inp, D, w_ih, D, 0.0f, gates,
                               4 * H, err));
        VTR_TRY(vtr_cuda_zero(ws.h, sizeof(float) * (size_t)B * H, err));
        for (int s = 0; s < T; s++) {
            // hg (B,3H) = h (B,H) · W_hhᵀ; h is zero at the first step
            if (s == 0)
                VTR_TRY(vtr_cuda_zero(ws.hg, sizeof(float) * (size_t)B * 3 * H, err));
            else
                VTR_TRY(vtr_cuda_sgemm(false, true, B, 3 * H, H, 1.0f, ws.h, H, w_hh, H, 0.0f,
                                       ws.hg, 3 * H, err));
            gru_step_forward_kernel<<<vtr_cuda_blocks((size_t)B * H), VTR_CUDA_THREADS>>>(
                out, gates, hprev + (size_t)s * B * H, ws.h, ws.hg, b_ih, b_hh, lengths, B, T, H, s,
                dir, OH, concat ? dir * H : 0, dir == 1 && !concat);
            VTR_TRY(vtr_cuda_launched("GRU step forward", err));
        }
    }
    return VTR_OK;
}

extern "C" vtr_status vtr_cuda_gru_backward(float *dinp, float *dparams, void *scratch,
                                            const float *dout, const float *inp, const int *lengths,
                                            const float *params, const void *workspace, int B,
                                            int T, int D, int H, int num_directions,
                                            vtr_gru_merge merge, vtr_error *err)
{
    gru_workspace ws = gru_workspace_of((void *)workspace, B, T, H, num_directions);
    gru_scratch sc = gru_scratch_of(scratch, B, T, H);
    size_t bt = (size_t)B * T;
    int concat = num_directions == 2 && merge == VTR_GRU_CONCAT;
    int OH = concat ? 2 * H : H;
    // the share of dout each direction's state receives
    float dout_scale = num_directions == 2 && !concat ? 0.5f : 1.0f;

    for (int dir = 0; dir < num_directions; dir++) {
        const float *w_ih = params + vtr_gru_param_offset(D, H, dir, VTR_GRU_WEIGHT_IH);
        const float *w_hh = params + vtr_gru_param_offset(D, H, dir, VTR_GRU_WEIGHT_HH);
        float *dw_ih = dparams + vtr_gru_param_offset(D, H, dir, VTR_GRU_WEIGHT_IH);
        float *dw_hh = dparams + vtr_gru_param_offset(D, H, dir, VTR_GRU_WEIGHT_HH);
        float *db_ih = dparams + vtr_gru_param_offset(D, H, dir, VTR_GRU_BIAS_IH);
        float *db_hh = dparams + vtr_gru_param_offset(D, H, dir, VTR_GRU_BIAS_HH);
        const float *gates = ws.gates + (size_t)dir * bt * 4 * H;
        const float *hprev = ws.hprev + (size_t)dir * bt * H;

        VTR_TRY(vtr_cuda_zero(sc.dxg, sizeof(float) * bt * 3 * H, err));
        VTR_TRY(vtr_cuda_zero(sc.dhg, sizeof(float) * bt * 3 * H, err));
        VTR_TRY(vtr_cuda_zero(sc.dh, sizeof(float) * (size_t)B * H, err));
        for (int s = T - 1; s >= 0; s--) {
            float *dhg_s = sc.dhg + (size_t)s * B * 3 * H;
            gru_step_backward_kernel<<<vtr_cuda_blocks((size_t)B * H), VTR_CUDA_THREADS>>>(
                sc.dxg, dhg_s, sc.dh, dout, gates, hprev + (size_t)s * B * H, lengths, B, T, H, s,
                dir, OH, concat ? dir * H : 0, dout_scale);
            VTR_TRY(vtr_cuda_launched("GRU step backward", err));
            // dh (B,H) += dhg_s (B,3H) · W_hh (3H,H); the state read at step 0 is the zero
            // h0, whose gradient nobody wants
            if (s > 0)
                VTR_TRY(vtr_cuda_sgemm(false, false, B, H, 3 * H, 1.0f, dhg_s, 3 * H, w_hh, H, 1.0f,
                                       sc.dh, H, err));
        }
        // dW_hh (3H,H) += dhgᵀ (3H,TB) · hprev (TB,H); inactive rows are zero in both
        VTR_TRY(vtr_cuda_sgemm(true, false, 3 * H, H, (int)bt, 1.0f, sc.dhg, 3 * H, hprev, H, 1.0f,
                               dw_hh, H, err));
        VTR_TRY(vtr_cuda_bias_backward(db_hh, sc.dhg, (int)bt, 3 * H, err));
        // dW_ih (3H,D) += dxgᵀ (3H,BT) · inp (BT,D); padded rows of dxg are zero
        VTR_TRY(vtr_cuda_sgemm(true, false, 3 * H, D, (int)bt, 1.0f, sc.dxg, 3 * H, inp, D, 1.0f,
                               dw_ih, D, err));
        VTR_TRY(vtr_cuda_bias_backward(db_ih, sc.dxg, (int)bt, 3 * H, err));
        // dinp (BT,D) += dxg (BT,3H) · W_ih (3H,D)
        if (dinp)
            VTR_TRY(vtr_cuda_sgemm(false, false, (int)bt, D, 3 * H, 1.0f, sc.dxg, 3 * H, w_ih, D,
                                   1.0f, dinp, D, err));
    }
    return VTR_OK;
}
