// Comparisons, logical ops and selection over raw arrays, the kernel core of
// ops/logic.hpp: BOOL results of comparing two operands (broadcast by the
// caller's runs, as the binary element-wise ops; equal and not_equal with
// Paddle's 1e-8 tolerance for floats), logical and / or / xor /
// not of any element type read as "nonzero", and where's select and its
// gradient.
#pragma once

#include <cstdint>
#include <type_traits>

#include "dlgraph/kernels/config.hpp"

namespace dlgraph::kernels {

struct less_than_fn {
    template <class T> DLGRAPH_HD bool operator()(T a, T b) const { return a < b; }
};
struct less_equal_fn {
    template <class T> DLGRAPH_HD bool operator()(T a, T b) const { return a <= b; }
};
struct greater_than_fn {
    template <class T> DLGRAPH_HD bool operator()(T a, T b) const { return a > b; }
};
struct greater_equal_fn {
    template <class T> DLGRAPH_HD bool operator()(T a, T b) const { return a >= b; }
};
// Paddle's equality: floats closer than 1e-8 (their difference in T,
// compared in double) are equal, infinities only to themselves, NaN to
// nothing; other types exactly.
template <class T> DLGRAPH_HD bool paddle_equal(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
        if (a == b) return true;  // an infinity is equal to itself alone
        const double d = static_cast<double>(a - b);  // NaN for a NaN, an infinity for one infinity
        return d < 1e-8 && d > -1e-8;
    } else {
        return a == b;
    }
}
struct equal_fn {
    template <class T> DLGRAPH_HD bool operator()(T a, T b) const { return paddle_equal(a, b); }
};
struct not_equal_fn {
    template <class T> DLGRAPH_HD bool operator()(T a, T b) const { return !paddle_equal(a, b); }
};
// Logical ops read any value as a truth: nonzero (NaN included) is true.
struct logical_and_fn {
    template <class T> DLGRAPH_HD bool operator()(T a, T b) const { return a != T(0) && b != T(0); }
};
struct logical_or_fn {
    template <class T> DLGRAPH_HD bool operator()(T a, T b) const { return a != T(0) || b != T(0); }
};
struct logical_xor_fn {
    template <class T> DLGRAPH_HD bool operator()(T a, T b) const { return (a != T(0)) != (b != T(0)); }
};

// z[i] = f(x[i * sx], y[i * sy]) for i < n (strides 0 or 1): one run of a
// comparison or logical op.
template <class T, class F>
inline void compare_run(std::int64_t n, const T* x, int sx, const T* y, int sy, bool* z, F f) noexcept {
    for (std::int64_t i = 0; i < n; ++i) z[i] = f(x[i * sx], y[i * sy]);
}

// z[i] = !x[i] (read as a truth) for i < n.
template <class T, class N> inline void logical_not(const T* x, N n_, bool* z) noexcept {
    const std::int64_t n = extent(n_);
    for (std::int64_t i = 0; i < n; ++i) z[i] = x[i] == T(0);
}

// out[i] = cond[i] ? x[i] : y[i] for i < n.
template <class T, class N> inline void where(const bool* cond, const T* x, const T* y, N n_, T* out) noexcept {
    const std::int64_t n = extent(n_);
    for (std::int64_t i = 0; i < n; ++i) out[i] = cond[i] ? x[i] : y[i];
}

// where's gradient: dx[i] = cond[i] ? dout[i] : 0, dy[i] = cond[i] ? 0 :
// dout[i] for i < n; a null dx or dy is not wanted.
template <class T, class N> inline void where_grad(const bool* cond, const T* dout, N n_, T* dx, T* dy) noexcept {
    const std::int64_t n = extent(n_);
    for (std::int64_t i = 0; i < n; ++i) {
        if (dx) dx[i] = cond[i] ? dout[i] : T(0);
        if (dy) dy[i] = cond[i] ? T(0) : dout[i];
    }
}

}  // namespace dlgraph::kernels
