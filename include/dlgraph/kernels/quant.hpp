// Symmetric INT8 products, the kernel core of fixed models emitted with
// `--weights int8` (the scheme of TFLite Micro and CMSIS-NN: weights
// quantized per output channel, activations per tensor with a calibrated
// scale, both symmetric; products accumulated in int32).
//
// Everything is integer arithmetic but two float operations per element,
// so a model gives the same values on every machine that rounds IEEE
// single precision to nearest (the host and a Cortex-M4 alike).
#pragma once

#include <cstdint>

#include "dlgraph/kernels/config.hpp"

namespace dlgraph::kernels {

// The largest |q| of a symmetric INT8 value (-128 is not used).
inline constexpr std::int32_t s8_max = 127;

// The largest depth k whose int32 sum of k products of two INT8 values
// cannot overflow: k * 127 * 127 < 2^31.
inline constexpr std::int64_t s8_max_depth = 2147483647 / (s8_max * s8_max);

// The quantized inputs of a product are held widened to int16 (values in
// [-127, 127]): products of int16 and int8 compile to 16-bit multiply-adds
// (x86's vpmaddwd or vpdpwssd, Arm's SMLAD), about twice as fast as
// products of two int8 with GCC, for 2 bytes a value instead of 1.
using s8_wide = std::int16_t;

// q = x / scale rounded to the nearest integer (halves away from zero) and
// clamped to [-127, 127], given inv_scale = 1 / scale. NaN becomes 0.
// Without branches, so that loops of it vectorize.
template <class T> inline s8_wide quantize_s8(T x, T inv_scale) noexcept {
    T v = x * inv_scale;
    v = v == v ? v : T(0);
    v = v < T(-s8_max) ? T(-s8_max) : v;
    v = v > T(s8_max) ? T(s8_max) : v;
    // v - t is exact, so halves are found exactly (v + 0.5 would round
    // 0.49999997 up).
    const std::int32_t t = static_cast<std::int32_t>(v);
    const T frac = v - static_cast<T>(t);
    return static_cast<s8_wide>(t + (frac >= T(0.5)) - (frac <= T(-0.5)));
}

// q[i] = quantize_s8(x[i], inv_scale) for i < n.
template <class T, class N> inline void quantize_s8(const T* x, N n_, T inv_scale, s8_wide* q) noexcept {
    for (std::int64_t i = 0, n = extent(n_); i < n; ++i) q[i] = quantize_s8(x[i], inv_scale);
}

// z[i][j] = (sum over p of x[i][p] * w[j][p]) * scale[j], for the quantized
// rows x [m, k] (quantize_s8) and the INT8 weights w [n, k] (w transposed:
// each output channel's weights contiguous), the sum in int32
// (k <= s8_max_depth), scale[j] the product of x's scale and channel j's.
// z is [m, n].
template <class T, class M, class N, class K>
inline void gemm_s8(M m_, N n_, K k_, const s8_wide* x, const std::int8_t* w, const T* scale, T* z) noexcept {
    const std::int64_t m = extent(m_), n = extent(n_), k = extent(k_);
    for (std::int64_t i = 0; i < m; ++i) {
        const s8_wide* xi = x + i * k;
        for (std::int64_t j = 0; j < n; ++j) {
            const std::int8_t* wj = w + j * k;
            std::int32_t acc = 0;
            for (std::int64_t p = 0; p < k; ++p) acc += xi[p] * wj[p];
            z[i * n + j] = static_cast<T>(acc) * scale[j];
        }
    }
}

}  // namespace dlgraph::kernels
