// Moving and regrouping elements, the kernel core of the shape ops (reshape,
// transpose, flip, concat, split, cast) and of sum: loops on raw pointers that copy
// whole contiguous runs wherever the layout allows, so they are memcpy-bound.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "dlgraph/kernels/config.hpp"
#include "dlgraph/kernels/elementwise.hpp"

namespace dlgraph::kernels {

namespace shape_detail {
// Steps a row-major multi-index over `dims` (rank r); false once it wraps.
inline bool next_index(std::int64_t* idx, const std::int64_t* dims, int r) noexcept {
    for (int i = r - 1; i >= 0; --i) {
        if (++idx[i] < dims[i]) return true;
        idx[i] = 0;
    }
    return false;
}
}  // namespace shape_detail

// Copies n elements; memcpy with a null pointer is undefined even for 0 bytes.
template <class T, class N> inline void copy_elements(const T* src, N n, T* dst) noexcept {
    const std::int64_t m = extent(n);
    if (m > 0 && src != dst) std::memcpy(dst, src, static_cast<std::size_t>(m) * sizeof(T));
}

// ---- flip --------------------------------------------------------------------------------

// y = x reversed along the dims flagged in `flipped`: x has `rank` dims
// `dims` (row-major). Runs of the trailing dims that are not flipped are
// copied whole; y must not alias x.
template <class T, class R>
inline void flip(const T* x, const std::int64_t* dims, R rank_, const bool* flipped, T* y) noexcept {
    const int rank = static_cast<int>(extent(rank_));
    std::int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= dims[i];
    if (n == 0) return;
    // The trailing dims not flipped form one contiguous run.
    int lead = rank;
    std::int64_t run = 1;
    while (lead > 0 && !flipped[lead - 1]) run *= dims[--lead];
    std::int64_t idx[max_rank] = {}, st[max_rank] = {};
    std::int64_t stride = run;
    for (int i = lead - 1; i >= 0; --i) {
        st[i] = stride;
        stride *= dims[i];
    }
    for (std::int64_t out = 0; out < n; out += run) {
        std::int64_t in = 0;
        for (int i = 0; i < lead; ++i) in += (flipped[i] ? dims[i] - 1 - idx[i] : idx[i]) * st[i];
        copy_elements(x + in, run, y + out);
        shape_detail::next_index(idx, dims, lead);
    }
}

// ---- slice ---------------------------------------------------------------------------------

// The box of x (`rank` dims `dims`, row-major) that starts at start[i] and
// spans sub[i] along each dim: copied to y (slice), or, with Back, y copied
// into it (slice's gradient; the rest of x is left as it is). The trailing
// dims the box spans whole, and the one before them, make contiguous runs.
template <bool Back, class T>
inline void slice_box(std::conditional_t<Back, T*, const T*> x, const std::int64_t* dims, int rank, const std::int64_t* start,
                      const std::int64_t* sub, std::conditional_t<Back, const T*, T*> y) noexcept {
    std::int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= sub[i];
    if (n == 0) return;
    std::int64_t st[max_rank], base = 0;
    for (std::int64_t i = rank - 1, stride = 1; i >= 0; --i) {
        st[i] = stride;
        base += start[i] * stride;
        stride *= dims[i];
    }
    int lead = rank;
    std::int64_t run = 1;
    while (lead > 0 && sub[lead - 1] == dims[lead - 1]) run *= dims[--lead];
    if (lead > 0) run *= sub[--lead];
    std::int64_t idx[max_rank] = {};
    for (std::int64_t out = 0; out < n; out += run) {
        std::int64_t in = base;
        for (int i = 0; i < lead; ++i) in += idx[i] * st[i];
        if constexpr (Back) copy_elements(y + out, run, x + in);
        else copy_elements(x + in, run, y + out);
        shape_detail::next_index(idx, sub, lead);
    }
}

// ---- tile (tile, expand, expand_v2) and its gradient -----------------------------------------
//
// y = x repeated reps[i] times along each dim i: x has `rank` dims xd
// (row-major), y has dims xd[i] * reps[i] and y[..., k_i, ...] =
// x[..., k_i mod xd[i], ...]. Each dim's first copy is written (recursing
// inward), then doubled in place, so a kernel makes O(log reps) memcpys per
// block. y must not alias x.
namespace shape_detail {
template <class T> inline void double_block(T* y, std::int64_t block, std::int64_t total) noexcept {
    for (std::int64_t filled = block; filled < total;) {
        const std::int64_t n = filled < total - filled ? filled : total - filled;
        copy_elements(y, n, y + filled);
        filled += n;
    }
}
template <class T>
inline void tile_at(int i, int rank, const T* x, const std::int64_t* xd, const std::int64_t* reps, const std::int64_t* xs,
                    const std::int64_t* ys, T* y) noexcept {
    if (i == rank - 1) copy_elements(x, xd[i], y);
    else
        for (std::int64_t j = 0; j < xd[i]; ++j) tile_at(i + 1, rank, x + j * xs[i], xd, reps, xs, ys, y + j * ys[i]);
    double_block(y, xd[i] * ys[i], xd[i] * ys[i] * reps[i]);
}
template <class T>
inline void tile_grad_at(int i, int rank, const T* dy, const std::int64_t* xd, const std::int64_t* reps,
                         const std::int64_t* xs, const std::int64_t* ys, T* dx) noexcept {
    const std::int64_t block = xd[i] * ys[i];
    for (std::int64_t r = 0; r < reps[i]; ++r) {
        const T* d = dy + r * block;
        if (i == rank - 1)
            for (std::int64_t j = 0; j < xd[i]; ++j) dx[j] += d[j];
        else
            for (std::int64_t j = 0; j < xd[i]; ++j) tile_grad_at(i + 1, rank, d + j * ys[i], xd, reps, xs, ys, dx + j * xs[i]);
    }
}
// x's and y's strides; false when y is empty.
inline bool tile_strides(const std::int64_t* xd, const std::int64_t* reps, int rank, std::int64_t* xs, std::int64_t* ys) noexcept {
    std::int64_t sx = 1, sy = 1;
    for (int i = rank - 1; i >= 0; --i) {
        xs[i] = sx;
        ys[i] = sy;
        sx *= xd[i];
        sy *= xd[i] * reps[i];
    }
    return sy > 0;
}
}  // namespace shape_detail

template <class T>
inline void tile(const T* x, const std::int64_t* xd, const std::int64_t* reps, int rank, T* y) noexcept {
    std::int64_t xs[max_rank] = {}, ys[max_rank] = {};
    if (rank == 0) y[0] = x[0];
    else if (shape_detail::tile_strides(xd, reps, rank, xs, ys)) shape_detail::tile_at(0, rank, x, xd, reps, xs, ys, y);
}

// dx = the sum of dy's copies of each element of x (tile's gradient): dx has
// dims xd, dy dims xd[i] * reps[i]. Each element adds its copies in dy's
// order, so the bits do not depend on threads.
template <class T>
inline void tile_grad(const T* dy, const std::int64_t* xd, const std::int64_t* reps, int rank, T* dx) noexcept {
    std::int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= xd[i];
    for (std::int64_t k = 0; k < n; ++k) dx[k] = T(0);
    std::int64_t xs[max_rank] = {}, ys[max_rank] = {};
    if (rank == 0) dx[0] = dy[0];
    else if (shape_detail::tile_strides(xd, reps, rank, xs, ys)) shape_detail::tile_grad_at(0, rank, dy, xd, reps, xs, ys, dx);
}

// ---- pad -----------------------------------------------------------------------------------
//
// y = x with before[i] elements of `value` before it and after it along each
// dim (y's dims ydims are xd[i] + before[i] + after[i]); its gradient is the
// box of dy that x fills (slice_box).
template <class T>
inline void pad(const T* x, const std::int64_t* xd, int rank, const std::int64_t* before, const std::int64_t* ydims, T value,
                T* y) noexcept {
    std::int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= ydims[i];
    for (std::int64_t k = 0; k < n; ++k) y[k] = value;
    slice_box<true, T>(y, ydims, rank, before, xd, x);
}

// ---- transpose ---------------------------------------------------------------------------

// y = x with dims permuted: x has `rank` dims `dims` (row-major), y dim i is
// x dim perm[i], and perm is a permutation of 0..rank-1 (rank <= max_rank).
// Unit dims are dropped and dims that stay neighbours are merged first; then
// either X's last dim stays last (contiguous runs) or the copy goes by square
// tiles over the two dims that hold X's and Out's contiguous axes.
template <class T>
inline void transpose(const T* x, const std::int64_t* dims, int rank, const std::int64_t* perm, T* y) noexcept {
    const int r = rank;
    std::int64_t total = 1;
    for (int i = 0; i < r; ++i) total *= dims[i];
    if (total == 0) return;
    // Renumber X's non-unit dims, then merge runs of Out dims that are
    // consecutive in X.
    int newid[max_rank];
    int nk = 0;
    for (int i = 0; i < r; ++i) newid[i] = dims[i] == 1 ? -1 : nk++;
    std::int64_t kept_dims[max_rank];
    for (int i = 0; i < r; ++i)
        if (newid[i] >= 0) kept_dims[newid[i]] = dims[i];
    int q[max_rank];  // Out order over kept X dims
    int nq = 0;
    for (int i = 0; i < r; ++i)
        if (newid[perm[i]] >= 0) q[nq++] = newid[perm[i]];
    // group[g] = [first X dim, count]; merged in Out order.
    int gfirst[max_rank], gcount[max_rank];
    int ng = 0;
    for (int i = 0; i < nq; ++i) {
        if (ng > 0 && gfirst[ng - 1] + gcount[ng - 1] == q[i]) ++gcount[ng - 1];
        else {
            gfirst[ng] = q[i];
            gcount[ng] = 1;
            ++ng;
        }
    }
    if (ng <= 1) return copy_elements(x, total, y);
    // Merged dims in X order: sort groups by their first X dim.
    int xorder[max_rank];  // xorder[k] = group index of the k-th group in X order
    for (int g = 0; g < ng; ++g) xorder[g] = g;
    // Insertion sort: at most max_rank entries (and std::sort's inlined
    // 16-element insertion pass trips GCC 12's -Warray-bounds here).
    for (int i = 1; i < ng; ++i)
        for (int j = i; j > 0 && gfirst[xorder[j - 1]] > gfirst[xorder[j]]; --j) std::swap(xorder[j - 1], xorder[j]);
    std::int64_t gdim[max_rank], gxstride[max_rank];
    for (int g = 0; g < ng; ++g) {
        gdim[g] = 1;
        for (int k = 0; k < gcount[g]; ++k) gdim[g] *= kept_dims[gfirst[g] + k];
    }
    {
        std::int64_t st = 1;
        for (int k = ng - 1; k >= 0; --k) {
            gxstride[xorder[k]] = st;
            st *= gdim[xorder[k]];
        }
    }
    std::int64_t gystride[max_rank];
    {
        std::int64_t st = 1;
        for (int g = ng - 1; g >= 0; --g) {
            gystride[g] = st;
            st *= gdim[g];
        }
    }
    const int last_x = xorder[ng - 1];  // Out position of X's contiguous group
    std::int64_t idx[max_rank] = {};
    if (last_x == ng - 1) {
        // Runs of X's last group are contiguous in both.
        const std::int64_t run = gdim[ng - 1];
        std::int64_t yo = 0;
        do {
            std::int64_t xo = 0;
            for (int g = 0; g < ng - 1; ++g) xo += idx[g] * gxstride[g];
            copy_elements(x + xo, run, y + yo);
            yo += run;
        } while (shape_detail::next_index(idx, gdim, ng - 1));
        return;
    }
    // Tiles over (Out group a = last_x, Out group b = ng - 1): x reads run
    // along a, y writes run along b.
    constexpr std::int64_t tile = 32;
    const int a = last_x, b = ng - 1;
    const std::int64_t na = gdim[a], nb = gdim[b], ya = gystride[a], xb = gxstride[b];
    std::int64_t odims[max_rank];
    int oid[max_rank];
    int no = 0;
    for (int g = 0; g < ng; ++g)
        if (g != a && g != b) {
            odims[no] = gdim[g];
            oid[no++] = g;
        }
    do {
        std::int64_t xo = 0, yo = 0;
        for (int k = 0; k < no; ++k) {
            xo += idx[k] * gxstride[oid[k]];
            yo += idx[k] * gystride[oid[k]];
        }
        for (std::int64_t a0 = 0; a0 < na; a0 += tile)
            for (std::int64_t b0 = 0; b0 < nb; b0 += tile) {
                const std::int64_t a1 = std::min(na, a0 + tile), b1 = std::min(nb, b0 + tile);
                for (std::int64_t i = a0; i < a1; ++i)
                    for (std::int64_t j = b0; j < b1; ++j) y[yo + i * ya + j] = x[xo + i + j * xb];
            }
    } while (shape_detail::next_index(idx, odims, no));
}

// ---- concat and split ------------------------------------------------------------------------
//
// Both view their arrays as [outer, d, inner] (row-major), joined or cut
// along d. The joined side's rows hold `row` elements apart: the sum of all
// parts' d times inner for a whole join, so a caller may also join or cut a
// subset of the parts at a time (a run of parts starting at its offset).

// Row o of y gets row o of x[0], x[1], ... in turn, where x[k]'s d is dims[k].
template <class T, class O, class I, class R>
inline void concat(O outer, I inner, int count, const T* const* x, const std::int64_t* dims, T* y, R y_row) noexcept {
    const std::int64_t no = extent(outer), ni = extent(inner), row = extent(y_row);
    for (std::int64_t o = 0; o < no; ++o) {
        T* yo = y + o * row;
        for (int k = 0; k < count; ++k) {
            const std::int64_t chunk = dims[k] * ni;
            copy_elements(x[k] + o * chunk, chunk, yo);
            yo += chunk;
        }
    }
}

// Row o of x is cut into row o of y[0], y[1], ... in turn, where y[k]'s d is
// dims[k] (concat's inverse).
template <class T, class O, class I, class R>
inline void split(O outer, I inner, int count, const T* x, R x_row, T* const* y, const std::int64_t* dims) noexcept {
    const std::int64_t no = extent(outer), ni = extent(inner), row = extent(x_row);
    for (std::int64_t o = 0; o < no; ++o) {
        const T* xo = x + o * row;
        for (int k = 0; k < count; ++k) {
            const std::int64_t chunk = dims[k] * ni;
            copy_elements(xo, chunk, y[k] + o * chunk);
            xo += chunk;
        }
    }
}

// ---- cast ----------------------------------------------------------------------------------

// y[i] = x[i] converted to U (a copy when T is U): floating point to an
// integer type truncates, saturates and sends NaN to 0 (convert); every
// other conversion is static_cast's.
template <class T, class U, class N> inline void cast(const T* x, N n, U* y) noexcept {
    if constexpr (std::is_same_v<T, U>) {
        copy_elements(x, n, y);
    } else {
        const std::int64_t m = extent(n);
        for (std::int64_t i = 0; i < m; ++i) y[i] = convert<U>(x[i]);
    }
}

// ---- sum -----------------------------------------------------------------------------------

// y[i] = x[0][i] + x[1][i] + ... + x[count-1][i] for i < n, added from the
// left; with `accumulate`, y already holds a first term and every x is added
// to it (in place, as Paddle accumulates gradients). Each addition is one
// pass of the element-wise add's loop, so an element's bits are those of a
// chain of elementwise_add and do not depend on where a range is cut (at
// whole vectors). An x may be y itself: a pass reads each element before it
// writes it, so y then stands for the partial sum so far.
template <class T, class N>
inline void sum(N n, int count, const T* const* x, T* y, bool accumulate) noexcept {
    const std::int64_t m = extent(n);
    int k = 0;
    if (!accumulate) {
        if (count == 0) return std::fill(y, y + m, T(0));
        if (count == 1) return copy_elements(x[0], m, y);
        binary_loop_serial(m, x[0], 1, x[1], 1, y, add_fn{});
        k = 2;
    }
    for (; k < count; ++k) binary_loop_serial(m, y, 1, x[k], 1, y, add_fn{});
}

}  // namespace dlgraph::kernels
