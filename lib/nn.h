/* Conventions shared by the neural-network ops: lib/linear.h, activation.h, embedding.h,
 * norm.h, softmax.h, similarity.h, gru.h, graph_attention.h; the poolers of aggregate/
 * (set_pooling.h, gpo.h, span_pool.h) and match/hinge_loss.h and phrase_attention.h follow
 * them too.
 *
 * Functions. Each op is a pair of plain functions, vtr_X_forward and vtr_X_backward, with a
 * comment giving every buffer's shape. Arguments come in one order:
 *     forward (outputs, saved-for-backward, workspace, inputs, parameters, dims, options)
 *     backward(input grads, parameter grads, scratch, dout, forward's inputs/saved, dims, options)
 * The CPU versions here are the reference. The CUDA versions (lib/nn_cuda.h) take the same
 * arguments in the same order as device pointers, plus a vtr_error, and return vtr_status.
 *
 * Buffers. Every buffer is float32 (indices int32) in C order, allocated and owned by the
 * caller, with the shape its comment gives; nothing is allocated inside an op and there is
 * no global state. Ops do not validate their arguments (they run in the inner loop of a
 * training step): callers check shapes once, and lengths and token ids from data with
 * vtr_nn_check_lengths and vtr_nn_check_ids below. Buffers never alias unless a header says
 * so (elementwise forwards allow out == inp).
 *
 * Gradients. Every backward ACCUMULATES (+=) into every gradient buffer it is given: input
 * gradients and parameter gradients alike. The caller zeroes gradient buffers before a step
 * (one memset over a flat buffer); a tensor read by two ops then receives the sum of both
 * gradients without extra code. An input-gradient pointer may be NULL when that gradient is
 * not wanted (e.g. the input features of the first layer); the op then skips the work.
 * Parameter-gradient pointers are never NULL.
 *
 * Weight layout. PyTorch's: a Linear weight is (OC, C) [out, in]; GRU weights are stored
 * in state_dict order and layout; so tensors converted from a reference checkpoint under
 * their reference names (REFERENCE.md) are used as they are.
 *
 * Padded batches. A batch of variable-length sets or sequences is a (B, T, D) buffer, T the
 * padded length (>= the longest item), and `const int *lengths` (B) with
 * 1 <= lengths[b] <= T: element t of item b is real iff t < lengths[b]. Set and sequence
 * ops (softmax, GRU, poolers, GPO) read only real elements, write zeros at padded output
 * positions and give padded inputs zero gradient. Row-wise ops (linear, activations,
 * BatchNorm, LayerNorm) know no lengths and process every row, as the reference does
 * (BatchNorm statistics include padded rows, REFERENCE.md).
 *
 * Workspaces. An op that keeps intermediate results between forward and backward (GRU,
 * GPO) takes a `workspace` of X_workspace_size() bytes, written by forward and read by
 * backward (keep it intact in between); its backward also takes a `scratch` of
 * X_scratch_size() bytes whose contents do not matter before or after, and which several
 * ops may share. Both need only malloc's alignment.
 *
 * Determinism. Loops over rows run in parallel with OpenMP; every reduction across rows
 * (bias, BatchNorm, LayerNorm and embedding gradients, losses) runs in a fixed order that
 * does not depend on the thread count. Matrix products go through CBLAS; OpenBLAS gives
 * identical bytes for the same thread count. So the same inputs, seeds and thread count
 * give identical bytes.
 *
 * Threads. configure links OpenBLAS's OpenMP build when it is installed
 * (libopenblas-openmp-dev): its products then run on the same OpenMP threads as these
 * loops, and a product called inside a parallel region runs on its caller's thread. The
 * pthreads build keeps a second pool whose idle threads spin on sched_yield for about 0.1 s
 * after each product, beside OpenMP's threads (a set-embedding training step on 2 cores:
 * 2.59 s with it, 2.14 s with the OpenMP build). Either way, libgomp's default wait policy
 * lets OpenMP's idle threads spin for milliseconds after each parallel region, taking the
 * cores from the serial code that follows (GPO backward at B 128, T 20, D 1024: 65 ms
 * instead of 9 ms; the set step 2.50 s instead of 2.14 s): run with OMP_WAIT_POLICY=passive
 * (read when the process starts). Loops that alternate with matrix products (the GRU
 * steps) run serially.
 *
 * Randomness. Ops that draw random numbers (dropout, size augmentation) take (seed,
 * stream) and use draw i = vtr_philox_uniform_at(seed, stream, i) (lib/rng.h), a pure
 * function of its arguments, so a CUDA kernel draws exactly the same numbers. Give each
 * call site and step its own stream.
 */
#ifndef VTR_NN_H
#define VTR_NN_H

#include <stddef.h>

#include "error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Columns per block in the column reductions (bias, BatchNorm, LayerNorm and embedding
 * gradients): the CPU backend calls a VTR_HD block function per block of this many
 * columns (contiguous row reads), the CUDA backend the same function per column. */
#define VTR_COLUMN_BLOCK 64

/* How a loss reduces its per-example terms. */
typedef enum vtr_reduction {
    VTR_REDUCE_SUM,  /* sum over the batch (VSE++, VSE∞) */
    VTR_REDUCE_MEAN, /* sum divided by the batch size (HGR) */
} vtr_reduction;

/* bytes rounded up to a multiple of 64, for the regions an op carves out of a workspace */
static inline size_t vtr_workspace_align(size_t bytes)
{
    return (bytes + 63) & ~(size_t)63;
}

/* Fails with VTR_ERR_INVALID, naming the item, unless 1 <= lengths[b] <= T for every b. */
vtr_status vtr_nn_check_lengths(const int *lengths, int B, int T, vtr_error *err);

/* Fails with VTR_ERR_INVALID, naming the position, unless 0 <= ids[i] < V for every i. */
vtr_status vtr_nn_check_ids(const int *ids, long n, int V, vtr_error *err);

#ifdef __cplusplus
}
#endif

#endif
