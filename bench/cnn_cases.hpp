// What bench_cnn.cpp (dlgraph) and bench_cnn_torch.cpp (LibTorch) both
// time, so that each case runs under both names in one binary: the CNN
// of examples/fashion_mnist_models.hpp (channels 32 and 64, hidden 128, the
// demo's defaults)
// and its convolutions, and a 3x3 convolution 64 -> 64 on 56x56 at batch 8
// (a ResNet stage). FP32, NCHW.
#pragma once

#include <cstdint>

namespace cnn_bench {

struct conv_case {
    const char* name;
    std::int64_t n, c, h, w, m, k, pad;
    // Multiply-adds of the forward product, times 2: its FLOP.
    double flop() const { return 2.0 * double(n) * double(m) * double(h) * double(w) * double(c) * double(k * k); }
};
inline constexpr conv_case conv_cases[] = {
    {"cnn.conv1 b64 1->32 28x28", 64, 1, 28, 28, 32, 3, 1},
    {"cnn.conv2 b64 32->64 14x14", 64, 32, 14, 14, 64, 3, 1},
    {"b8 64->64 56x56", 8, 64, 56, 56, 64, 3, 1},
};
inline constexpr int conv_case_count = sizeof(conv_cases) / sizeof(conv_cases[0]);

inline constexpr std::int64_t channels1 = 32, channels2 = 64, hidden = 128;
inline constexpr double learning_rate = 1e-3;

// Deterministic inputs in [0, 1).
inline float value(std::int64_t i) { return static_cast<float>((i * 7919) % 1000) / 1000.0f; }

}  // namespace cnn_bench
