#!/usr/bin/env bash
# The main demo from a fresh Debian 12 machine: installs what is missing,
# builds the quickstart example and runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target quickstart
mkdir -p out
./build/examples/quickstart out
