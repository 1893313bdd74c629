// Folds: the loops behind the reductions (and softmax's row max), part of
// the kernel core. They take any functor usable on scalars and vectors
// (add_fn, max_fn, ...), so a new reduction needs no loop of its own, and
// their order of operations depends on the shape alone, never on the
// address of the data.
#pragma once

#include <algorithm>
#include <cstdint>

#include "dlgraph/kernels/config.hpp"
#include "dlgraph/kernels/vec.hpp"

namespace dlgraph::kernels {

// ---- folds ---------------------------------------------------------------------------------
//
// The loops behind the reductions (and softmax's row max). They are written
// for any functor usable on scalars and batches (add_fn, max_fn, ...), so a
// new reduction needs no loop of its own.
//
// They stream memory. A 64-byte load that straddles two cache lines (any
// 64-byte load from a buffer that is not 64-byte aligned, e.g. a fed
// xt::xarray, whose storage is 16-byte aligned) costs a memory-bound fold
// a large part of its bandwidth, while 32-byte loads run at full speed at
// any alignment; on 64-byte aligned data, 64-byte loads are a little faster
// (bench/README.md, Reductions, has the figures). So
// where AVX-512 is enabled the folds work in 32-byte batches (fold_batch_t)
// and switch to 64-byte ones on 64-byte aligned data, arranged so that every
// lane sees the same operations in the same order: no alignment peel, and
// no result (not one bit) depends on where the data sits.
#if DLGRAPH_SIMD && XSIMD_WITH_AVX512F && XSIMD_WITH_AVX2
template <class T> using fold_batch_t = xsimd::batch<T, xsimd::avx2>;
#elif DLGRAPH_SIMD
template <class T> using fold_batch_t = batch<T>;
#else
template <class T>
using fold_batch_t = vec<T, (DLGRAPH_VECTOR_BYTES < 32 ? DLGRAPH_VECTOR_BYTES : 32) / static_cast<int>(sizeof(T))>;
#endif

// Horizontal fold of a batch by a functor usable on scalars, as a tree
// (xsimd 8.1 has hadd but no reduce_max).
template <class B, class F> inline typename B::value_type fold_batch(const B& v, F f) noexcept {
    using T = typename B::value_type;
    constexpr std::size_t W = B::size;
    alignas(64) T tmp[W];
    v.store_aligned(tmp);
    for (std::size_t w = W / 2; w > 0; w /= 2)
        for (std::size_t k = 0; k < w; ++k) tmp[k] = f(tmp[k], tmp[k + w]);
    return tmp[0];
}

// Batches in flight in a contiguous fold (one accumulator is bound by the
// add latency, not by memory), and the steps of that many batches that make
// one leaf of the pairwise fold.
inline constexpr std::int64_t fold_accumulators = 8;
inline constexpr std::int64_t fold_leaf_steps = 64;

// Folds `steps` >= 1 runs of 8 batches B from x into 8 accumulators a0..a7
// (each starts with its first batch) and returns
// f(f(f(a0, a2), f(a4, a6)), f(f(a1, a3), f(a5, a7))).
template <class B, class F> inline B fold_steps(const typename B::value_type* x, std::int64_t steps, F f) {
    constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
    static_assert(fold_accumulators == 8);
    B a0 = B::load_unaligned(x), a1 = B::load_unaligned(x + W), a2 = B::load_unaligned(x + 2 * W),
      a3 = B::load_unaligned(x + 3 * W), a4 = B::load_unaligned(x + 4 * W), a5 = B::load_unaligned(x + 5 * W),
      a6 = B::load_unaligned(x + 6 * W), a7 = B::load_unaligned(x + 7 * W);
    // Not unrolled: GCC would then regroup the adds by accumulator, walking
    // the leaf out of order with two dependency chains at a time (a third of
    // the bandwidth lost for sums).
#if defined(__GNUC__)
#pragma GCC unroll 1
#endif
    for (std::int64_t s = 1; s < steps; ++s) {
        x += 8 * W;
        a0 = f(a0, B::load_unaligned(x));
        a1 = f(a1, B::load_unaligned(x + W));
        a2 = f(a2, B::load_unaligned(x + 2 * W));
        a3 = f(a3, B::load_unaligned(x + 3 * W));
        a4 = f(a4, B::load_unaligned(x + 4 * W));
        a5 = f(a5, B::load_unaligned(x + 5 * W));
        a6 = f(a6, B::load_unaligned(x + 6 * W));
        a7 = f(a7, B::load_unaligned(x + 7 * W));
    }
    return f(f(f(a0, a2), f(a4, a6)), f(f(a1, a3), f(a5, a7)));
}

// fold_steps<B> on 64-byte aligned x with batches Z twice as wide: z_m
// holds a_2m in its low half and a_2m+1 in its high half, so each lane gets
// the same operations in the same order, and so does the final tree
// (f(z0, z1) is [f(a0, a2) | f(a1, a3)], ...): the result is the same bits.
template <class B, class F> inline B fold_steps_wide(const typename B::value_type* x, std::int64_t steps, F f) {
    using T = typename B::value_type;
    using Z = batch<T>;
    constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
    static_assert(Z::size == 2 * B::size);
    Z z0 = Z::load_aligned(x), z1 = Z::load_aligned(x + 2 * W), z2 = Z::load_aligned(x + 4 * W),
      z3 = Z::load_aligned(x + 6 * W);
#if defined(__GNUC__)
#pragma GCC unroll 1
#endif
    for (std::int64_t s = 1; s < steps; ++s) {
        x += 8 * W;
        z0 = f(z0, Z::load_aligned(x));
        z1 = f(z1, Z::load_aligned(x + 2 * W));
        z2 = f(z2, Z::load_aligned(x + 4 * W));
        z3 = f(z3, Z::load_aligned(x + 6 * W));
    }
    alignas(64) T t[Z::size];
    f(f(z0, z1), f(z2, z3)).store_aligned(t);
    return f(B::load_aligned(t), B::load_aligned(t + W));
}

// Folds x[0..n) with f starting from init, vectorised for FP32/FP64.
//
// Pairwise and blocked: leaves of 64 x 8 batches (16 KiB: 4096 floats or
// 2048 doubles) are folded with 8 accumulators, and the leaves' results are
// combined pairwise (a binary counter: after each leaf, partial results of
// equal size are merged). For a sum, an element then goes through at most
// 64 + 3 + log2(n / leaf) + log2(width) additions, not n / (8 x width) as
// with 8 running accumulators (16M FP32 values: 82 instead of 262,144).
// Shorter leaves cost bandwidth (the tree at the end of each leaf). The
// order depends only on n, never
// on the address of x.
template <class T, class F> inline T fold_row(const T* x, std::int64_t n, T init, F f) {
    std::int64_t i = 0;
    T r = init;
    if constexpr (simd_type<T>) {
        using B = fold_batch_t<T>;
        constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
        constexpr std::int64_t step = fold_accumulators * W, leaf = fold_leaf_steps * step;
        // Leaves (and the steps after them) start at multiples of 256 bytes
        // from x: all 64-byte aligned when x is.
        bool wide = false;
        if constexpr (batch<T>::size == 2 * B::size) wide = reinterpret_cast<std::uintptr_t>(x) % 64 == 0;
        auto steps_from = [&](const T* p, std::int64_t steps) {
            if constexpr (batch<T>::size == 2 * B::size) {
                if (wide) return fold_steps_wide<B>(p, steps, f);
            }
            return fold_steps<B>(p, steps, f);
        };
        if (n >= W) {
            B partial[64];  // folds of 2^j leaves, j decreasing from the bottom
            int top = 0;
            std::uint64_t leaves = 0;
            for (; i + leaf <= n; i += leaf) {
                B v = steps_from(x + i, fold_leaf_steps);
                for (std::uint64_t m = ++leaves; (m & 1) == 0; m >>= 1) v = f(partial[--top], v);
                partial[top++] = v;
            }
            // Less than a leaf is left: whole steps, then single batches.
            B v;
            bool any = false;
            if (i + step <= n) {
                const std::int64_t steps = (n - i) / step;
                v = steps_from(x + i, steps);
                i += steps * step;
                any = true;
            }
            for (; i + W <= n; i += W) {
                const B b = B::load_unaligned(x + i);
                v = any ? f(v, b) : b;
                any = true;
            }
            while (top > 0) {
                --top;
                v = any ? f(partial[top], v) : partial[top];
                any = true;
            }
            r = f(r, fold_batch(v, f));
        }
    }
    for (; i < n; ++i) r = f(r, x[i]);
    return r;
}

// y[j] = f(y[j], group(x[k * len + j] for k < g)) for j from `j` on, with
// batches B while whole batches fit before `end`; returns where it stopped.
template <class B, class T, class F, class G>
inline std::int64_t fold_columns(const T* p, std::int64_t len, T* y, std::int64_t j, std::int64_t end, F f, G group) {
    constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
    for (; j + W <= end; j += W) {
        const B v = group([&](std::int64_t k) { return B::load_unaligned(p + k * len + j); });
        f(B::load_unaligned(y + j), v).store_unaligned(y + j);
    }
    return j;
}

// y[j] = f(y[j], group(x[k * len + j] for k < g)) for every j < len, with
// `group` folding the g values of a column (g rows starting at p). Each y[j]
// is computed the same way whatever the batch width, so the width may follow
// the alignment: where AVX-512 is enabled and the g rows share one
// alignment, columns are peeled until they are 64-byte aligned and the body
// uses 64-byte batches (with 8 input streams, the longer batches keep more
// loads in flight); otherwise 32-byte batches.
template <class T, class F, class G> inline void fold_group(const T* p, std::int64_t len, T* y, F f, G group) {
    std::int64_t j = 0;
    auto scalar = [&](std::int64_t end) {
        for (; j < end; ++j) y[j] = f(y[j], group([&](std::int64_t k) { return p[k * len + j]; }));
    };
    if constexpr (simd_type<T>) {
        using Wide = batch<T>;
        if constexpr (Wide::size > fold_batch_t<T>::size) {
            const std::size_t mis = reinterpret_cast<std::uintptr_t>(p) % 64;
            if (static_cast<std::size_t>(len) * sizeof(T) % 64 == 0 && mis % sizeof(T) == 0) {
                scalar(std::min<std::int64_t>(len, static_cast<std::int64_t>((64 - mis) % 64 / sizeof(T))));
                j = fold_columns<Wide>(p, len, y, j, len, f, group);
            }
        }
        j = fold_columns<fold_batch_t<T>>(p, len, y, j, len, f, group);
    }
    scalar(len);
}

// y[j] = f(y[j], x[k * len + j]) for every k < rows and j < len: the fold
// of a row-major [rows, len] block over its rows, vectorised along j. Eight
// rows at a time are folded as a tree in registers before y is read and
// written, so y (which may not fit in cache) is touched once per 8 rows and
// 8 input streams are in flight. For a sum, each y[j] is a running sum of
// rows / 8 tree sums.
template <class T, class F> inline void fold_rows_into(const T* x, std::int64_t rows, std::int64_t len, T* y, F f) {
    std::int64_t r = 0;
    for (; r + 8 <= rows; r += 8)
        fold_group(x + r * len, len, y, f, [f](auto at) {
            return f(f(f(at(0), at(1)), f(at(2), at(3))), f(f(at(4), at(5)), f(at(6), at(7))));
        });
    if (r < rows) {
        const std::int64_t g = rows - r;
        fold_group(x + r * len, len, y, f, [f, g](auto at) {
            auto v = at(0);
            for (std::int64_t k = 1; k < g; ++k) v = f(v, at(k));
            return v;
        });
    }
}

}  // namespace dlgraph::kernels
