// Small helpers shared by the op families (axis checks with op-labelled
// messages, products of dims that may be unknown, an odometer over a
// multi-index): kept apart so each family header stays about its math.
#pragma once

#include <string>

#include "dlgraph/op.hpp"
#include "dlgraph/ops/elementwise.hpp"

namespace dlgraph::ops {

// Normalises a possibly negative `axis` for a tensor of shape `s`; the
// message names the operand and its shape, not just the rank.
inline int infer_axis(const InferContext& c, std::int64_t axis, const Shape& s, const std::string& what,
                      const std::string& attr = "axis") {
    const std::int64_t r = s.rank();
    const std::int64_t a = axis < 0 ? axis + r : axis;
    if (a < 0 || a >= r)
        c.fail("dlgraph.shape.axis", attr + " " + std::to_string(axis) + " is out of range for " + what + " of shape " +
                                         to_string(s) + " (rank " + std::to_string(r) + ")");
    return static_cast<int>(a);
}

// Product of dims [from, to); -1 when one of them is unknown.
inline std::int64_t dim_product(const Shape& s, int from, int to) {
    std::int64_t n = 1;
    for (int i = from; i < to; ++i) {
        if (s[i] < 0) return -1;
        n *= s[i];
    }
    return n;
}

// Steps a row-major multi-index over `dims` (rank r); false once it wraps.
inline bool next_index(std::int64_t* idx, const std::int64_t* dims, int r) {
    for (int i = r - 1; i >= 0; --i) {
        if (++idx[i] < dims[i]) return true;
        idx[i] = 0;
    }
    return false;
}

// Unknown dims (-1) agree with anything; two known dims must be equal.
inline bool dims_agree(std::int64_t a, std::int64_t b) { return a < 0 || b < 0 || a == b; }
// The better-known of two agreeing dims.
inline std::int64_t merge_dim(std::int64_t a, std::int64_t b) { return a >= 0 ? a : b; }

// Horizontal fold of a batch by a functor usable on scalars (xsimd 8.1 has
// hadd but no reduce_max).
template <class T, class F> inline T fold_batch(const xsimd::batch<T>& v, F f) {
    alignas(64) T tmp[xsimd::batch<T>::size];
    v.store_aligned(tmp);
    T r = tmp[0];
    for (std::size_t i = 1; i < xsimd::batch<T>::size; ++i) r = f(r, tmp[i]);
    return r;
}

// Folds x[0..n) with f starting from init, vectorised for FP32/FP64.
template <class T, class F> inline T fold_row(const T* x, std::int64_t n, T init, F f) {
    std::int64_t i = 0;
    T r = init;
    if constexpr (simd_type<T>) {
        using B = xsimd::batch<T>;
        constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
        if (n >= W) {
            // Two accumulators hide the latency of the dependent adds.
            B a0(init), a1(init);
            for (; i + 2 * W <= n; i += 2 * W) {
                a0 = f(a0, B::load_unaligned(x + i));
                a1 = f(a1, B::load_unaligned(x + i + W));
            }
            for (; i + W <= n; i += W) a0 = f(a0, B::load_unaligned(x + i));
            r = fold_batch<T>(f(a0, a1), f);
        }
    }
    for (; i < n; ++i) r = f(r, x[i]);
    return r;
}

}  // namespace dlgraph::ops
