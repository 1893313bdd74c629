#!/usr/bin/env bash
# Issue 14's speed check: data-parallel training of the MLP 784-512-512-10
# on 2 processes x 1 thread against 1 process x 1 thread, batch 64 (and 256)
# per process, run alternately ROUNDS times (default 3); prints each run and
# the ratio of examples per second (2 / 1) with its spread.
# Usage: bench/data_parallel.sh BUILD_DIR [ROUNDS]  (DP_BATCHES="64" for one batch size)
# Last, the gradients' all-reduces alone, with the data in the caches and out of them.
# Open MPI's shared-memory transport copies in and out of a bounce buffer
# (single_copy_mechanism none: works in any container); where the kernel
# lets processes read each other's memory, DLGRAPH_SINGLE_COPY=cma makes
# one copy (2026-12-02: the all-reduce 0.77 -> 0.52 ms a step).
set -euo pipefail
bin=$1/bench/bench_data_parallel
rounds=${2:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=${DLGRAPH_SINGLE_COPY:-none}
for batch in ${DP_BATCHES:-64 256}; do
  ratios=()
  for r in $(seq "$rounds"); do
    run() {  # examples per second, all-reduce time and step times (p10 p50 p90) of one run on $1 processes
      mpirun -n "$1" --bind-to core "$bin" --benchmark_filter="train.*/$batch/" --benchmark_format=json 2>/dev/null |
        python3 -c 'import json,sys; b=json.load(sys.stdin)["benchmarks"][0]; print(b["examples_per_s"], b["allreduce_us"], b["first_allreduce_us"], "%.0f/%.0f/%.0f" % (b["step_p10_us"], b["step_p50_us"], b["step_p90_us"]), "%.0f/%.0f" % (b["compute_us"], b["slowest_compute_us"]))'
    }
    read -r one _ _ q1 _ < <(run 1)
    read -r two reduce first q2 c2 < <(run 2)
    ratio=$(python3 -c "print(f'{$two / $one:.3f}')")
    ratios+=("$ratio")
    printf 'batch %d per process, round %d: 1 process %.0f examples/s (step p10/p50/p90 %s us); 2 processes %.0f examples/s (%s us; all-reduce %.0f us/step, the first %.0f; compute rank 0/slowest %s us); ratio %s\n' \
      "$batch" "$r" "$one" "$q1" "$two" "$q2" "$reduce" "$first" "$c2" "$ratio"
  done
  python3 -c "
import statistics as s; r=[float(x) for x in '${ratios[*]}'.split()]
print(f'batch $batch per process: 2 processes / 1 process: median {s.median(r):.3f}x, min {min(r):.3f}, max {max(r):.3f} over {len(r)} rounds')"
done
# The gradients' all-reduces alone, in the caches and out of them.
mpirun -n 2 --bind-to core "$bin" --benchmark_filter=allreduce --benchmark_repetitions="$rounds" --benchmark_format=json 2>/dev/null |
  python3 -c '
import json, statistics as s, sys
runs = [b for b in json.load(sys.stdin)["benchmarks"] if b.get("run_type") == "iteration"]
t = {k: [b["real_time"] for b in runs if "cold:%d" % k in b["name"]] for k in (0, 1)}
print("all-reduce of the 2.68 MB of gradients alone, us/step: in the caches median %.0f (%.0f-%.0f), out of them median %.0f (%.0f-%.0f)" % (
    s.median(t[0]), min(t[0]), max(t[0]), s.median(t[1]), min(t[1]), max(t[1])))'
