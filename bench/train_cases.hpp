// The cases bench_train.cpp and bench_train_torch.cpp share: the batch both
// sides train on, and the argument lists (batch, threads) of the paired
// BM_<what>_dlgraph / BM_<what>_libtorch benchmarks (bench/ratios.py pairs
// them). Plain C++17: the LibTorch side compiles as C++17.
#pragma once

#include <cstdint>

namespace train_bench {

// Pixels in [0, 1) and labels 0..9, the same on both sides.
inline void fill(std::int64_t n, float* x, std::int64_t* y) {
    for (std::int64_t i = 0; i < n * 784; ++i) x[i] = static_cast<float>((i * 7919) % 255) / 255.0f;
    for (std::int64_t i = 0; i < n; ++i) y[i] = i % 10;
}

}  // namespace train_bench

#define TRAIN_BENCH_CASES(sgd, adam, forward)                                                                   \
    BENCHMARK(sgd)->ArgNames({"batch", "threads"})->ArgsProduct({{64, 256}, {1, 2}})->Unit(benchmark::kMicrosecond)->UseRealTime(); \
    BENCHMARK(adam)->ArgNames({"batch", "threads"})->ArgsProduct({{64, 256}, {1, 2}})->Unit(benchmark::kMicrosecond)->UseRealTime(); \
    BENCHMARK(forward)->ArgNames({"batch", "threads"})->ArgsProduct({{1, 64, 256}, {1, 2}})->Unit(benchmark::kMicrosecond)->UseRealTime();
