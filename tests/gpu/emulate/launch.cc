// tests/gpu/emulate/launch.cc: kernel launches for the CPU emulation (emu_launch, the
// rewrite of kernel<<<grid, block, shared_bytes>>>, include/cuda_runtime.h).
//
// A launch runs at once, on the calling host thread: its blocks one after another, and each
// block's threads as fibers, coroutines with stacks of their own switched by a few lines of
// x86-64 assembly (switch_stack). A pass resumes each thread that may go on, in order (in
// reverse order with EMU_THREADS=reverse, and the blocks too), until it waits (at a
// __syncthreads or a warp collective) or ends. After the pass, a warp whose 32 lanes all wait
// at the same collective takes its values and goes on; when none does, and every thread left
// waits at __syncthreads, all go on. So every write before a barrier is seen after it; a warp
// whose lanes reach different collectives, or a block where some threads end while others
// wait, stops with an error. Not emulated: lockstep within a warp, threads running at the
// same time (a race between threads of a block, or of two blocks, gives the result of one of
// the two orders), atomics, collectives of part of a warp, and whether the threads' barriers
// are the same __syncthreads call. Grids and blocks are one-dimensional.
#include "emulation.h"

#include <memory>
#include <vector>

EMU_THREAD_LOCAL emu_dim3 threadIdx;
EMU_THREAD_LOCAL emu_dim3 blockIdx;
EMU_THREAD_LOCAL emu_dim3 blockDim;
EMU_THREAD_LOCAL emu_dim3 gridDim;
EMU_THREAD_LOCAL void *emu_dynamic_shared;

// a GPU's limits (compute capability 9.0): threads per block, blocks, shared memory per block
// without opting in, threads resident on a multiprocessor
static const unsigned max_block_threads = 1024;
static const unsigned max_grid_blocks = 2147483647u;
static const size_t max_shared_bytes = 48 * 1024;
static const unsigned max_multiprocessor_threads = 2048;

// switch_stack(save, load): saves the callee-saved registers on the current stack and its
// stack pointer in *save, then switches to the stack at load and pops that stack's registers;
// its `ret` resumes wherever load's owner called switch_stack (or fiber_start, for a new
// fiber).
extern "C" void emu_switch_stack(void **save, void *load);
asm(R"(
.text
.globl emu_switch_stack
.hidden emu_switch_stack
.type emu_switch_stack, @function
emu_switch_stack:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
)");

// Where a kernel thread is, between passes.
enum fiber_state {
    READY,          // not started, or may go on
    AT_SYNCTHREADS, // waits for the block
    AT_COLLECTIVE,  // waits for its warp's lanes
    FINISHED,
};

struct fiber {
    void *stack_pointer; // where switch_stack saved it; NULL before the thread starts
    unsigned stack_area; // which of the areas its stack is in, once started
    fiber_state state;
    // at a warp collective: its name, the value the thread gives, the lane whose value it
    // takes; then the value taken
    const char *collective;
    uint64_t value;
    unsigned source;
    uint64_t taken;
};

static const size_t fiber_stack_bytes = 256 * 1024;
static const int saved_registers = 6;

static EMU_THREAD_LOCAL void *scheduler_stack_pointer;
static EMU_THREAD_LOCAL fiber *running_fiber;
static EMU_THREAD_LOCAL const std::function<void()> *running_body;

// Where a new fiber starts: runs the kernel thread to its end, then hands back for good.
static void fiber_start(void)
{
    (*running_body)();
    running_fiber->state = FINISHED;
    emu_switch_stack(&running_fiber->stack_pointer, scheduler_stack_pointer);
    abort(); // a finished fiber is never resumed
}

void __syncthreads(void)
{
    running_fiber->state = AT_SYNCTHREADS;
    emu_switch_stack(&running_fiber->stack_pointer, scheduler_stack_pointer);
}

uint64_t emu_warp_collective(const char *what, unsigned mask, uint64_t value, unsigned source)
{
    if (mask != 0xffffffffu)
        emu_fail("%s with mask %#x: the emulation runs collectives of whole warps only", what,
                 mask);
    fiber *self = running_fiber;
    self->state = AT_COLLECTIVE;
    self->collective = what;
    self->value = value;
    self->source = source;
    emu_switch_stack(&self->stack_pointer, scheduler_stack_pointer);
    return self->taken;
}

// the block's static shared variables poisoned so far (by the first thread to declare each)
static EMU_THREAD_LOCAL std::vector<void *> poisoned;

void emu_poison_shared(void *variable, size_t bytes)
{
    for (void *v : poisoned)
        if (v == variable)
            return;
    memset(variable, 0xFF, bytes);
    poisoned.push_back(variable);
}

// EMU_THREADS=reverse: blocks, and the threads of each pass, run last to first (forward, the
// default: first to last), so that a result that hangs on one order shows in the other.
static bool threads_reversed(void)
{
    static const bool reversed = [] {
        const char *order = getenv("EMU_THREADS");
        return order && strcmp(order, "reverse") == 0;
    }();
    return reversed;
}

void emu_fail_misaligned(const void *p, size_t bytes)
{
    emu_fail("a %zu-byte load at %p, not aligned to %zu bytes", bytes, p, bytes);
}

// A new fiber's stack at the top of its area (16-byte aligned): the registers that
// switch_stack pops (zeros), then fiber_start as its return address, then a slot for
// fiber_start's own return address, so that fiber_start begins with the stack aligned as the
// x86-64 ABI has it at a call.
static void *new_fiber_stack(char *area_end)
{
    void **top = (void **)((uintptr_t)area_end & ~(uintptr_t)15);
    *--top = NULL;
    *--top = (void *)fiber_start;
    for (int r = 0; r < saved_registers; r++)
        *--top = NULL;
    return top;
}

// After a pass: lets the warps whose lanes all wait at one collective take their values and go
// on; true if any did. Stops where a warp's lanes wait at different places.
static bool release_warps(fiber *fibers, unsigned block)
{
    bool released = false;
    for (unsigned base = 0; base < block; base += 32) {
        fiber *lanes = &fibers[base];
        unsigned n = block - base < 32 ? block - base : 32, first = 0;
        while (first < n && lanes[first].state != AT_COLLECTIVE)
            first++;
        if (first == n)
            continue;
        const char *what = lanes[first].collective;
        if (n < 32)
            emu_fail("block %u: %s in warp %u, which has %u threads, not 32", blockIdx.x, what,
                     base / 32, n);
        for (unsigned l = 0; l < 32; l++)
            if (lanes[l].state != AT_COLLECTIVE || strcmp(lanes[l].collective, what) != 0)
                emu_fail("block %u, warp %u: lane %u waits at %s, lane %u at %s", blockIdx.x,
                         base / 32, first, what, l,
                         lanes[l].state == FINISHED         ? "none (it has ended)"
                         : lanes[l].state == AT_SYNCTHREADS ? "__syncthreads"
                                                            : lanes[l].collective);
        for (unsigned l = 0; l < 32; l++) {
            lanes[l].taken = lanes[lanes[l].source].value;
            lanes[l].state = READY;
        }
        released = true;
    }
    return released;
}

// Runs block blockIdx's threads (block of them) as fibers, pass after pass, until all have
// ended. A thread takes a stack area as it starts and gives it back as it ends, so that a
// kernel without barriers runs every thread on one area, warm in the cache.
static void run_block(unsigned block)
{
    static EMU_THREAD_LOCAL std::vector<fiber> fibers;
    static EMU_THREAD_LOCAL std::unique_ptr<char[]> stacks; // not filled: pages taken as touched
    static EMU_THREAD_LOCAL std::vector<unsigned> free_areas;
    if (fibers.size() < block) {
        fibers.resize(block);
        stacks.reset(new char[block * fiber_stack_bytes]);
    }
    free_areas.clear();
    for (unsigned area = block; area-- > 0;)
        free_areas.push_back(area);
    for (unsigned t = 0; t < block; t++) {
        fibers[t].stack_pointer = NULL;
        fibers[t].state = READY;
    }
    bool reversed = threads_reversed();
    for (;;) {
        for (unsigned i = 0; i < block; i++) {
            unsigned t = reversed ? block - 1 - i : i;
            fiber *thread = &fibers[t];
            if (thread->state != READY)
                continue;
            if (!thread->stack_pointer) {
                thread->stack_area = free_areas.back();
                free_areas.pop_back();
                thread->stack_pointer =
                    new_fiber_stack(&stacks[(thread->stack_area + 1) * fiber_stack_bytes]);
            }
            threadIdx = {t, 0, 0};
            running_fiber = thread;
            emu_switch_stack(&scheduler_stack_pointer, thread->stack_pointer);
            if (thread->state == FINISHED)
                free_areas.push_back(thread->stack_area);
        }
        if (release_warps(fibers.data(), block))
            continue;
        unsigned finished = 0;
        for (unsigned t = 0; t < block; t++)
            finished += fibers[t].state == FINISHED;
        if (finished == block)
            return;
        if (finished)
            emu_fail("block %u: %u of its %u threads wait at __syncthreads, the others have "
                     "ended",
                     blockIdx.x, block - finished, block);
        for (unsigned t = 0; t < block; t++)
            fibers[t].state = READY;
    }
}

cudaError_t emu_occupancy(int *blocks, int block_threads, size_t dynamic_shared)
{
    if (block_threads <= 0 || (unsigned)block_threads > max_block_threads ||
        dynamic_shared > max_shared_bytes)
        return cudaErrorInvalidValue;
    *blocks = (int)(max_multiprocessor_threads / (unsigned)block_threads);
    return cudaSuccess;
}

// EMU_FAIL_LAUNCH=N: the process's N-th kernel launch and every one after it fail with
// cudaErrorLaunchFailure and run nothing, as on a GPU whose context a kernel's fault has
// broken (what a data-parallel rank does then: tests/gpu/train_mpi.sh).
static bool launch_broken(void)
{
    static const unsigned long long first = [] {
        const char *n = getenv("EMU_FAIL_LAUNCH");
        return n ? strtoull(n, NULL, 10) : 0ull;
    }();
    static unsigned long long launches;
    return first > 0 && ++launches >= first;
}

void emu_launch(unsigned grid, unsigned block, size_t shared_bytes,
                const std::function<void()> &thread_body)
{
    if (launch_broken()) {
        emu_set_last_error(cudaErrorLaunchFailure);
        return;
    }
    if (grid == 0 || grid > max_grid_blocks || block == 0 || block > max_block_threads ||
        shared_bytes > max_shared_bytes) {
        emu_set_last_error(cudaErrorInvalidConfiguration);
        return;
    }
    std::vector<double> dynamic_shared((shared_bytes + sizeof(double) - 1) / sizeof(double));
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
    emu_dynamic_shared = dynamic_shared.data();
    running_body = &thread_body;
    bool reversed = threads_reversed();
    for (unsigned i = 0; i < grid; i++) {
        unsigned b = reversed ? grid - 1 - i : i;
        blockIdx = {b, 0, 0};
        memset(dynamic_shared.data(), 0xFF, dynamic_shared.size() * sizeof(double));
        poisoned.clear();
        run_block(block);
    }
}
