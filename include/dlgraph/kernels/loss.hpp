// Losses over raw arrays, the kernel core of ops/loss.hpp: binary cross
// entropy of probabilities (Paddle's bce_loss), of logits
// (sigmoid_cross_entropy_with_logits), huber_loss, smooth_l1_loss and
// kldiv_loss, each with its gradient.
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

// ---- sigmoid_cross_entropy_with_logits ------------------------------------------------------
//
// out[i] = max(x, 0) - x * label + log1p(exp(-|x|)) (the cross entropy of
// sigmoid(x) against a probability label, stable for any x), 0 where label
// equals ignore_index; with normalize, divided by the count of the others
// (Paddle's; all ignored: every element 0). Its gradient: (sigmoid(x) -
// label) * dout, the same zeros and divisor.
template <class T> inline std::int64_t sigmoid_ce_count(const T* label, std::int64_t n, std::int64_t ignore_index) noexcept {
    std::int64_t kept = 0;
    for (std::int64_t i = 0; i < n; ++i) kept += label[i] != static_cast<T>(ignore_index);
    return kept;
}
template <class T, class N>
inline void sigmoid_cross_entropy_with_logits(const T* x, const T* label, N n_, std::int64_t ignore_index, bool normalize,
                                              T* out) noexcept {
    const std::int64_t n = extent(n_);
    const std::int64_t kept = normalize ? sigmoid_ce_count(label, n, ignore_index) : 1;
    const T scale = kept > 0 ? T(1) / static_cast<T>(kept) : T(1);
    for (std::int64_t i = 0; i < n; ++i) {
        const T v = x[i];
        const T loss = std::max(v, T(0)) - v * label[i] + std::log1p(std::exp(-std::abs(v)));
        out[i] = label[i] == static_cast<T>(ignore_index) ? T(0) : normalize ? loss * scale : loss;
    }
}
template <class T, class N>
inline void sigmoid_cross_entropy_with_logits_grad(const T* x, const T* label, const T* dout, N n_, std::int64_t ignore_index,
                                                   bool normalize, T* dx) noexcept {
    const std::int64_t n = extent(n_);
    const std::int64_t kept = normalize ? sigmoid_ce_count(label, n, ignore_index) : 1;
    const T scale = kept > 0 ? T(1) / static_cast<T>(kept) : T(1);
    for (std::int64_t i = 0; i < n; ++i) {
        const T g = (T(1) / (T(1) + std::exp(-x[i])) - label[i]) * dout[i];
        dx[i] = label[i] == static_cast<T>(ignore_index) ? T(0) : normalize ? g * scale : g;
    }
}

// ---- huber_loss -------------------------------------------------------------------------------
//
// residual = y - x; out = r^2 / 2 where |r| <= delta, else delta (|r| -
// delta / 2). The gradient through the residual: dr = r, or delta sign(r)
// beyond delta, times dout; dx = -dr, dy = dr (either may be null).
template <class T, class N> inline void huber_loss(const T* x, const T* y, N n_, T delta, T* residual, T* out) noexcept {
    const std::int64_t n = extent(n_);
    for (std::int64_t i = 0; i < n; ++i) {
        const T r = y[i] - x[i], a = std::abs(r);
        residual[i] = r;
        out[i] = a <= delta ? T(0.5) * r * r : delta * (a - T(0.5) * delta);
    }
}
template <class T, class N>
inline void huber_loss_grad(const T* residual, const T* dout, N n_, T delta, T* dx, T* dy) noexcept {
    const std::int64_t n = extent(n_);
    for (std::int64_t i = 0; i < n; ++i) {
        const T r = residual[i];
        const T g = (std::abs(r) <= delta ? r : r > T(0) ? delta : -delta) * dout[i];
        if (dx) dx[i] = -g;
        if (dy) dy[i] = g;
    }
}

// ---- smooth_l1_loss ---------------------------------------------------------------------------
//
// Over rows of `cols` (X, Y [rows, cols...]): diff = (x - y) * inside (the
// weight may be null: 1), each element's loss sigma2 diff^2 / 2 where |diff|
// < 1 / sigma2, else |diff| - 1 / (2 sigma2), times outside (null: 1),
// summed per row into out[row]. The gradient: f'(diff) * outside * dout[row]
// * inside for X, its negative for Y (f' = sigma2 diff, or sign(diff)).
template <class T>
inline void smooth_l1_loss(const T* x, const T* y, const T* inside, const T* outside, std::int64_t rows, std::int64_t cols,
                           T sigma2, T* diff, T* out) noexcept {
    for (std::int64_t r = 0; r < rows; ++r) {
        T sum = T(0);
        for (std::int64_t c = 0; c < cols; ++c) {
            const std::int64_t i = r * cols + c;
            const T d = inside ? (x[i] - y[i]) * inside[i] : x[i] - y[i];
            const T a = std::abs(d);
            const T l = a < T(1) / sigma2 ? T(0.5) * d * d * sigma2 : a - T(0.5) / sigma2;
            diff[i] = d;
            sum += outside ? l * outside[i] : l;
        }
        out[r] = sum;
    }
}
template <class T>
inline void smooth_l1_loss_grad(const T* inside, const T* outside, const T* diff, const T* dout, std::int64_t rows,
                                std::int64_t cols, T sigma2, T* dx, T* dy) noexcept {
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c) {
            const std::int64_t i = r * cols + c;
            const T d = diff[i];
            T g = std::abs(d) < T(1) / sigma2 ? sigma2 * d : d > T(0) ? T(1) : d < T(0) ? T(-1) : T(0);
            if (outside) g *= outside[i];
            if (inside) g *= inside[i];
            g *= dout[r];
            if (dx) dx[i] = g;
            if (dy) dy[i] = -g;
        }
}

// ---- kldiv_loss -------------------------------------------------------------------------------
//
// Element losses target * (log(target) - x) where target > 0, else 0, then
// Paddle's reduction: none (element by element), sum, mean (over all n) or
// batchmean (the sum over `batch`, X's first dim). The gradient: -target *
// dloss where target > 0 (dloss broadcast, with the reduction's divisor).
enum class kl_reduction : int { none, sum, mean, batchmean };
template <class T>
inline void kldiv_loss(const T* x, const T* target, std::int64_t n, std::int64_t batch, kl_reduction red, T* loss) noexcept {
    T sum = T(0);
    for (std::int64_t i = 0; i < n; ++i) {
        const T t = target[i];
        const T l = t > T(0) ? t * (std::log(t) - x[i]) : T(0);
        if (red == kl_reduction::none) loss[i] = l;
        else sum += l;
    }
    if (red == kl_reduction::sum) loss[0] = sum;
    if (red == kl_reduction::mean) loss[0] = n > 0 ? sum / static_cast<T>(n) : T(0);
    if (red == kl_reduction::batchmean) loss[0] = batch > 0 ? sum / static_cast<T>(batch) : T(0);
}
template <class T>
inline void kldiv_loss_grad(const T* target, const T* dloss, std::int64_t n, std::int64_t batch, kl_reduction red, T* dx) noexcept {
    const T div = red == kl_reduction::mean ? static_cast<T>(n > 0 ? n : 1) : red == kl_reduction::batchmean ? static_cast<T>(batch > 0 ? batch : 1) : T(1);
    for (std::int64_t i = 0; i < n; ++i) {
        const T g = red == kl_reduction::none ? dloss[i] : dloss[0] / div;
        dx[i] = target[i] > T(0) ? -target[i] * g : T(0);
    }
}

}  // namespace dlgraph::kernels
