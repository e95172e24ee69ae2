# dlm — the front door. Every target here is a thin wrapper over CMake/CTest.
#
#   make            release build of ./build/dlm (installs Debian deps if missing)
#   make test       build + every test (unit, CLI end-to-end, references)
#   make asan       ASan + UBSan build running the same tests
#   make emu        the AVX-512 / AMX kernels emulated (SIMDe, the tile model)
#                   and checked bit for bit against their twins, on any x86-64
#   make mpi        MPI build (build-mpi/dlm, Open MPI) + its tests (docs/mpi.md)
#   make fuzz       libFuzzer targets, FUZZ_SECONDS each (default 60)
#   make fuzz-long  every libFuzzer target for 10 minutes (not in CI; docs/reliability.md)
#   make bench      benchmarks against their peers; appends bench/RESULTS.md
#   make tiny-base  reproduce models/tiny.gguf from the recipe
#   make demo       the main job end to end on the embedded base
#   make clean

JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 60
CTEST_ARGS ?=

.PHONY: all build test emu asan mpi fuzz fuzz-long bench tiny-base demo clean deps

all: build

deps:
	@scripts/deps.sh --check || scripts/deps.sh

build: deps
	@cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build build -j $(JOBS)

# Tests run from the release build; ref tests need python3-torch and node.
test: build
	@scripts/ref-deps.sh
	@cd build && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

# Also part of `make test` (label emu); alone here for a quick check.
emu: build
	@cd build && ctest --output-on-failure -L emu $(CTEST_ARGS)

asan: deps
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DDLM_SANITIZE=ON >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@scripts/ref-deps.sh
	@cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

# Data-parallel training under mpirun; needs libopenmpi-dev and openmpi-bin
# (scripts/deps.sh). Runs the MPI tests (tests/mpi) only: the rest is the
# default build's.
mpi: deps
	@cmake -S . -B build-mpi -DCMAKE_BUILD_TYPE=Release -DDLM_MPI=ON >/dev/null
	@cmake --build build-mpi -j $(JOBS)
	@cd build-mpi && ctest --output-on-failure -R '^mpi/' $(CTEST_ARGS)

fuzz: deps
	@CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DDLM_FUZZ=ON >/dev/null
	@cmake --build build-fuzz -j $(JOBS)
	@scripts/fuzz.sh build-fuzz $(FUZZ_SECONDS)

fuzz-long: deps
	@CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DDLM_FUZZ=ON >/dev/null
	@cmake --build build-fuzz -j $(JOBS)
	@scripts/fuzz.sh build-fuzz 600

bench: build
	@scripts/ref-deps.sh
	@bench/run.sh

tiny-base: build
	@tools/tiny/make-tiny.sh

# The demo installs and builds only what it needs (scripts/deps.sh --build,
# the dlm target), so a fresh machine gets there quickly.
demo:
	@scripts/demo.sh

clean:
	rm -rf build build-asan build-fuzz
