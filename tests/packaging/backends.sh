#!/usr/bin/env bash
# The backends of an installed dlgraph, from a finished build: installs
# BUILD_DIR, then builds tests/packaging/backends with g++ alone against it
# and runs each consumer named: cuda (dlgraph::cuda: links without nvcc,
# runs a Session<cuda> where a GPU is visible) and mpi (dlgraph::mpi: alone,
# then under `MPIEXEC -n 2`).
# Usage: backends.sh SOURCE_DIR BUILD_DIR WORK_DIR MPIEXEC [cuda] [mpi]
set -euo pipefail
src=$(cd "$1" && pwd)
build=$2
work=$3
mpiexec=$4
shift 4
rm -rf "$work" && mkdir -p "$work"
quiet() { "$@" >"$work/last.log" 2>&1 || { cat "$work/last.log"; exit 1; }; }

quiet cmake --install "$build" --prefix "$work/prefix"
quiet cmake -S "$src/tests/packaging/backends" -B "$work/consumers" -DCMAKE_PREFIX_PATH="$work/prefix"
quiet cmake --build "$work/consumers" -j2
for b in "$@"; do
  exe="$work/consumers/consumer_$b"
  [ -x "$exe" ] || { echo "the installed package has no dlgraph::$b"; exit 1; }
  echo "== dlgraph::$b"
  "$exe"
  if [ "$b" = mpi ]; then "$mpiexec" -n 2 --oversubscribe "$exe"; fi
done
echo "packaging: the installed backends built and ran: $*"
