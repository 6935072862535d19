# tests/gpu/emulate/emulate.mk: the build of the GPU parity tests against the CPU emulation of
# CUDA (tests/gpu/emulate/run.sh runs it, and says what the emulation checks and what not):
# tests/gpu/gpu.mk's sources and flags, each .cu rewritten by cu_to_cc.py and compiled by g++
# against include/ instead of by nvcc, and linked with the emulation's runtime.
#
#   make -f tests/gpu/emulate/emulate.mk [B=build-emu] [SANITIZE=-fsanitize=address]
#
# Outputs: $(B)/emu/libvtr-cuda.so (the emulated backend), $(B)/emu/unit-tests (the parity
# tests, which load it from beside themselves or from VTR_CUDA_LIBRARY) and, with Open MPI,
# $(B)/emu/libnccl.so.2 (nccl.cc: NCCL's calls over MPI, for VTR_NCCL_LIBRARY). Against
# Debian's OpenBLAS (its OpenMP build, as ./configure picks it), jansson and oneDNN.

# gpu.mk's default folder is the real build's: the emulation's is build-emu unless B= is given
override B := $(if $(filter command line,$(origin B)),$(B),build-emu)
include tests/gpu/gpu.mk

EMU        = tests/gpu/emulate
SANITIZE   =
OPENBLAS   = /usr/lib/x86_64-linux-gnu/openblas-openmp
DEP_CFLAGS = -I/usr/include/x86_64-linux-gnu/openblas-openmp
LIBS       = -L$(OPENBLAS) -Wl,-rpath,$(OPENBLAS) -lopenblas -ljansson -ldnnl
WERROR     = yes
CFLAGS    += $(SANITIZE)
# the CUDA compiler, for gpu.mk's $(B)/flags: g++ on rewritten .cu files
NVCC       = g++
NVCCFLAGS  = -std=c++20 -O2 -g -fno-math-errno -ffp-contract=off -fPIC -Wall -Werror \
             -Wno-unused-parameter -Wno-unused-function -DVTR_HAVE_CUDA=1 -I. -I$(EMU)/include \
             -include cuda_runtime.h $(DEP_CFLAGS) $(SANITIZE)

EMU_RUNTIME   = $(EMU)/runtime.cc $(EMU)/launch.cc $(EMU)/cublas.cc $(EMU)/cudnn.cc $(EMU)/cudnn_rnn.cc

EMU_CUDA_OBJS    = $(patsubst %.cu,$(B)/emu/%.o,$(CUDA_SRCS))
EMU_RUNTIME_OBJS = $(patsubst %.cc,$(B)/%.o,$(EMU_RUNTIME))
EMU_TEST_OBJS    = $(patsubst %.c,$(B)/%.o,$(TEST_SRCS))

# the stand-in for NCCL over MPI (nccl.cc), where Open MPI is installed
MPI_FLAGS := $(shell pkg-config --cflags --libs ompi-c 2>/dev/null)
EMU_NCCL   = $(if $(MPI_FLAGS),$(B)/emu/libnccl.so.2)

.DEFAULT_GOAL := emulation
.PHONY: emulation
emulation: $(B)/emu/libvtr-cuda.so $(B)/emu/unit-tests $(EMU_NCCL)

$(B)/emu/libnccl.so.2: $(EMU)/nccl.cc
	@mkdir -p $(@D)
	$(NVCC) -std=c++17 -O2 -g -fPIC -Wall -Werror -Wno-unused-parameter -DOMPI_SKIP_MPICXX -shared \
	    -Wl,-soname,libnccl.so.2 $< $(MPI_FLAGS) -o $@

$(B)/emu/%.cc: %.cu $(EMU)/cu_to_cc.py
	@mkdir -p $(@D)
	python3 $(EMU)/cu_to_cc.py $< $@

$(B)/emu/%.o: $(B)/emu/%.cc $(B)/flags
	$(NVCC) $(NVCCFLAGS) -MMD -MP -c $< -o $@

$(B)/$(EMU)/%.o: $(EMU)/%.cc $(B)/flags
	@mkdir -p $(@D)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -c $< -o $@

$(B)/emu/libvtr-cuda.so: $(EMU_CUDA_OBJS) $(EMU_RUNTIME_OBJS) $(B)/libvtr-gpu.a
	$(NVCC) -shared -fopenmp $(SANITIZE) -Wl,-soname,libvtr-cuda.so -Wl,-Bsymbolic \
	    -Wl,--no-undefined $(EMU_CUDA_OBJS) $(EMU_RUNTIME_OBJS) $(B)/libvtr-gpu.a $(LIBS) -lm -o $@

$(B)/emu/unit-tests: $(EMU_TEST_OBJS) $(B)/libvtr-gpu.a | $(B)/emu/libvtr-cuda.so
	$(CC) $(PROGRAM_LDFLAGS) $(SANITIZE) $(EMU_TEST_OBJS) $(B)/libvtr-gpu.a $(LIBS) -lm -o $@

-include $(EMU_CUDA_OBJS:.o=.d) $(EMU_RUNTIME_OBJS:.o=.d)
