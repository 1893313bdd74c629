#!/usr/bin/env bash
# The GPU checks of issue 15, on a machine with a GPU, from the programs
# scripts/gpu_stage.sh put in .gpu/. Stages (default: all, in this order):
#   tests   dlgraph_cuda_tests (every op case against Session<cpu>, training,
#           waits, faults, threads, close, collectives over one-rank NCCL)
#   fmnist  examples/fashion_mnist --device cuda (12 epochs), its checkpoint
#           evaluated by a CPU session, and one CPU epoch for the epoch time
#   bench   bench_cuda: GEMM vs cublasSgemm, triad and reductions vs
#           cudaMemcpy, 1,000 tiny ops
#   train   the MLP training step: bench_cuda and PyTorch
#           (bench/bench_train_torch_cuda.py), alternated three times
#   memcheck  the tests under compute-sanitizer's memcheck (only when named;
#           MEMCHECK_FILTER, a doctest test-case pattern, narrows it)
# Logs go to $OUT (the device tool's folder) or /tmp/gpu-out. BENCH_FILTER
# narrows the bench stage (a regex), TRAIN_ROUNDS sets the train stage's rounds.
#   bash scripts/gpu_check.sh [tests] [fmnist] [bench] [train]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/gpu-out}
mkdir -p "$out"
stages=${*:-tests fmnist bench train}
for f in .gpu/*.gz; do [ -e "$f" ] && gunzip -f "$f" && chmod +x "${f%.gz}"; done
cublas=$(find /usr/local/cuda*/ /opt /usr/lib -name 'libcublas.so.13*' 2>/dev/null | head -1)
export LD_LIBRARY_PATH=$PWD/.gpu/lib:${cublas:+$(dirname "$cublas"):}/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
# NCCL (dlgraph/cuda/nccl.hpp loads it at run time): the toolkit's, else the
# copy PyTorch's wheel ships; the NCCL test cases must then run, not skip.
nccl=$(find /usr/local/cuda*/ /usr/lib /usr/local/lib /opt -name 'libnccl.so.2*' 2>/dev/null | head -1)
[ -n "$nccl" ] || nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(nvidia.nccl.__path__[0], "lib", "libnccl.so.2"))' 2>/dev/null)
if [ -n "$nccl" ] && [ -e "$nccl" ]; then
  export DLGRAPH_NCCL_LIBRARY=$nccl DLGRAPH_REQUIRE_NCCL=1
  echo "NCCL: $nccl"
else
  echo "NCCL: none found (the NCCL test cases skip)"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
lscpu | grep -E '^Model name|^CPU\(s\)'
ldd .gpu/dlgraph_cuda_tests | grep -E 'not found|cublas|cudart' || true
stage() { echo; echo "==== $1 ($(date +%T))"; }
for s in $stages; do
  case $s in
  tests)
    stage tests
    timeout 240 .gpu/dlgraph_cuda_tests 2>&1 | tee "$out/cuda_tests.log" | tail -80 ;;
  fmnist)
    stage fmnist
    timeout 150 .gpu/fashion_mnist --device cuda --data .gpu/fashion-mnist --out /tmp/fm-gpu 2>&1 |
      tr '\r' '\n' | grep -v '^epoch.*left' | tee "$out/fmnist.log" | tail -20
    timeout 60 .gpu/fashion_mnist --device cpu --eval-only /tmp/fm-gpu/fashion_mnist_model --data .gpu/fashion-mnist 2>&1 | tail -3
    timeout 60 .gpu/fashion_mnist --device cpu --epochs 1 --data .gpu/fashion-mnist --out /tmp/fm-cpu 2>&1 |
      tr '\r' '\n' | grep -v '^epoch.*left' | tail -4 ;;
  bench)
    stage bench
    timeout 240 .gpu/bench_cuda --benchmark_filter="${BENCH_FILTER:-gemm|triad|memcpy|reduce|tiny}" --benchmark_repetitions=3 \
      --benchmark_report_aggregates_only=true --benchmark_enable_random_interleaving=true --benchmark_min_time=0.2 2>&1 | tee "$out/bench.log" | grep -v '_stddev\|_cv' ;;
  train)
    stage train
    for r in $(seq "${TRAIN_ROUNDS:-3}"); do
      timeout 60 .gpu/bench_cuda --benchmark_filter=mlp_train --benchmark_min_time=0.5 2>&1 | grep BM_ | tee -a "$out/train.log"
      PYTHONUNBUFFERED=1 timeout 90 python3 bench/bench_train_torch_cuda.py --reps 3 --steps 100 2>&1 | tee -a "$out/train.log"
    done ;;
  memcheck)  # not in the default stages: the tests under compute-sanitizer (several times slower)
    stage memcheck
    timeout "${MEMCHECK_TIMEOUT:-300}" compute-sanitizer --tool memcheck --error-exitcode 1 --print-limit 20 \
      .gpu/dlgraph_cuda_tests ${MEMCHECK_FILTER:+"-tc=$MEMCHECK_FILTER"} 2>&1 | tee "$out/memcheck.log" | tail -40 ;;
  *) echo "unknown stage $s" ;;
  esac
done
