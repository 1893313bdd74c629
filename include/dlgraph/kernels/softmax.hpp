// Softmax and the classification losses over raw rows, the kernel core of
// ops/softmax.hpp: softmax along a row or a [d, inner] block, its gradient,
// cross entropy on probabilities and on logits (log-sum-exp), their gradients.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "dlgraph/kernels/config.hpp"
#include "dlgraph/kernels/elementwise.hpp"
#include "dlgraph/kernels/fold.hpp"
#include "dlgraph/kernels/vec.hpp"

namespace dlgraph::kernels {

// ---- the sweeps a row kernel makes -----------------------------------------------------------
//
// Some row kernels end with an element-wise sweep over the whole row
// (scaling by 1 / sum, dx = y * (dy - dot), p * dLoss). They run it through
// a Loops object: serial_loops here, or a device's own (the CPU splits a long
// row over its thread pool), which must compute every element exactly as
// these do. `nothrow` is the noexcept of the kernels that take it: the
// CPU's loops can throw when its thread pool cannot start.
struct serial_loops {
    static constexpr bool nothrow = true;
    template <class T, class F> void unary(std::int64_t n, const T* x, T* z, F f) const noexcept {
        unary_loop_serial(n, x, z, f);
    }
    template <class T, class F>
    void binary(std::int64_t n, const T* x, int sx, const T* y, int sy, T* z, F f) const noexcept {
        binary_loop_serial(n, x, sx, y, sy, z, f);
    }
};

// y * (dy - dot): softmax's gradient once dot = sum(y * dy) is known.
template <class T> struct softmax_grad_fn {
    T dot;
    template <class V> DLGRAPH_HD V operator()(V y, V dy) const { return y * (dy - V(dot)); }
};

// ---- softmax ---------------------------------------------------------------------------------

// y = softmax(x) over a contiguous row of n > 0; returns log(sum(exp(x))).
// Reads x[i] before writing y[i] at every i, so y may alias x.
template <class T, class N, class L = serial_loops>
inline T softmax_row(const T* x, T* y, N n_, const L& loops = {}) noexcept(L::nothrow) {
    const std::int64_t n = extent(n_);
    const T m = fold_row(x, n, -std::numeric_limits<T>::infinity(), max_fn{});
    // All -inf (or +inf) rows: exp(x - m) would be NaN; keep IEEE results
    // consistent with the scalar formula by shifting by 0 instead.
    const T shift = std::isfinite(m) ? m : T(0);
    T s = 0;
    std::int64_t i = 0;
    if constexpr (simd_type<T>) {
        using B = batch<T>;
        constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
        B acc(T(0));
        const B mb(shift);
        for (; i + W <= n; i += W) {
            const B e = vm::exp(B::load_unaligned(x + i) - mb);
            e.store_unaligned(y + i);
            acc += e;
        }
        s = vm::hadd(acc);
    }
    for (; i < n; ++i) {
        const T e = std::exp(x[i] - shift);
        y[i] = e;
        s += e;
    }
    const T inv = T(1) / s;
    loops.unary(n, y, y, scale_by_fn<T>{inv});
    return shift + std::log(s);
}

// ---- strided blocks ---------------------------------------------------------------------------
//
// Over the middle dim of a [d, inner] block (inner > 1) the kernels work on
// columns, vectorised across inner so every load is contiguous: the same
// code runs on a vector of columns (V = batch<T>) and on one column (V = T).

template <class V, class T> inline V load_as(const T* p) noexcept {
    if constexpr (is_batch<V>) return V::load_unaligned(p);
    else return *p;
}
template <class V, class T> inline void store_as(const V& v, T* p) noexcept {
    if constexpr (is_batch<V>) v.store_unaligned(p);
    else *p = v;
}

// column(V(0), j) for the columns j of [d, inner]: W at a time, then one at a time.
template <class T, class F> inline void for_columns(std::int64_t inner, F column) noexcept {
    std::int64_t j = 0;
    if constexpr (simd_type<T>) {
        using B = batch<T>;
        constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
        for (; j + W <= inner; j += W) column(B(T(0)), j);
    }
    for (; j < inner; ++j) column(T(0), j);
}

// The shift of a softmax column: its max, or 0 where the max is not finite
// (all -inf, or a +inf, or a NaN), as softmax_row does.
template <class V, class T> inline V column_shift(const T* x, std::int64_t d, std::int64_t inner) noexcept {
    V m = load_as<V>(x);
    for (std::int64_t k = 1; k < d; ++k) m = max_fn{}(m, load_as<V>(x + k * inner));
    return vm::select(vm::abs(m) < V(std::numeric_limits<T>::infinity()), m, V(T(0)));
}

// Softmax over the middle dim of a [d, inner] block (d > 0, inner > 1).
template <class T, class D, class I> inline void softmax_strided(const T* x, T* y, D d_, I inner_) noexcept {
    const std::int64_t d = extent(d_), inner = extent(inner_);
    for_columns<T>(inner, [&](auto zero, std::int64_t j) {
        using V = decltype(zero);
        const V m = column_shift<V>(x + j, d, inner);
        V s = zero;
        for (std::int64_t k = 0; k < d; ++k) {
            const V e = vm::exp(load_as<V>(x + k * inner + j) - m);
            store_as(e, y + k * inner + j);
            s = s + e;
        }
        const V inv = V(T(1)) / s;
        for (std::int64_t k = 0; k < d; ++k) store_as(load_as<V>(y + k * inner + j) * inv, y + k * inner + j);
    });
}

// Softmax along the middle dim of a row-major [outer, d, inner] array: rows
// (inner == 1) or blocks, one after the other. Empty arrays are left as they are.
template <class T, class O, class D, class I, class L = serial_loops>
inline void softmax(const T* x, T* y, O outer_, D d_, I inner_, const L& loops = {}) noexcept(L::nothrow) {
    const std::int64_t outer = extent(outer_), d = extent(d_), inner = extent(inner_);
    if (outer == 0 || d == 0 || inner == 0) return;
    for (std::int64_t o = 0; o < outer; ++o) {
        if (inner == 1) softmax_row(x + o * d, y + o * d, d, loops);
        else softmax_strided(x + o * d * inner, y + o * d * inner, d, inner);
    }
}

// dX = Out * (dOut - sum(dOut * Out)) along the axis, for a contiguous row.
template <class T, class N, class L = serial_loops>
inline void softmax_grad_row(const T* y, const T* dy, T* dx, N n_, const L& loops = {}) noexcept(L::nothrow) {
    const std::int64_t n = extent(n_);
    T dot = 0;
    std::int64_t i = 0;
    if constexpr (simd_type<T>) {
        using B = batch<T>;
        constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
        B acc(T(0));
        for (; i + W <= n; i += W) acc = vm::fma(B::load_unaligned(y + i), B::load_unaligned(dy + i), acc);
        dot = vm::hadd(acc);
    }
    for (; i < n; ++i) dot += y[i] * dy[i];
    loops.binary(n, y, 1, dy, 1, dx, softmax_grad_fn<T>{dot});
}

// The same over the middle dim of a [d, inner] block.
template <class T, class D, class I>
inline void softmax_grad_strided(const T* y, const T* dy, T* dx, D d_, I inner_) noexcept {
    const std::int64_t d = extent(d_), inner = extent(inner_);
    for_columns<T>(inner, [&](auto zero, std::int64_t j) {
        using V = decltype(zero);
        V dot = zero;
        for (std::int64_t k = 0; k < d; ++k) dot = dot + load_as<V>(y + k * inner + j) * load_as<V>(dy + k * inner + j);
        for (std::int64_t k = 0; k < d; ++k) {
            const std::int64_t at = k * inner + j;
            store_as(load_as<V>(y + at) * (load_as<V>(dy + at) - dot), dx + at);
        }
    });
}

// softmax's gradient over a row-major [outer, d, inner] array (y = Out,
// dy = Out@GRAD, dx = X@GRAD).
template <class T, class O, class D, class I, class L = serial_loops>
inline void softmax_grad(const T* y, const T* dy, T* dx, O outer_, D d_, I inner_,
                         const L& loops = {}) noexcept(L::nothrow) {
    const std::int64_t outer = extent(outer_), d = extent(d_), inner = extent(inner_);
    if (outer == 0 || d == 0 || inner == 0) return;
    for (std::int64_t o = 0; o < outer; ++o) {
        const std::int64_t off = o * d * inner;
        if (inner == 1) softmax_grad_row(y + off, dy + off, dx + off, d, loops);
        else softmax_grad_strided(y + off, dy + off, dx + off, d, inner);
    }
}

// ---- log_softmax ------------------------------------------------------------------------------

// (x - shift) - log_sum: log_softmax once the row's shift (its max) and
// log(sum(exp(x - shift))) are known. Subtracting them one at a time keeps
// the digits of a small result next to a large max.
template <class T> struct log_softmax_fn {
    T shift, log_sum;
    template <class V> DLGRAPH_HD V operator()(V x) const { return (x - V(shift)) - V(log_sum); }
};
// dy - exp(y) * s: log_softmax's gradient once s = sum(dy) is known.
template <class T> struct log_softmax_grad_fn {
    T s;
    template <class V> DLGRAPH_HD V operator()(V y, V dy) const { return dy - vm::exp(y) * V(s); }
};

// log_softmax_fn of a contiguous row of n > 0: shifted by its max (by 0
// when the max is not finite, as softmax_row).
template <class T> inline log_softmax_fn<T> log_softmax_of_row(const T* x, std::int64_t n) noexcept {
    const T m = fold_row(x, n, -std::numeric_limits<T>::infinity(), max_fn{});
    const T shift = std::isfinite(m) ? m : T(0);
    T s = 0;
    std::int64_t i = 0;
    if constexpr (simd_type<T>) {
        using B = batch<T>;
        constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
        B acc(T(0));
        const B mb(shift);
        for (; i + W <= n; i += W) acc += vm::exp(B::load_unaligned(x + i) - mb);
        s = vm::hadd(acc);
    }
    for (; i < n; ++i) s += std::exp(x[i] - shift);
    return {shift, std::log(s)};
}

// Out = X - log(sum(exp(X))) along the middle dim of a row-major
// [outer, d, inner] array; rows (inner == 1) vectorised along the row,
// blocks across inner. y may alias x. Empty arrays are left as they are.
template <class T, class O, class D, class I, class L = serial_loops>
inline void log_softmax(const T* x, T* y, O outer_, D d_, I inner_, const L& loops = {}) noexcept(L::nothrow) {
    const std::int64_t outer = extent(outer_), d = extent(d_), inner = extent(inner_);
    if (outer == 0 || d == 0 || inner == 0) return;
    for (std::int64_t o = 0; o < outer; ++o) {
        const T* xo = x + o * d * inner;
        T* yo = y + o * d * inner;
        if (inner == 1) {
            loops.unary(d, xo, yo, log_softmax_of_row(xo, d));
            continue;
        }
        for_columns<T>(inner, [&](auto zero, std::int64_t j) {
            using V = decltype(zero);
            const V m = column_shift<V>(xo + j, d, inner);
            V s = zero;
            for (std::int64_t k = 0; k < d; ++k) s = s + vm::exp(load_as<V>(xo + k * inner + j) - m);
            const V l = vm::log(s);
            for (std::int64_t k = 0; k < d; ++k) store_as((load_as<V>(xo + k * inner + j) - m) - l, yo + k * inner + j);
        });
    }
}

// log_softmax's gradient over a row-major [outer, d, inner] array:
// X@GRAD = Out@GRAD - exp(Out) * sum(Out@GRAD) along the axis (y = Out).
template <class T, class O, class D, class I, class L = serial_loops>
inline void log_softmax_grad(const T* y, const T* dy, T* dx, O outer_, D d_, I inner_,
                             const L& loops = {}) noexcept(L::nothrow) {
    const std::int64_t outer = extent(outer_), d = extent(d_), inner = extent(inner_);
    if (outer == 0 || d == 0 || inner == 0) return;
    for (std::int64_t o = 0; o < outer; ++o) {
        const std::int64_t off = o * d * inner;
        if (inner == 1) {
            loops.binary(d, y + off, 1, dy + off, 1, dx + off,
                         log_softmax_grad_fn<T>{fold_row(dy + off, d, T(0), add_fn{})});
            continue;
        }
        for_columns<T>(inner, [&](auto zero, std::int64_t j) {
            using V = decltype(zero);
            V s = zero;
            for (std::int64_t k = 0; k < d; ++k) s = s + load_as<V>(dy + off + k * inner + j);
            for (std::int64_t k = 0; k < d; ++k) {
                const std::int64_t at = off + k * inner + j;
                store_as(load_as<V>(dy + at) - vm::exp(load_as<V>(y + at)) * s, dx + at);
            }
        });
    }
}

// ---- losses -----------------------------------------------------------------------------------
//
// Over `rows` rows of d classes: X (or Logits, Softmax) is [rows, d]; a hard
// label is one class index per row, a soft one a [rows, d] distribution; the
// loss is one value per row. A hard-label kernel stops at the first label
// outside [0, d) and returns it as fault{label_out_of_range, label, row, d};
// the rows before it are written, the others are not. A row whose hard
// label equals `ignore_index` (Paddle's attribute, -100 unless set; it may
// also be a class in range, a padding token's) is no error: its loss and
// its gradient are 0.
inline constexpr std::int64_t default_ignore_index = -100;

template <class I> constexpr fault bad_label(I label, std::int64_t row, std::int64_t d) noexcept {
    return fault{fault_code::label_out_of_range, static_cast<std::int64_t>(label), row, d};
}

// y[r] = -log(x[r, label[r]]).
template <class T, class I, class R, class D>
inline fault cross_entropy_hard(const T* x, const I* label, T* y, R rows_, D d_,
                                std::int64_t ignore_index = default_ignore_index) noexcept {
    static_assert(std::is_integral_v<I>, "hard labels are class indices");
    const std::int64_t rows = extent(rows_), d = extent(d_);
    for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t l = static_cast<std::int64_t>(label[r]);
        if (l == ignore_index) {
            y[r] = 0;
            continue;
        }
        if (l < 0 || l >= d) return bad_label(label[r], r, d);
        y[r] = -std::log(x[r * d + l]);
    }
    return {};
}

// y[r] = -sum_k(label[r, k] * log(x[r, k])).
template <class T, class R, class D>
inline void cross_entropy_soft(const T* x, const T* label, T* y, R rows_, D d_) noexcept {
    const std::int64_t rows = extent(rows_), d = extent(d_);
    for (std::int64_t r = 0; r < rows; ++r) {
        T acc = 0;
        for (std::int64_t k = 0; k < d; ++k) acc += label[r * d + k] * std::log(x[r * d + k]);
        y[r] = -acc;
    }
}

// dx = -dy / x at the label, 0 elsewhere.
template <class T, class I, class R, class D>
inline fault cross_entropy_grad_hard(const T* x, const I* label, const T* dy, T* dx, R rows_, D d_,
                                     std::int64_t ignore_index = default_ignore_index) noexcept {
    static_assert(std::is_integral_v<I>, "hard labels are class indices");
    const std::int64_t rows = extent(rows_), d = extent(d_);
    for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t l = static_cast<std::int64_t>(label[r]);
        const bool ignored = l == ignore_index;
        if (!ignored && (l < 0 || l >= d)) return bad_label(label[r], r, d);
        std::fill(dx + r * d, dx + (r + 1) * d, T(0));
        if (!ignored) dx[r * d + l] = -dy[r] / x[r * d + l];
    }
    return {};
}

// dx = -dy * label / x.
template <class T, class R, class D>
inline void cross_entropy_grad_soft(const T* x, const T* label, const T* dy, T* dx, R rows_, D d_) noexcept {
    const std::int64_t rows = extent(rows_), d = extent(d_);
    for (std::int64_t r = 0; r < rows; ++r) {
        const T g = -dy[r];
        for (std::int64_t k = 0; k < d; ++k) dx[r * d + k] = g * label[r * d + k] / x[r * d + k];
    }
}

// softmax = softmax(logits) per row; loss[r] = lse - logits[r, label[r]],
// with lse = log(sum(exp(logits))) of the row (d > 0 for any row to pass).
// An ignored row has its softmax and a loss of 0.
template <class T, class I, class R, class D, class L = serial_loops>
inline fault softmax_with_cross_entropy_hard(const T* logits, const I* label, T* softmax, T* loss, R rows_, D d_,
                                             const L& loops = {},
                                             std::int64_t ignore_index = default_ignore_index) noexcept(L::nothrow) {
    static_assert(std::is_integral_v<I>, "hard labels are class indices");
    const std::int64_t rows = extent(rows_), d = extent(d_);
    for (std::int64_t r = 0; r < rows; ++r) {
        const T* xr = logits + r * d;
        const std::int64_t l = static_cast<std::int64_t>(label[r]);
        const bool ignored = l == ignore_index;
        if (!ignored && (l < 0 || l >= d)) return bad_label(label[r], r, d);
        const T lse = d > 0 ? softmax_row(xr, softmax + r * d, d, loops) : T(0);
        loss[r] = ignored ? T(0) : lse - xr[l];
    }
    return {};
}

// softmax = softmax(logits) per row; loss[r] = -sum_k(label * log softmax),
// computed as sum_k(label * (lse - logits)): no log of a rounded probability.
// Rows of no classes (d == 0) have loss 0.
template <class T, class R, class D, class L = serial_loops>
inline void softmax_with_cross_entropy_soft(const T* logits, const T* label, T* softmax, T* loss, R rows_, D d_,
                                            const L& loops = {}) noexcept(L::nothrow) {
    const std::int64_t rows = extent(rows_), d = extent(d_);
    for (std::int64_t r = 0; r < rows; ++r) {
        const T* xr = logits + r * d;
        if (d == 0) {
            loss[r] = 0;
            continue;
        }
        const T lse = softmax_row(xr, softmax + r * d, d, loops);
        const T* lr = label + r * d;
        T acc = 0;
        for (std::int64_t k = 0; k < d; ++k) acc += lr[k] * (lse - xr[k]);
        loss[r] = acc;
    }
}

// dx = (softmax - onehot(label)) * dloss, from the saved softmax.
template <class T, class I, class R, class D, class L = serial_loops>
inline fault softmax_with_cross_entropy_grad_hard(const I* label, const T* softmax, const T* dloss, T* dx, R rows_,
                                                  D d_, const L& loops = {},
                                                  std::int64_t ignore_index = default_ignore_index) noexcept(L::nothrow) {
    static_assert(std::is_integral_v<I>, "hard labels are class indices");
    const std::int64_t rows = extent(rows_), d = extent(d_);
    for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t l = static_cast<std::int64_t>(label[r]);
        if (l == ignore_index) {
            std::fill(dx + r * d, dx + (r + 1) * d, T(0));
            continue;
        }
        if (l < 0 || l >= d) return bad_label(label[r], r, d);
        const T g = dloss[r];
        loops.binary(d, softmax + r * d, 1, &g, 0, dx + r * d, mul_fn{});
        dx[r * d + l] -= g;
    }
    return {};
}

// dx = (softmax * sum(label) - label) * dloss, which is (softmax - label) *
// dloss for labels that sum to 1 per row.
template <class T, class R, class D>
inline void softmax_with_cross_entropy_grad_soft(const T* label, const T* softmax, const T* dloss, T* dx, R rows_,
                                                 D d_) noexcept {
    const std::int64_t rows = extent(rows_), d = extent(d_);
    for (std::int64_t r = 0; r < rows; ++r) {
        const T* lr = label + r * d;
        T lsum = 0;
        for (std::int64_t k = 0; k < d; ++k) lsum += lr[k];
        const T g = dloss[r];
        for (std::int64_t k = 0; k < d; ++k) dx[r * d + k] = (softmax[r * d + k] * lsum - lr[k]) * g;
    }
}

}  // namespace dlgraph::kernels
