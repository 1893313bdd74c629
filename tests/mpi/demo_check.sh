#!/usr/bin/env bash
# The demo under mpirun: 2 processes train the MLP data parallel for one
# epoch on the first LIMIT training images; rank 0 reports and saves the
# checkpoint, which a new single process loads to the identical accuracy.
# Usage: demo_check.sh MPIEXEC FASHION_MNIST WORK_DIR [LIMIT]
set -euo pipefail
mpiexec=$1 bin=$2 work=$3 limit=${4:-6000}
rm -rf "$work" && mkdir -p "$work"
"$mpiexec" -n 2 --oversubscribe "$bin" --data-parallel --epochs 1 --limit "$limit" --threads 1 --out "$work" \
  | tee "$work/train.log"
"$bin" --eval-only "$work/fashion_mnist_model" --threads 1 | tee "$work/eval.log"
grep -q "data parallel over 2 processes" "$work/train.log" || { echo "demo_check: not data parallel"; exit 1; }
trained=$(grep -o 'final test accuracy [0-9.]* ([0-9]*/[0-9]*)' "$work/train.log")
loaded=$(grep -o 'final test accuracy [0-9.]* ([0-9]*/[0-9]*)' "$work/eval.log")
[ -n "$trained" ] && [ "$trained" = "$loaded" ] || { echo "demo_check: trained '$trained', loaded '$loaded'"; exit 1; }
echo "demo_check: rank 0's checkpoint gives the identical $loaded in one process"
