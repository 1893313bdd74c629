#!/usr/bin/env bash
# Builds what the GPU checks run (scripts/gpu_check.sh) and stages it in
# .gpu/ (git-ignored), for the project's `device` tool to carry to a
# machine with a GPU: that machine has the CUDA runtime, cuBLAS and PyTorch
# but none of the Debian -dev packages, and its CPU is not this one, so the
# programs are built for x86-64-v3 (AVX2) rather than -march=native, and the
# shared libraries it lacks travel with them.
# The Fashion-MNIST files (30 MB of the 64 MiB the tool carries) come only
# with WITH_DATA=1, for gpu_check.sh's fmnist stage.
#   [WITH_DATA=1] bash scripts/gpu_stage.sh [BUILD_DIR]      (default /tmp/build-gpu)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/configure.sh
build=${1:-/tmp/build-gpu}
configure "$build" -DCMAKE_BUILD_TYPE=Release -DDLGRAPH_CUDA=ON -DDLGRAPH_BUILD_BENCH=ON -DDLGRAPH_NATIVE=OFF \
  -DCMAKE_CXX_FLAGS=-march=x86-64-v3
ninja -C "$build" dlgraph_cuda_tests fashion_mnist bench_cuda
rm -rf .gpu && mkdir -p .gpu/lib
for f in tests/dlgraph_cuda_tests examples/fashion_mnist bench/bench_cuda; do  # gpu_check.sh unpacks them
  strip -o ".gpu/$(basename $f)" "$build/$f" && gzip -9 ".gpu/$(basename $f)"
done
cp -L /usr/lib/x86_64-linux-gnu/libbenchmark.so.1debian .gpu/lib/
if [ "${WITH_DATA:-0}" = 1 ]; then
  mkdir -p .gpu/fashion-mnist && cp /usr/share/datasets/fashion-mnist/*.gz .gpu/fashion-mnist/
fi
du -sh .gpu
