// The INT8 kernels of fixed models (kernels/quant.hpp) against
// double-precision references.
#include <dlgraph/kernels/quant.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace k = dlgraph::kernels;

namespace {

// x / scale rounded half away from zero, clamped to [-127, 127], in double.
int reference_q(float x, float inv_scale) {
    const double v = static_cast<double>(x * inv_scale);  // the product is the kernel's, in float
    return static_cast<int>(std::clamp(std::round(v), -127.0, 127.0));
}

}  // namespace

TEST_CASE("quantize_s8: nearest, halves away from zero, clamped, NaN to 0") {
    const float inv = 1.0f;
    CHECK(k::quantize_s8(0.5f, inv) == 1);
    CHECK(k::quantize_s8(-0.5f, inv) == -1);
    CHECK(k::quantize_s8(1.5f, inv) == 2);
    CHECK(k::quantize_s8(-2.5f, inv) == -3);
    CHECK(k::quantize_s8(0.49999997f, inv) == 0);  // v + 0.5 would give 1
    CHECK(k::quantize_s8(-0.49999997f, inv) == 0);
    CHECK(k::quantize_s8(126.5f, inv) == 127);
    CHECK(k::quantize_s8(1e9f, inv) == 127);
    CHECK(k::quantize_s8(-1e9f, inv) == -127);  // -128 is not used
    CHECK(k::quantize_s8(std::numeric_limits<float>::infinity(), inv) == 127);
    CHECK(k::quantize_s8(-std::numeric_limits<float>::infinity(), inv) == -127);
    CHECK(k::quantize_s8(std::numeric_limits<float>::quiet_NaN(), inv) == 0);
    CHECK(k::quantize_s8(-0.0f, inv) == 0);

    std::mt19937 rng(7);
    std::uniform_real_distribution<float> d(-3, 3);
    const float inv_scale = 127.0f / 2.5f;
    std::vector<float> x(1000);
    for (float& v : x) v = d(rng);
    std::vector<k::s8_wide> q(x.size());
    k::quantize_s8(x.data(), std::int64_t(x.size()), inv_scale, q.data());
    for (std::size_t i = 0; i < x.size(); ++i) CHECK(int(q[i]) == reference_q(x[i], inv_scale));
}

TEST_CASE("gemm_s8: int32 sums of INT8 products, scaled per channel") {
    for (auto [m, n, kk] : {std::array<std::int64_t, 3>{1, 1, 1}, {3, 5, 7}, {2, 10, 784}, {1, 3, k::s8_max_depth}}) {
        CAPTURE(m);
        CAPTURE(n);
        CAPTURE(kk);
        std::mt19937 rng(static_cast<unsigned>(m * 31 + n * 7 + kk));
        std::uniform_int_distribution<int> d(-127, 127);
        std::vector<k::s8_wide> x(static_cast<std::size_t>(m * kk));
        std::vector<std::int8_t> w(static_cast<std::size_t>(n * kk));
        for (auto& v : x) v = static_cast<k::s8_wide>(d(rng));
        for (auto& v : w) v = static_cast<std::int8_t>(d(rng));
        if (kk == k::s8_max_depth) {  // the largest sum that fits: every product 127 * 127
            std::fill(x.begin(), x.end(), k::s8_wide(127));
            std::fill(w.begin(), w.begin() + kk, std::int8_t(127));
            std::fill(w.begin() + kk, w.begin() + 2 * kk, std::int8_t(-127));
        }
        std::vector<float> scale(static_cast<std::size_t>(n)), z(static_cast<std::size_t>(m * n));
        for (std::int64_t j = 0; j < n; ++j) scale[static_cast<std::size_t>(j)] = 1e-4f * static_cast<float>(j + 1);
        k::gemm_s8(m, n, kk, x.data(), w.data(), scale.data(), z.data());
        for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < n; ++j) {
                std::int64_t acc = 0;
                for (std::int64_t p = 0; p < kk; ++p) acc += std::int64_t(x[i * kk + p]) * w[j * kk + p];
                // The sum is exact; one rounding to float, then one product.
                const float want = static_cast<float>(acc) * scale[static_cast<std::size_t>(j)];
                CHECK(z[static_cast<std::size_t>(i * n + j)] == want);
            }
    }
}
