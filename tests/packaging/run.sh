#!/usr/bin/env bash
# Checks the ways to use dlgraph: find_package after `cmake --install`,
# add_subdirectory, and a plain compiler given only the include path; the
# installed package also against dlgraph::prebuilt.
# Usage: run.sh SOURCE_DIR WORK_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
work=$2
rm -rf "$work" && mkdir -p "$work"
here="$src/tests/packaging"
gen=()
quiet() { "$@" >"$work/last.log" 2>&1 || { cat "$work/last.log"; exit 1; }; }

echo "== install"
# The CPU library here; dlgraph::cuda and dlgraph::mpi from the main build: backends.sh.
quiet cmake -S "$src" -B "$work/lib" -DDLGRAPH_BUILD_TESTS=OFF -DDLGRAPH_BUILD_EXAMPLES=OFF -DDLGRAPH_BUILD_TOOLS=OFF \
  -DDLGRAPH_CUDA=OFF
# dlgraph::prebuilt, unoptimized (no build type): the -O0 path of simd.hpp
quiet cmake --build "$work/lib" -j2
quiet cmake --install "$work/lib" --prefix "$work/prefix"

echo "== find_package(dlgraph CONFIG)"
quiet cmake -S "$here/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix"
quiet cmake --build "$work/consumer"
"$work/consumer/consumer"
"$work/consumer/consumer_prebuilt"

echo "== add_subdirectory"
quiet cmake -S "$here/subdir" -B "$work/subdir" -DDLGRAPH_SOURCE_DIR="$src"
quiet cmake --build "$work/subdir"
"$work/subdir/consumer"

echo "== plain compiler, include path only"
g++ -std=c++20 -I"$work/prefix/include" "$here/consumer/main.cpp" -o "$work/plain"
"$work/plain"
echo "packaging: all three consumers built and ran"
