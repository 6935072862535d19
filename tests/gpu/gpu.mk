# tests/gpu/gpu.mk: the reduced build of the GPU check (tests/gpu/run.sh, which sets the
# variables below): the CPU-vs-GPU parity tests and the op timing, with only what they
# link: the CUDA toolkit, cuBLAS, cuDNN, OpenBLAS, jansson (safetensors), oneDNN (the
# backbone's CPU engine, the reference of its cuDNN one), libgomp and libm; none of
# FFmpeg, libsndfile, libyaml, SQLite or HDF5, which the machines lent with a GPU lack.
#
#   make -f tests/gpu/gpu.mk [B=build-gpu] [CUDA_ARCH=90] [WERROR=yes] NVCC=... \
#        DEP_CFLAGS=... CUDA_CFLAGS=... LIBS=...
#
# Outputs: $(B)/libvtr-cuda.so (the CUDA backend, which the programs load on their first
# CUDA call from beside themselves, as Makefile.in's do from build/),
# $(B)/unit-tests (tests/check.c's runner over the tests below), $(B)/op-timing,
# and for the benchmarks on the GPU $(B)/train-step (bench/train_step/train_step.c),
# $(B)/features-bench (bench/features/features_bench.c) and $(B)/search-timing. The C sources are the closure of what the tests call (a change that
# makes one of them call another file's function adds that file here); every .cu of the
# stage folders is compiled, so that all CUDA code builds for CUDA_ARCH, and the archive
# lets the linker take only what is called. Flags are Makefile.in's and configure's, for
# one GPU architecture; warnings are errors only with WERROR=yes (this project's
# compilers), not on a lent machine's.

B          = build-gpu
CC         = cc
NVCC       = nvcc
CUDA_ARCH  = 90
WERROR     =
DEP_CFLAGS =
CUDA_CFLAGS =
LIBS       =

TEST_SRCS = tests/check.c tests/test_cuda.c tests/test_cuda_nn.c tests/test_cuda_model.c \
            tests/test_backbone.c tests/test_topk.c tests/test_retrieval_metrics.c
TIMING_SRCS = tests/gpu/op_timing.c
STEP_SRCS = bench/train_step/train_step.c
FEATURES_SRCS = bench/features/features_bench.c
SEARCH_SRCS = tests/gpu/search_timing.c
LIB_SRCS  = lib/activation.c lib/embedding.c lib/error.c lib/file.c lib/gru.c lib/linear.c \
            lib/matmul.c lib/precision.c \
            lib/norm.c lib/npy.c lib/pack.c lib/pth.c lib/rng.c lib/safetensors.c lib/similarity.c \
            lib/softmax.c lib/tensor_file.c lib/zip.c \
            lib/tensor.c lib/args.c lib/optim.c lib/params.c lib/dist.c lib/dist_device.c lib/sync_batchnorm.c \
            lib/blas_threads.c aggregate/gpo.c aggregate/set_pooling.c aggregate/adpool.c \
            aggregate/set_prediction.c match/hinge_loss.c match/vse_model.c match/model_ops.c \
            match/caption_bigru.c match/model_arena.c match/model_params.c match/set_similarity.c \
            match/adopt_loss.c match/retrieval_metrics.c lib/nn.c lib/checkpoint.c index/topk.c \
            features/backbone.c features/backbone_weights.c features/keras_net.c \
            features/conv.c features/extractor.c features/preprocess.c \
            lib/cuda_loader.c lib/cuda_entries.c features/cuda_entries.c \
            aggregate/cuda_entries.c match/cuda_entries.c index/cuda_entries.c \
            match/hgr_model.c lib/graph_attention.c aggregate/span_pool.c \
            match/phrase_attention.c match/hgr_score.c
CUDA_SRCS = $(wildcard $(addsuffix /*.cu,lib decode features text import aggregate match index tools))

WARN      = -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wno-unused-parameter
CFLAGS    = -std=c11 -O2 -g -fno-math-errno -fno-trapping-math -DNDEBUG $(WARN) $(if $(WERROR),-Werror) -fopenmp \
            -fPIC -fno-semantic-interposition -DVTR_HAVE_CUDA=1 -I. $(DEP_CFLAGS)
NVCCFLAGS = -O2 -std=c++17 -I. -Xcompiler -Wall,-fPIC \
            -gencode arch=compute_$(CUDA_ARCH),code=sm_$(CUDA_ARCH) -DVTR_HAVE_CUDA=1 \
            $(if $(WERROR),-Werror all-warnings -Xcompiler -Werror) $(CUDA_CFLAGS) $(DEP_CFLAGS)

LIB_OBJS    = $(patsubst %.c,$(B)/%.o,$(LIB_SRCS)) $(B)/version.o
CUDA_OBJS   = $(patsubst %.cu,$(B)/%.cu.o,$(CUDA_SRCS))
TEST_OBJS   = $(patsubst %.c,$(B)/%.o,$(TEST_SRCS))
TIMING_OBJS = $(patsubst %.c,$(B)/%.o,$(TIMING_SRCS))
STEP_OBJS   = $(patsubst %.c,$(B)/%.o,$(STEP_SRCS))
FEATURES_OBJS = $(patsubst %.c,$(B)/%.o,$(FEATURES_SRCS))
SEARCH_OBJS = $(patsubst %.c,$(B)/%.o,$(SEARCH_SRCS))

.PHONY: all FORCE
all: $(B)/libvtr-cuda.so $(B)/unit-tests $(B)/op-timing $(B)/train-step $(B)/features-bench \
     $(B)/search-timing

# $(B)/flags changes only when the flags do, so that another set (system libraries or
# .gpu-deps, another architecture) recompiles everything and the same set nothing.
$(B)/flags: FORCE
	@mkdir -p $(B)
	@printf '%s\n' '$(CC) $(CFLAGS)' '$(NVCC) $(NVCCFLAGS)' '$(LIBS)' >$@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi

$(B)/%.o: %.c $(B)/flags
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(B)/%.cu.o: %.cu $(B)/flags
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -c $< -o $@

# lib/version.h's string as Makefile.in writes it (the bare release where git is missing)
$(B)/version.c: FORCE
	@mkdir -p $(B)
	@h=$$(git describe --always --dirty --exclude '*' 2>/dev/null) && \
	v="$$(cat VERSION)+g$$h" || v="$$(cat VERSION)"; \
	printf 'const char vtr_version[] = "%s";\n' "$$v" >$@.tmp; \
	if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi

$(B)/version.o: $(B)/version.c
	$(CC) $(CFLAGS) -c $< -o $@

$(B)/libvtr-gpu.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

# as Makefile.in's: -Bsymbolic, the libraries the objects call; the programs take only the
# libraries they call themselves (--as-needed: not the CUDA ones) and find the backend
# beside them ($ORIGIN)
$(B)/libvtr-cuda.so: $(CUDA_OBJS) $(B)/libvtr-gpu.a
	$(CC) -shared -fopenmp -Wl,-soname,libvtr-cuda.so -Wl,-Bsymbolic -Wl,--no-undefined \
	    $(CUDA_OBJS) $(B)/libvtr-gpu.a $(LIBS) -lstdc++ -ldl -lm -o $@

PROGRAM_LDFLAGS = -fopenmp -Wl,--as-needed -Wl,-rpath,'$$ORIGIN'
$(B)/unit-tests: $(TEST_OBJS) $(B)/libvtr-gpu.a | $(B)/libvtr-cuda.so
	$(CC) $(PROGRAM_LDFLAGS) $(TEST_OBJS) $(B)/libvtr-gpu.a $(LIBS) -lstdc++ -lm -o $@

$(B)/op-timing: $(TIMING_OBJS) $(B)/libvtr-gpu.a | $(B)/libvtr-cuda.so
	$(CC) $(PROGRAM_LDFLAGS) $(TIMING_OBJS) $(B)/libvtr-gpu.a $(LIBS) -lstdc++ -lm -o $@

$(B)/train-step: $(STEP_OBJS) $(B)/libvtr-gpu.a | $(B)/libvtr-cuda.so
	$(CC) $(PROGRAM_LDFLAGS) $(STEP_OBJS) $(B)/libvtr-gpu.a $(LIBS) -lstdc++ -lm -o $@

$(B)/features-bench: $(FEATURES_OBJS) $(B)/libvtr-gpu.a | $(B)/libvtr-cuda.so
	$(CC) $(PROGRAM_LDFLAGS) $(FEATURES_OBJS) $(B)/libvtr-gpu.a $(LIBS) -lstdc++ -lm -o $@

$(B)/search-timing: $(SEARCH_OBJS) $(B)/libvtr-gpu.a | $(B)/libvtr-cuda.so
	$(CC) $(PROGRAM_LDFLAGS) $(SEARCH_OBJS) $(B)/libvtr-gpu.a $(LIBS) -lstdc++ -lm -o $@

FORCE:

.SECONDARY:

-include $(LIB_OBJS:.o=.d) $(CUDA_OBJS:.o=.d) $(TEST_OBJS:.o=.d) $(TIMING_OBJS:.o=.d) $(STEP_OBJS:.o=.d) \
         $(FEATURES_OBJS:.o=.d) $(SEARCH_OBJS:.o=.d)
