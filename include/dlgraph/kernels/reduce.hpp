// Reductions, the kernel core of ops/reduce.hpp: one strided fold of a
// tensor over any set of its dims (given a functor and its identity, so a new
// reduction needs no loop of its own) with its geometry, mean's scaling, and
// the gradient loops that send Out@GRAD back over the reduced dims.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "dlgraph/kernels/config.hpp"
#include "dlgraph/kernels/elementwise.hpp"
#include "dlgraph/kernels/fold.hpp"

namespace dlgraph::kernels {

// A reduction's operand: X's dims (rank extents of `dims`, row-major and
// contiguous) and which of them are folded (`red`). The rank is an extent,
// so a fixed model may give it in the type.

// The number of elements folded into each output element.
template <class R> inline std::int64_t reduced_count(const std::int64_t* dims, R rank, const bool* red) noexcept {
    std::int64_t n = 1;
    for (int i = 0; i < static_cast<int>(extent(rank)); ++i)
        if (red[i]) n *= dims[i];
    return n;
}

// The number of output elements (with or without keep_dim: the kept dims).
template <class R> inline std::int64_t kept_count(const std::int64_t* dims, R rank, const bool* red) noexcept {
    std::int64_t n = 1;
    for (int i = 0; i < static_cast<int>(extent(rank)); ++i)
        if (!red[i]) n *= dims[i];
    return n;
}

// How reduce_into walks a non-empty X. Dims of one kind that sit next to
// each other are merged (a unit dim is both kept and reduced, so it is
// dropped), which leaves one of two inner loops, driven by an odometer over
// the outer merged dims [0, outer):
//  * trailing dims reduced (`contiguous`): a contiguous fold of each row of
//    `len` elements (fold_row: pairwise, 8 batches in flight) into one
//    output element;
//  * trailing dims kept: the block [rows = the reduced dim before them,
//    len = the kept dims] is folded over its rows into `len` outputs
//    (fold_rows_into: 8 rows at a time).
// With no reduced dim left, each row is copied (folded once).
struct reduce_geometry {
    int n = 0;                             // merged dims
    std::int64_t md[max_rank] = {};        // their sizes
    std::int64_t ost[max_rank] = {};       // Out strides of the outer merged dims; 0 where reduced
    int outer = 0;                         // merged dims walked by the odometer
    std::int64_t rows = 1, len = 1;        // the inner loop's block
    bool contiguous = false;
};

template <class R> inline reduce_geometry reduce_geometry_of(const std::int64_t* dims, R rank, const bool* red) noexcept {
    reduce_geometry g;
    bool mr[max_rank];
    int n = 0;
    for (int i = 0; i < static_cast<int>(extent(rank)); ++i) {
        if (dims[i] == 1) continue;  // a unit dim is both kept and reduced
        if (n > 0 && mr[n - 1] == red[i]) g.md[n - 1] *= dims[i];
        else {
            g.md[n] = dims[i];
            mr[n] = red[i];
            ++n;
        }
    }
    if (n == 0) {
        g.md[0] = 1;
        mr[0] = false;
        n = 1;
    }
    g.n = n;
    // Out strides of the outer (merged) dims; reduced dims stride 0.
    std::int64_t st = mr[n - 1] ? 1 : g.md[n - 1];
    for (int i = n - 2; i >= 0; --i) {
        g.ost[i] = mr[i] ? 0 : st;
        if (!mr[i]) st *= g.md[i];
    }
    g.len = g.md[n - 1];
    // Kept trailing dims: the reduced dim before them (merged dims alternate)
    // belongs to the inner loop; with none, each row is copied (folded once).
    g.contiguous = mr[n - 1];
    g.outer = g.contiguous || n == 1 ? n - 1 : n - 2;
    g.rows = g.contiguous || n == 1 ? 1 : g.md[n - 2];
    return g;
}

// Folds x into y (the kept dims, row-major) along the dims flagged in `red`,
// with f (a functor on scalars and batches: add_fn, max_fn, ...) and its
// identity `init`; an output element nothing folds into gets `init`. The
// order of operations depends on the dims alone (see kernels/fold.hpp).
template <class T, class R, class F>
inline void reduce_into(const T* x, const std::int64_t* dims, R rank, const bool* red, T* y, T init, F f) noexcept {
    const int r = static_cast<int>(extent(rank));
    std::int64_t numel = 1;
    for (int i = 0; i < r; ++i) numel *= dims[i];
    std::fill(y, y + kept_count(dims, r, red), init);
    if (numel == 0) return;
    const reduce_geometry g = reduce_geometry_of(dims, r, red);
    std::int64_t idx[max_rank] = {};
    std::int64_t in_off = 0;
    for (;;) {
        std::int64_t o = 0;
        for (int i = 0; i < g.outer; ++i) o += idx[i] * g.ost[i];
        if (g.contiguous) y[o] = f(y[o], fold_row(x + in_off, g.len, init, f));
        else fold_rows_into(x + in_off, g.rows, g.len, y + o, f);
        in_off += g.rows * g.len;
        int i = g.outer - 1;  // the odometer over the outer dims, row-major
        for (; i >= 0; --i) {
            if (++idx[i] < g.md[i]) break;
            idx[i] = 0;
        }
        if (i < 0) return;
    }
}

// The max of nothing is the identity: -inf (or the lowest integer).
template <class T> constexpr T max_identity() noexcept {
    return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
}

// The min of nothing: +inf (or the largest integer).
template <class T> constexpr T min_identity() noexcept {
    return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
}

// reduce_all / reduce_any's folds of BOOL.
struct and_fn {
    DLGRAPH_HD bool operator()(bool a, bool b) const { return a && b; }
};
struct or_fn {
    DLGRAPH_HD bool operator()(bool a, bool b) const { return a || b; }
};

// The factor that turns a sum of `count` elements into their mean; an empty
// fold gives 0 * inf = NaN, as NumPy's mean does.
template <class T> inline T mean_factor(std::int64_t count) noexcept { return T(1) / static_cast<T>(count); }

template <class T, class R> inline void reduce_sum(const T* x, const std::int64_t* dims, R rank, const bool* red, T* y) noexcept {
    reduce_into(x, dims, rank, red, y, T(0), add_fn{});
}
template <class T, class R> inline void reduce_max(const T* x, const std::int64_t* dims, R rank, const bool* red, T* y) noexcept {
    reduce_into(x, dims, rank, red, y, max_identity<T>(), max_fn{});
}
template <class T, class R> inline void reduce_min(const T* x, const std::int64_t* dims, R rank, const bool* red, T* y) noexcept {
    reduce_into(x, dims, rank, red, y, min_identity<T>(), min_fn{});
}
// Integers wrap (as NumPy's prod); the product of nothing is 1.
template <class T, class R> inline void reduce_prod(const T* x, const std::int64_t* dims, R rank, const bool* red, T* y) noexcept {
    reduce_into(x, dims, rank, red, y, T(1), mul_fn{});
}
template <class R> inline void reduce_all(const bool* x, const std::int64_t* dims, R rank, const bool* red, bool* y) noexcept {
    reduce_into(x, dims, rank, red, y, true, and_fn{});
}
template <class R> inline void reduce_any(const bool* x, const std::int64_t* dims, R rank, const bool* red, bool* y) noexcept {
    reduce_into(x, dims, rank, red, y, false, or_fn{});
}
// The serial reduce_mean (the CPU device splits the scaling over threads,
// which gives the same bits: unary_loop cuts at whole vectors).
template <class T, class R> inline void reduce_mean(const T* x, const std::int64_t* dims, R rank, const bool* red, T* y) noexcept {
    reduce_into(x, dims, rank, red, y, T(0), add_fn{});
    unary_loop_serial(kept_count(dims, rank, red), y, y, scale_by_fn<T>{mean_factor<T>(reduced_count(dims, rank, red))});
}

// The mean of x[0..n) (op mean): a pairwise sum over n. An empty X gives
// 0/0 = NaN, as NumPy's mean does.
template <class T, class N> inline T mean_all(const T* x, N n) noexcept {
    const T sum = fold_row(x, extent(n), T(0), add_fn{});
    return sum / static_cast<T>(extent(n));
}

// mean's gradient: dx[0..n) = dout[0] / n.
template <class T, class N> inline void mean_grad(const T* dout, T* dx, N n) noexcept {
    const T g = *dout / static_cast<T>(std::max<std::int64_t>(extent(n), 1));
    std::fill(dx, dx + extent(n), g);
}

// ---- gradients ---------------------------------------------------------------------------
//
// Each element of X takes the gradient of the output element it folded
// into. X is walked in runs over its trailing dims of one kind (all
// reduced: every element of the run folds into one output element; all
// kept: into consecutive ones), so each run is one vectorizable loop; the
// runs are visited in row-major order with the offset of their first
// output element kept incrementally (an odometer with Out's strides, 0
// along the reduced dims), so the walk needs no scratch memory and no
// division. Every element is computed on its own, so the bits do not
// depend on the runs.

// Calls run(i, o, len, step) for consecutive runs of X: X[i + j] folds into
// Out[o + j * step] for j < len, step 0 (trailing dims reduced) or 1 (kept).
template <class R, class Run>
inline void reduce_grad_runs(const std::int64_t* dims, R rank, const bool* red, Run run) noexcept {
    const int r = static_cast<int>(extent(rank));
    std::int64_t n = 1;
    for (int i = 0; i < r; ++i) n *= dims[i];
    if (n == 0) return;
    // The trailing dims of one kind (dims of size 1 join either) make the run.
    int first = r;
    std::int64_t len = 1;
    int kind = -1;  // unknown until a dim longer than 1
    while (first > 0) {
        const int d = first - 1;
        if (dims[d] != 1) {
            if (kind == -1) kind = red[d] ? 1 : 0;
            else if (kind != (red[d] ? 1 : 0)) break;
        }
        len *= dims[d];
        first = d;
    }
    const std::int64_t step = kind == 1 ? 0 : 1;
    // Out's strides over the dims outside the run (kept dims contiguous, reduced 0).
    std::int64_t ost[max_rank] = {}, idx[max_rank] = {};
    std::int64_t st = step == 1 ? len : 1;
    for (int i = first - 1; i >= 0; --i) {
        ost[i] = red[i] ? 0 : st;
        if (!red[i]) st *= dims[i];
    }
    std::int64_t o = 0;
    for (std::int64_t i = 0; i < n; i += len) {
        run(i, o, len, step);
        for (int k = first - 1; k >= 0; --k) {
            o += ost[k];
            if (++idx[k] < dims[k]) break;
            o -= ost[k] * dims[k];
            idx[k] = 0;
        }
    }
}

// reduce_sum's gradient: dx[i] = dout[o].
template <class T, class R>
inline void reduce_sum_grad(const T* dout, const std::int64_t* dims, R rank, const bool* red, T* dx) noexcept {
    reduce_grad_runs(dims, rank, red, [&](std::int64_t i, std::int64_t o, std::int64_t len, std::int64_t step) {
        if (step == 0) std::fill(dx + i, dx + i + len, dout[o]);
        else std::copy(dout + o, dout + o + len, dx + i);
    });
}

// reduce_mean's gradient: dx[i] = dout[o] * (1 / count) (1 / 1 when nothing
// is folded, where X is empty anyway).
template <class T, class R>
inline void reduce_mean_grad(const T* dout, const std::int64_t* dims, R rank, const bool* red, T* dx) noexcept {
    const T scale = T(1) / static_cast<T>(std::max<std::int64_t>(reduced_count(dims, rank, red), 1));
    reduce_grad_runs(dims, rank, red, [&](std::int64_t i, std::int64_t o, std::int64_t len, std::int64_t step) {
        T* __restrict d = dx + i;
        if (step == 0) std::fill(d, d + len, dout[o] * scale);
        else
            for (std::int64_t j = 0; j < len; ++j) d[j] = dout[o + j] * scale;
    });
}

// reduce_max's and reduce_min's gradient: dout[o] where X equals the
// extreme (Out) it folded into, every tied position included; 0 elsewhere.
template <class T, class R>
inline void reduce_extreme_grad(const T* x, const T* out, const T* dout, const std::int64_t* dims, R rank,
                                const bool* red, T* dx) noexcept {
    reduce_grad_runs(dims, rank, red, [&](std::int64_t i, std::int64_t o, std::int64_t len, std::int64_t step) {
        const T* __restrict xs = x + i;
        T* __restrict d = dx + i;
        if (step == 0) {
            const T m = out[o], g = dout[o];
            for (std::int64_t j = 0; j < len; ++j) d[j] = xs[j] == m ? g : T(0);
        } else {
            for (std::int64_t j = 0; j < len; ++j) d[j] = xs[j] == out[o + j] ? dout[o + j] : T(0);
        }
    });
}

// The scratch reduce_prod_grad needs: two values per output element.
template <class R> inline std::int64_t reduce_prod_grad_work(const std::int64_t* dims, R rank, const bool* red) noexcept {
    return 2 * kept_count(dims, rank, red);
}

// reduce_prod's gradient: dx = dout times the product of the other elements
// of X that fold into the same output. Where none of them is 0 that is
// dout * Out / x (as Paddle computes it everywhere); at a zero of X, where
// Paddle's form gives NaN, the product of the others is taken instead: the
// product of the group's nonzero elements at its only zero, 0 at every zero
// of a group with two or more. `work` holds reduce_prod_grad_work(dims,
// rank, red) elements: each group's count of zeros and product of nonzeros,
// from a walk before the one that writes dx.
template <class T, class R>
inline void reduce_prod_grad(const T* x, const T* out, const T* dout, const std::int64_t* dims, R rank,
                             const bool* red, T* dx, T* work) noexcept {
    const std::int64_t kept = kept_count(dims, rank, red);
    T* const zeros = work;
    T* const nonzero = work + kept;
    std::fill(zeros, zeros + kept, T(0));
    std::fill(nonzero, nonzero + kept, T(1));
    reduce_grad_runs(dims, rank, red, [&](std::int64_t i, std::int64_t o, std::int64_t len, std::int64_t step) {
        for (std::int64_t j = 0; j < len; ++j) {
            const T v = x[i + j];
            const std::int64_t k = o + j * step;
            if (v == T(0)) zeros[k] += T(1);
            else nonzero[k] *= v;
        }
    });
    reduce_grad_runs(dims, rank, red, [&](std::int64_t i, std::int64_t o, std::int64_t len, std::int64_t step) {
        for (std::int64_t j = 0; j < len; ++j) {
            const T v = x[i + j];
            const std::int64_t k = o + j * step;
            T g = T(0);
            if (zeros[k] == T(0)) g = dout[k] * out[k] / v;
            else if (zeros[k] == T(1) && v == T(0)) g = dout[k] * nonzero[k];
            dx[i + j] = g;
        }
    });
}

// ---- arg_max, arg_min, cumsum ------------------------------------------------------------
//
// Over the middle dim of a row-major [outer, d, inner] array (the axis and
// the dims before and after it), one result per (o, j) or per element.

// The position along the axis of the first max (Max) or min of each
// [outer, inner] column, d > 0. A NaN counts as beyond every number, so the
// first NaN wins (as NumPy's argmax and argmin). I: INT32 or INT64.
template <bool Max, class T, class I, class O, class D, class N>
inline void arg_extreme(const T* x, O outer_, D d_, N inner_, I* out) noexcept {
    const std::int64_t outer = extent(outer_), d = extent(d_), inner = extent(inner_);
    // Whether a beats the best so far, b: a NaN beats any number, nothing beats a NaN.
    auto beats = [](T a, T b) {
        if constexpr (std::is_floating_point_v<T>) {
            if (b != b) return false;
            if (a != a) return true;
        }
        return Max ? a > b : a < b;
    };
    for (std::int64_t o = 0; o < outer; ++o) {
        const T* xo = x + o * d * inner;
        I* y = out + o * inner;
        for (std::int64_t j = 0; j < inner; ++j) {
            std::int64_t best = 0;
            for (std::int64_t k = 1; k < d; ++k)
                if (beats(xo[k * inner + j], xo[best * inner + j])) best = k;
            y[j] = static_cast<I>(best);
        }
    }
}

// Cumulative sums along the axis, in order from its start (from its end
// when reverse); exclusive leaves each element out of its own sum, so the
// first is 0. Integers wrap. Row by row along the axis (rows of inner
// contiguous elements), each from the row summed before it; y must not
// alias x (an exclusive sum reads the previous input row).
template <class T, class O, class D, class N>
inline void cumsum(const T* x, T* y, O outer_, D d_, N inner_, bool exclusive, bool reverse) noexcept {
    const std::int64_t outer = extent(outer_), d = extent(d_), inner = extent(inner_);
    for (std::int64_t o = 0; o < outer; ++o) {
        const T* xo = x + o * d * inner;
        T* yo = y + o * d * inner;
        for (std::int64_t s = 0; s < d; ++s) {
            const std::int64_t k = reverse ? d - 1 - s : s, prev = reverse ? k + 1 : k - 1;
            T* yr = yo + k * inner;
            if (s == 0) {
                for (std::int64_t j = 0; j < inner; ++j) yr[j] = exclusive ? T(0) : xo[k * inner + j];
                continue;
            }
            const T* yp = yo + prev * inner;
            const T* xr = xo + (exclusive ? prev : k) * inner;
            for (std::int64_t j = 0; j < inner; ++j) yr[j] = add_fn{}(yp[j], xr[j]);
        }
    }
}

}  // namespace dlgraph::kernels
