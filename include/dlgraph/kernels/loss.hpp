// Losses over raw arrays, the kernel core of ops/loss.hpp: binary cross
// entropy of probabilities (Paddle's bce_loss) and its gradient.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "dlgraph/kernels/config.hpp"

namespace dlgraph::kernels {

// out[i] = (label[i] - 1) * max(log(1 - x[i]), -100) - label[i] * max(log(x[i]), -100)
// for i < n (Paddle's formula: the logs are clipped at -100, so x = 0 or 1
// gives a finite loss). An x outside [0, 1] (NaN too) is the fault
// prob_out_of_range (its position, and its value as FP64 bits); nothing is
// written then.
template <class T, class N> inline fault bce_loss(const T* x, const T* label, N n_, T* out) noexcept {
    const std::int64_t n = extent(n_);
    for (std::int64_t i = 0; i < n; ++i)
        if (!(x[i] >= T(0) && x[i] <= T(1)))
            return fault{fault_code::prob_out_of_range, i, n, std::bit_cast<std::int64_t>(static_cast<double>(x[i]))};
    const T floor_log = T(-100);
    for (std::int64_t i = 0; i < n; ++i)
        out[i] = (label[i] - T(1)) * std::max(std::log(T(1) - x[i]), floor_log) - label[i] * std::max(std::log(x[i]), floor_log);
    return {};
}

// dx[i] = dout[i] * (x[i] - label[i]) / max((1 - x[i]) * x[i], 1e-12) for i < n
// (Paddle's bce_loss_grad).
template <class T, class N> inline void bce_loss_grad(const T* x, const T* label, const T* dout, N n_, T* dx) noexcept {
    const std::int64_t n = extent(n_);
    for (std::int64_t i = 0; i < n; ++i) dx[i] = dout[i] * ((x[i] - label[i]) / std::max((T(1) - x[i]) * x[i], T(1e-12)));
}

}  // namespace dlgraph::kernels
