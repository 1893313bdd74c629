// Batch normalization over one channel of an NCHW tensor, the kernel core of
// ops/norm.hpp: the channel is `n` blocks of `hw` contiguous elements, block
// b at x + b * stride (n = the batch, hw = the spatial size, stride = C * hw;
// NHWC: n = every element of the channel, hw = 1, stride = C).
// Sums are taken in double (channel_sum), two passes (mean, then squared
// deviations), so a channel's statistics do not depend on its offset or the
// thread.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "dlgraph/kernels/config.hpp"

namespace dlgraph::kernels {

struct channel {
    std::int64_t n = 0, hw = 0, stride = 0;
    constexpr std::int64_t count() const noexcept { return n * hw; }
};

// f(element index within the tensor) for every element of the channel.
template <class F> inline void for_each_in_channel(const channel& ch, F f) noexcept {
    for (std::int64_t b = 0; b < ch.n; ++b)
        for (std::int64_t i = 0, o = b * ch.stride; i < ch.hw; ++i) f(o + i);
}

// The sum over the channel of f(element index), in double: element i of a
// block goes to partial sum i % 8, and the partials are added pairwise at
// the end. A fixed order (the same bits on every machine and thread
// count), and eight independent chains that the compiler keeps in vector
// registers; one chain waited on each add's latency (BN took 11% of the
// CNN's training step).
template <class F> inline double channel_sum(const channel& ch, F f) noexcept {
    double acc[8] = {};
    for (std::int64_t b = 0; b < ch.n; ++b) {
        const std::int64_t o = b * ch.stride;
        std::int64_t i = 0;
        for (; i + 8 <= ch.hw; i += 8)
            for (int j = 0; j < 8; ++j) acc[j] += f(o + i + j);
        for (; i < ch.hw; ++i) acc[i % 8] += f(o + i);
    }
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// The channel's mean and biased variance (sum of squared deviations / count).
template <class T> inline void channel_moments(const T* x, const channel& ch, double& mean, double& var) noexcept {
    const double s = channel_sum(ch, [x](std::int64_t k) { return static_cast<double>(x[k]); });
    const double m = ch.count() > 0 ? s / static_cast<double>(ch.count()) : 0.0;
    const double q = channel_sum(ch, [x, m](std::int64_t k) {
        const double d = static_cast<double>(x[k]) - m;
        return d * d;
    });
    mean = m;
    var = ch.count() > 0 ? q / static_cast<double>(ch.count()) : 0.0;
}

// y = (x - mean) * (inv_std * scale) + bias over the channel.
template <class T>
inline void normalize_channel(const T* x, T* y, const channel& ch, T mean, T inv_std, T scale, T bias) noexcept {
    const T a = inv_std * scale;
    for_each_in_channel(ch, [&](std::int64_t k) { y[k] = (x[k] - mean) * a + bias; });
}

// The sums the gradient needs: sum(dy) and sum(dy * (x - mean)).
template <class T>
inline void channel_grad_sums(const T* x, const T* dy, const channel& ch, T mean, double& sum_dy,
                              double& sum_dy_xmu) noexcept {
    const double m = static_cast<double>(mean);
    sum_dy = channel_sum(ch, [dy](std::int64_t k) { return static_cast<double>(dy[k]); });
    sum_dy_xmu = channel_sum(ch, [x, dy, m](std::int64_t k) {
        return static_cast<double>(dy[k]) * (static_cast<double>(x[k]) - m);
    });
}

// dx with batch statistics: scale * inv_std * (dy - sum_dy / M
// - (x - mean) * inv_std^2 * sum_dy_xmu / M), M the channel's count.
template <class T>
inline void batch_norm_dx(const T* x, const T* dy, T* dx, const channel& ch, T mean, T inv_std, T scale,
                          double sum_dy, double sum_dy_xmu) noexcept {
    const double m = static_cast<double>(ch.count());
    const T a = scale * inv_std, mean_dy = static_cast<T>(sum_dy / m);
    const T c = static_cast<T>(static_cast<double>(inv_std) * static_cast<double>(inv_std) * sum_dy_xmu / m);
    for_each_in_channel(ch, [&](std::int64_t k) { dx[k] = a * (dy[k] - mean_dy - (x[k] - mean) * c); });
}

// ---- layer normalization: rows of n contiguous elements ----------------------
//
// Each row by itself (Paddle's layer_norm: X seen as [left, n], n the product
// of the dims from begin_norm_axis on), its moments by channel_moments, so a
// row's results depend on nothing but the row.

// y = (x - mean) / sqrt(var + eps) * scale + bias over one row (scale, bias:
// n values each, or null); mean and var: the row's mean and biased variance.
template <class T>
inline void layer_norm_row(const T* x, T* y, std::int64_t n, const T* scale, const T* bias, double eps, T& mean,
                           T& var) noexcept {
    double m = 0, v = 0;
    channel_moments(x, channel{1, n, n}, m, v);
    const T mt = static_cast<T>(m), rstd = static_cast<T>(1.0 / std::sqrt(v + eps));
    for (std::int64_t i = 0; i < n; ++i) {
        const T h = (x[i] - mt) * rstd;
        y[i] = (scale ? h * scale[i] : h) + (bias ? bias[i] : T(0));
    }
    mean = mt;
    var = static_cast<T>(v);
}

// dx of one row: rstd * (g - mean(g) - (x - mean) * rstd^2 * mean(g * (x -
// mean))) with g = dy * scale (dy without Scale), rstd = 1 / sqrt(var + eps).
template <class T>
inline void layer_norm_dx_row(const T* x, const T* dy, const T* scale, T mean, T var, double eps, T* dx,
                              std::int64_t n) noexcept {
    if (n == 0) return;
    const channel ch{1, n, n};
    const double m = static_cast<double>(mean);
    auto g = [&](std::int64_t k) { return static_cast<double>(dy[k]) * (scale ? static_cast<double>(scale[k]) : 1.0); };
    const double sum_g = channel_sum(ch, g);
    const double sum_gx = channel_sum(ch, [&](std::int64_t k) { return g(k) * (static_cast<double>(x[k]) - m); });
    const double rstd = 1.0 / std::sqrt(static_cast<double>(var) + eps), nd = static_cast<double>(n);
    const T r = static_cast<T>(rstd), mean_g = static_cast<T>(sum_g / nd);
    const T c = static_cast<T>(rstd * rstd * sum_gx / nd);
    for (std::int64_t i = 0; i < n; ++i) {
        const T gi = scale ? dy[i] * scale[i] : dy[i];
        dx[i] = r * (gi - mean_g - (x[i] - mean) * c);
    }
}

// Scale@GRAD and Bias@GRAD (either may be null): over the rows in order,
// dscale[i] += dy * (x - mean) * rstd and dbias[i] += dy, summed in double
// (a sum over many rows in T loses the digits Paddle's tests ask for), a
// block of columns at a time so that each row's part is read contiguously.
template <class T>
inline void layer_norm_param_grads(const T* x, const T* dy, const T* mean, const T* var, double eps, T* dscale,
                                   T* dbias, std::int64_t rows, std::int64_t n) noexcept {
    constexpr std::int64_t block = 64;
    double ds[block], db[block];
    for (std::int64_t i0 = 0; i0 < n; i0 += block) {
        const std::int64_t m = std::min(block, n - i0);
        for (std::int64_t j = 0; j < m; ++j) ds[j] = db[j] = 0.0;
        for (std::int64_t r = 0; r < rows; ++r) {
            const T* xr = x + r * n + i0;
            const T* dr = dy + r * n + i0;
            const double mr = static_cast<double>(mean[r]), rstd = 1.0 / std::sqrt(static_cast<double>(var[r]) + eps);
            if (dscale)
                for (std::int64_t j = 0; j < m; ++j)
                    ds[j] += static_cast<double>(dr[j]) * ((static_cast<double>(xr[j]) - mr) * rstd);
            if (dbias)
                for (std::int64_t j = 0; j < m; ++j) db[j] += static_cast<double>(dr[j]);
        }
        for (std::int64_t j = 0; j < m; ++j) {
            if (dscale) dscale[i0 + j] = static_cast<T>(ds[j]);
            if (dbias) dbias[i0 + j] = static_cast<T>(db[j]);
        }
    }
}

}  // namespace dlgraph::kernels
