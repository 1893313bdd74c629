// Dropout's mask, the kernel core of ops/dropout.hpp: element i is kept when
// a counter-based draw u(seed, i) in [0, 1) is at least the drop
// probability, so a seed gives the same mask on every machine and thread
// split, and element i's draw does not depend on the others.
#pragma once

#include <cstdint>

#include "dlgraph/kernels/config.hpp"

namespace dlgraph::kernels {

// SplitMix64's finalizer: a bijection on 64 bits that mixes every input bit.
constexpr std::uint64_t mix64(std::uint64_t z) noexcept {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// The draw of element i for a seed: 53 random bits as a double in [0, 1).
constexpr double dropout_draw(std::uint64_t seed, std::int64_t i) noexcept {
    const std::uint64_t h = mix64(mix64(seed) + 0x9e3779b97f4a7c15ULL * (static_cast<std::uint64_t>(i) + 1));
    return static_cast<double>(h >> 11) * 0x1p-53;
}

// Elements [b, e) of a training dropout: keep = draw >= p, y[i] = x[i] *
// keep_scale (1, or 1 / (1 - p) for upscale_in_train; 0 when p is 1) or 0,
// and mask[i] = keep when a mask is wanted.
template <class T>
inline void dropout_train(const T* x, T* y, bool* mask, std::int64_t b, std::int64_t e, std::uint64_t seed, double p,
                          T keep_scale) noexcept {
    for (std::int64_t i = b; i < e; ++i) {
        const bool keep = dropout_draw(seed, i) >= p;
        if (mask) mask[i] = keep;
        y[i] = keep ? x[i] * keep_scale : T(0);
    }
}

// dx = dy * mask * keep_scale over [b, e).
template <class T>
inline void dropout_grad(const bool* mask, const T* dy, T* dx, std::int64_t b, std::int64_t e, T keep_scale) noexcept {
    for (std::int64_t i = b; i < e; ++i) dx[i] = mask[i] ? dy[i] * keep_scale : T(0);
}

}  // namespace dlgraph::kernels
