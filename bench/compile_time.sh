#!/usr/bin/env bash
# Times compiling examples/fashion_mnist.cpp at -O2, header-only and against
# dlgraph::prebuilt (declarations only; the library is not compiled here),
# the best of N runs each (default 3). Usage: bench/compile_time.sh [N]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
flags=(-std=c++20 -O2 -march=native -Iinclude -c examples/fashion_mnist.cpp -o /dev/null)
best() {
    local b=
    for _ in $(seq "$runs"); do
        local t0 t1
        t0=$(date +%s.%N)
        g++ "$@"
        t1=$(date +%s.%N)
        b=$(echo "$t0 $t1 ${b:-1e9}" | awk '{d = $2 - $1; print (d < $3 ? d : $3)}')
    done
    printf '%.1f s' "$b"
}
echo "fashion_mnist.cpp -O2, prebuilt (-DDLGRAPH_PREBUILT): $(best -DDLGRAPH_PREBUILT "${flags[@]}")"
echo "fashion_mnist.cpp -O2, header-only:                   $(best "${flags[@]}")"
