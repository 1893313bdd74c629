// Indexing over raw arrays, the kernel core of ops/index.hpp: rows of a
// table picked by id (lookup_table, an embedding) and the gradient that
// adds them back; one-hot rows of ids.
#pragma once

#include <cstdint>
#include <cstring>

#include "dlgraph/kernels/config.hpp"
#include "dlgraph/kernels/vec.hpp"  // wrap_add

namespace dlgraph::kernels {

// Paddle's lookup_table padding_idx meaning "no padding row".
inline constexpr std::int64_t no_padding = -1;

// The first id of ids[0, n) outside [0, rows) that is not the padding id, as
// fault{id_out_of_range, id, position, rows}; none when all are good.
template <class I, class N, class R>
inline fault check_ids(const I* ids, N n_, R rows_, std::int64_t padding_idx) noexcept {
    const std::int64_t n = extent(n_), rows = extent(rows_);
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t id = static_cast<std::int64_t>(ids[i]);
        if (padding_idx != no_padding && id == padding_idx) continue;
        if (id < 0 || id >= rows) return fault{fault_code::id_out_of_range, id, i, rows};
    }
    return {};
}

// out[i, :] = w[ids[i], :] for i in [0, n), rows of d; zeros where ids[i] is
// padding_idx (unless it is no_padding). Checks every id first and writes
// nothing when one is out of range.
template <class T, class I, class N, class R, class D>
inline fault lookup_table(const T* w, R rows_, D d_, const I* ids, N n_, std::int64_t padding_idx, T* out) noexcept {
    const std::int64_t n = extent(n_), d = extent(d_);
    if (const fault f = check_ids(ids, n, rows_, padding_idx)) return f;
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t id = static_cast<std::int64_t>(ids[i]);
        T* o = out + i * d;
        if (padding_idx != no_padding && id == padding_idx) {
            for (std::int64_t k = 0; k < d; ++k) o[k] = T(0);
        } else if (d > 0) {
            std::memcpy(o, w + id * d, static_cast<std::size_t>(d) * sizeof(T));
        }
    }
    return {};
}

// dw = 0, then dw[ids[i], :] += dout[i, :] for i in order (a fixed order, so
// the bits do not depend on threads); padding ids add nothing. Checks every
// id first and writes nothing when one is out of range.
template <class T, class I, class N, class R, class D>
inline fault lookup_table_grad(const I* ids, N n_, const T* dout, R rows_, D d_, std::int64_t padding_idx,
                               T* dw) noexcept {
    const std::int64_t n = extent(n_), rows = extent(rows_), d = extent(d_);
    if (const fault f = check_ids(ids, n, rows, padding_idx)) return f;
    for (std::int64_t k = 0; k < rows * d; ++k) dw[k] = T(0);
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t id = static_cast<std::int64_t>(ids[i]);
        if (padding_idx != no_padding && id == padding_idx) continue;
        T* g = dw + id * d;
        const T* s = dout + i * d;
        for (std::int64_t k = 0; k < d; ++k) g[k] += s[k];
    }
    return {};
}

// out[i, :] = the one-hot row of ids[i] among `depth` classes (1 at the id,
// 0 elsewhere) for i in [0, n). An id outside [0, depth) is the fault
// id_out_of_range (nothing written), or, with allow_out_of_range, a row of
// zeros (Paddle's attribute).
template <class T, class I, class N, class D>
inline fault one_hot(const I* ids, N n_, D depth_, bool allow_out_of_range, T* out) noexcept {
    const std::int64_t n = extent(n_), depth = extent(depth_);
    if (!allow_out_of_range)
        if (const fault f = check_ids(ids, n, depth, no_padding)) return f;
    for (std::int64_t i = 0; i < n * depth; ++i) out[i] = T(0);
    for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t id = static_cast<std::int64_t>(ids[i]);
        if (id >= 0 && id < depth) out[i * depth + id] = T(1);
    }
    return {};
}

// ---- gather and scatter ----------------------------------------------------------------------
//
// Both view X as [outer, d, inner] around an axis (scatter: axis 0, outer 1)
// and move rows of `inner` elements picked by n ids. Every id is checked
// first (outside [0, d) is the fault id_out_of_range) and nothing is written
// when one is bad.

// out[o, i, :] = x[o, idx[i], :] for o < outer, i < n.
template <class T, class I>
inline fault gather(const T* x, std::int64_t outer, std::int64_t d, std::int64_t inner, const I* idx, std::int64_t n,
                    T* out) noexcept {
    if (const fault f = check_ids(idx, n, d, no_padding)) return f;
    for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t i = 0; i < n; ++i)
            if (inner > 0)
                std::memcpy(out + (o * n + i) * inner, x + (o * d + static_cast<std::int64_t>(idx[i])) * inner,
                            static_cast<std::size_t>(inner) * sizeof(T));
    return {};
}

// gather's gradient: dx = 0, then dx[o, idx[i], :] += dout[o, i, :] in
// order of i, or, with overwrite (Paddle's attribute), = (the last i wins).
template <class T, class I>
inline fault gather_grad(const I* idx, std::int64_t n, const T* dout, std::int64_t outer, std::int64_t d,
                         std::int64_t inner, bool overwrite, T* dx) noexcept {
    if (const fault f = check_ids(idx, n, d, no_padding)) return f;
    for (std::int64_t k = 0; k < outer * d * inner; ++k) dx[k] = T(0);
    for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t i = 0; i < n; ++i) {
            T* g = dx + (o * d + static_cast<std::int64_t>(idx[i])) * inner;
            const T* s = dout + (o * n + i) * inner;
            if (overwrite)
                for (std::int64_t k = 0; k < inner; ++k) g[k] = s[k];
            else
                for (std::int64_t k = 0; k < inner; ++k) g[k] += s[k];
        }
    return {};
}

// out = x (rows of `inner`, `rows` of them), then row ids[i] of out gets
// updates[i]: with overwrite in order of i (the last write stays), else the
// rows named by ids are zeroed and every update added in order (Paddle's
// scatter; integers wrap). out may be x itself. Every id is checked first;
// each is checked again where it is used, since a program may name the ids
// as the op's output too (then the copy of x has overwritten them: the
// results are meaningless, but nothing outside out is written).
template <class T, class I>
inline fault scatter(const T* x, std::int64_t rows, std::int64_t inner, const I* ids, std::int64_t n, const T* updates,
                     bool overwrite, T* out) noexcept {
    if (const fault f = check_ids(ids, n, rows, no_padding)) return f;
    if (out != x && rows * inner > 0) std::memmove(out, x, static_cast<std::size_t>(rows * inner) * sizeof(T));
    auto row = [&](std::int64_t i) -> T* {
        const std::int64_t id = static_cast<std::int64_t>(ids[i]);
        return id >= 0 && id < rows ? out + id * inner : nullptr;
    };
    if (!overwrite)
        for (std::int64_t i = 0; i < n; ++i)
            if (T* o = row(i))
                for (std::int64_t k = 0; k < inner; ++k) o[k] = T(0);
    for (std::int64_t i = 0; i < n; ++i) {
        T* o = row(i);
        if (!o) continue;
        const T* u = updates + i * inner;
        if (overwrite)
            for (std::int64_t k = 0; k < inner; ++k) o[k] = u[k];
        else
            for (std::int64_t k = 0; k < inner; ++k) o[k] = wrap_add(o[k], u[k]);
    }
    return {};
}

// scatter's gradient as Paddle computes it: dx = dout with the rows named
// by ids zeroed, dupdates[i] = dout[ids[i]] (each may be null).
template <class T, class I>
inline fault scatter_grad(const I* ids, std::int64_t n, const T* dout, std::int64_t rows, std::int64_t inner, T* dx,
                          T* dupdates) noexcept {
    if (const fault f = check_ids(ids, n, rows, no_padding)) return f;
    if (dx) {
        if (rows * inner > 0) std::memcpy(dx, dout, static_cast<std::size_t>(rows * inner) * sizeof(T));
        for (std::int64_t i = 0; i < n; ++i)
            for (std::int64_t k = 0; k < inner; ++k) dx[static_cast<std::int64_t>(ids[i]) * inner + k] = T(0);
    }
    if (dupdates)
        for (std::int64_t i = 0; i < n; ++i)
            for (std::int64_t k = 0; k < inner; ++k) dupdates[i * inner + k] = dout[static_cast<std::int64_t>(ids[i]) * inner + k];
    return {};
}

}  // namespace dlgraph::kernels
