#!/usr/bin/env bash
# The main demo from a fresh Debian 12 machine: installs what is missing
# (with the Fashion-MNIST data set), builds the examples, trains an MLP on
# Fashion-MNIST (a CNN with `--model cnn`), then loads the saved checkpoint
# in a new process and checks that it gives the identical test accuracy.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --with-data
source scripts/configure.sh
configure build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)" --target fashion_mnist quickstart
mkdir -p out
# `--model cnn` trains the convolutional network instead (its files are
# named fashion_mnist_cnn_*).
stem=fashion_mnist
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  if [ "${args[$i]}" = --model ] && [ "${args[$((i + 1))]:-}" = cnn ]; then stem=fashion_mnist_cnn; fi
done
./build/examples/fashion_mnist --out out "$@" | tee out/train.log
./build/examples/fashion_mnist --eval-only "out/${stem}_model" | tee out/eval.log
trained=$(grep -o 'final test accuracy [0-9.]* ([0-9]*/[0-9]*)' out/train.log)
loaded=$(grep -o 'final test accuracy [0-9.]* ([0-9]*/[0-9]*)' out/eval.log)
if [ "$trained" = "$loaded" ]; then
  echo "demo: the reloaded checkpoint gives the identical $loaded"
else
  echo "demo: MISMATCH: training gave '$trained', the reloaded checkpoint '$loaded'" >&2
  exit 1
fi
echo "demo: curves in out/${stem}_curves.svg"
