#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang 14, AddressSanitizer +
# UndefinedBehaviorSanitizer) and runs them.
#
#   bash scripts/fuzz.sh              replay every corpus, then fuzz each target for 30 s
#                                     (as many at a time as DLGRAPH_JOBS, or the cores)
#   bash scripts/fuzz.sh TARGET SECS  fuzz one target (program, npy, npz, idx, checkpoint, cli)
#                                     for SECS seconds (a campaign: thousands)
#
# Runs work on a copy of the corpus under build-fuzz/corpus; new inputs stay
# there. A finding stops the run with the sanitizer's report and leaves the
# input as build-fuzz/crash-*: add it to tests/fuzz/corpus/TARGET (and a test
# in tests/test_hostile.cpp) once it is fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --with-fuzz
jobs=${DLGRAPH_JOBS:-$(nproc)}
source scripts/configure.sh
export CC=clang-14 CXX=clang++-14
configure build-fuzz -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE="-O1 -g1" \
  -DDLGRAPH_BUILD_FUZZ=ON -DDLGRAPH_SANITIZE=address,undefined -DDLGRAPH_BUILD_TESTS=OFF \
  -DDLGRAPH_BUILD_EXAMPLES=OFF -DDLGRAPH_BUILD_TOOLS=OFF
targets=(program npy npz idx checkpoint cli)
[ $# -ge 1 ] && targets=("$1")
cmake --build build-fuzz -j "$jobs" --target "${targets[@]/#/fuzz_}"
seconds=${2:-30}
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Every corpus is replayed first; then the targets are fuzzed $jobs at a
# time, each writing its log and exit status under build-fuzz/.
for t in "${targets[@]}"; do
  work=build-fuzz/corpus/$t
  mkdir -p "$work"
  cp -n tests/fuzz/corpus/"$t"/* "$work"/ 2>/dev/null || true
  echo "== fuzz_$t: replay tests/fuzz/corpus/$t"
  ./build-fuzz/tests/fuzz/fuzz_"$t" -runs=0 tests/fuzz/corpus/"$t" 2>&1 | tail -1
done
fuzz_one() {
  local t=$1 rc=0
  ./build-fuzz/tests/fuzz/fuzz_"$t" build-fuzz/corpus/"$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 -artifact_prefix=build-fuzz/ -print_final_stats=1 >build-fuzz/fuzz_"$t".log 2>&1 || rc=$?
  echo "$rc" >build-fuzz/fuzz_"$t".rc
}
echo "== fuzzing each target for ${seconds}s, $jobs at a time"
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  fuzz_one "$t" &
done
wait
for t in "${targets[@]}"; do
  log=build-fuzz/fuzz_$t.log
  if [ "$(cat build-fuzz/fuzz_"$t".rc)" != 0 ]; then
    tail -n 60 "$log"
    echo "== fuzz_$t: FINDING (input saved as build-fuzz/crash-* or similar; log: $log)"
    exit 1
  fi
  echo "== fuzz_$t: $(grep -E "^Done [0-9]+ runs" "$log" | tail -1), no finding"
done
echo "== fuzz: no findings"
