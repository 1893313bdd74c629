#!/usr/bin/env bash
# The whole test suite from a fresh Debian 12 machine: installs what is
# missing, builds, runs the tests, runs the op suite and kernel-core tests
# against the portable kernel core (no SIMD), then runs the tests again under
# AddressSanitizer + UndefinedBehaviorSanitizer, the scope's concurrency
# tests under ThreadSanitizer, and the fuzz targets (clang's libFuzzer):
# their corpora replayed and 30 s of fuzzing each. The Release tests include
# fixed models on an emulated Cortex-M4 (examples/embedded/run.sh), hence the
# ARM toolchain, QEMU and the Fashion-MNIST data, and the collective ops and
# data-parallel training on 2-4 processes under mpirun (tests/mpi), hence
# Open MPI.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --with-embedded --with-data --with-mpi
jobs=${DLGRAPH_JOBS:-$(nproc)}
# Each stage's heading says when it started (seconds since this script did).
stage() { echo "== [${SECONDS}s] $*"; }
source scripts/configure.sh

stage "build and test (Release)"
configure build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs" | tee build/ctest.log

stage "op suite and kernel core without SIMD (DLGRAPH_NO_SIMD)"
cmake --build build -j "$jobs" --target dlgraph_portable_tests
./build/tests/dlgraph_portable_tests | tee build/portable.log

stage "test under AddressSanitizer + UndefinedBehaviorSanitizer"
# -g1: line tables only, which is all a sanitizer's report needs (file:line
# of every frame); full debug info made the library's compilation 45% slower.
configure build-asan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
  -DDLGRAPH_SANITIZE=address,undefined -DDLGRAPH_BUILD_EXAMPLES=OFF
# With MPI (setup.sh installs it) the collective ops' tests too, under mpirun
# with tests/mpi/lsan.supp for Open MPI's own allocations.
asan_targets=(dlgraph_tests dlgraph_cli dlgraph_fixed_tests)
if cmake --build build-asan --target help | grep -q '^dlgraph_mpi_tests:'; then asan_targets+=(dlgraph_mpi_tests); fi
cmake --build build-asan -j "$jobs" --target "${asan_targets[@]}"
# Test cases named "(large)" run Paddle's largest configurations for their
# numbers (tens of millions of elements); smaller ones take the same code
# paths under the sanitizers.
ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure -j "$jobs" -E '^(compile_fail|packaging)|\(large\)$' \
  | tee build-asan/ctest.log

stage "concurrency tests under ThreadSanitizer"
configure build-tsan -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
  -DDLGRAPH_SANITIZE=thread -DDLGRAPH_BUILD_EXAMPLES=OFF
cmake --build build-tsan -j "$jobs" --target dlgraph_thread_tests
TSAN_OPTIONS=halt_on_error=1 ./build-tsan/tests/dlgraph_thread_tests | tee build-tsan/doctest.log
stage "fuzz targets: corpora replayed, then 30 s each (scripts/fuzz.sh)"
bash scripts/fuzz.sh
# One closing line for the four runs: ctest counts (less the tests ctest
# skipped: the GPU tests where no GPU is visible), then the portable and TSan cases.
total=0
skipped=0
for f in build/ctest.log build-asan/ctest.log; do
  total=$((total + $(sed -n 's/.* tests failed out of \([0-9]*\).*/\1/p' "$f")))
  skipped=$((skipped + $(grep -c '(Skipped)$' "$f" || true)))
done
for f in build/portable.log build-tsan/doctest.log; do
  total=$((total + $(sed -n 's/.*test cases: *\([0-9]*\).*/\1/p' "$f")))
done
stage "all tests passed"
echo "tests: $((total - skipped)) passed, 0 failed, $skipped skipped$( [ "$skipped" -gt 0 ] && echo ' (GPU tests: no GPU here)')"
