// Windows over NCHW images, the kernel core of ops/conv.hpp: a convolution's
// geometry, the column matrix that turns it into a GEMM (im2col) and its
// adjoint (col2im, for the input's gradient), and 2-D pooling (max and
// average, with its gradients). One image's channels at a time: the caller
// walks the batch and the groups and runs the products.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "dlgraph/kernels/config.hpp"

namespace dlgraph::kernels {

// Where a window of an output position reads: output row y reads input
// rows y * sh - pt + i * dh for i < kh (likewise for columns); positions
// outside the input are the padding.
struct window2d {
    std::int64_t c = 0, h = 0, w = 0;  // channels (of one group), input height and width
    std::int64_t kh = 1, kw = 1;       // the window
    std::int64_t oh = 0, ow = 0;       // the output
    std::int64_t sh = 1, sw = 1;       // strides
    std::int64_t pt = 0, pl = 0;       // padding before the first row and column
    std::int64_t pb = 0, pr = 0;       // and after the last (pooling's divisor counts it)
    std::int64_t dh = 1, dw = 1;       // dilations
    // The column matrix's rows (c * kh * kw) and columns (oh * ow).
    constexpr std::int64_t col_rows() const noexcept { return c * kh * kw; }
    constexpr std::int64_t col_cols() const noexcept { return oh * ow; }
    // A 1x1 window with stride 1 and no padding reads the image as it is.
    constexpr bool identity() const noexcept {
        return kh == 1 && kw == 1 && sh == 1 && sw == 1 && pt == 0 && pl == 0 && oh == h && ow == w;
    }
};

namespace conv_detail {

// floor(a / b) for b > 0.
constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) noexcept { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// The output positions [lo, hi) along one axis whose input index
// o * s + off lies in [0, n), off = window offset - padding.
struct span {
    std::int64_t lo, hi;
};
constexpr span inside(std::int64_t n, std::int64_t s, std::int64_t off, std::int64_t count) noexcept {
    std::int64_t lo = off >= 0 ? 0 : floor_div(-off + s - 1, s);
    std::int64_t hi = floor_div(n - 1 - off, s) + 1;
    if (lo > count) lo = count;
    if (hi > count) hi = count;
    if (hi < lo) hi = lo;
    return {lo, hi};
}

}  // namespace conv_detail

// Calls f(tap, image_row, ys, xoff, xs) for each row of the column matrix
// (tap = (ci * kh + i) * kw + j): output rows ys and columns xs read the
// input, output row y reads image_row(y) at column x * sw + xoff.
template <class F> inline void for_each_tap(const window2d& g, F f) noexcept {
    for (std::int64_t ci = 0; ci < g.c; ++ci)
        for (std::int64_t i = 0; i < g.kh; ++i) {
            const conv_detail::span ys = conv_detail::inside(g.h, g.sh, i * g.dh - g.pt, g.oh);
            const auto image_row = [&g, ci, i](std::int64_t y) { return (ci * g.h + y * g.sh - g.pt + i * g.dh) * g.w; };
            for (std::int64_t j = 0; j < g.kw; ++j) {
                const std::int64_t xoff = j * g.dw - g.pl;
                f((ci * g.kh + i) * g.kw + j, image_row, ys, xoff, conv_detail::inside(g.w, g.sw, xoff, g.ow));
            }
        }
}

// The output rows [y0, y1) of g as a window of their own: its column
// matrix is columns [y0 * ow, y1 * ow) of g's, and col2im of it adds what
// those columns read. (A convolution works through its columns a few
// rows at a time, so that they stay in the cache between written and read.)
constexpr window2d output_rows(const window2d& g, std::int64_t y0, std::int64_t y1) noexcept {
    window2d r = g;
    r.oh = y1 - y0;
    r.pt = g.pt - y0 * g.sh;
    return r;
}

namespace conv_detail {

// With stride 1 and the output as wide as the input (SAME padding), a
// tap's rows of the column matrix are one shifted run of the image: output
// row y + 1 reads the input row after y's, at the same columns, so entry k
// of the tap's row reads image[k + shift] wherever it reads the image.
constexpr bool shifted_rows(const window2d& g) noexcept { return g.sh == 1 && g.sw == 1 && g.ow == g.w; }

// The entries of a tap's row (rows ys of it) in the columns outside xs,
// the padding's: a column at a time, since a few columns of a few taps
// are all there is, and a loop per row would cost as much as the copy.
template <class T> void zero_padding_columns(const window2d& g, T* row, span ys, span xs) noexcept {
    const auto zero_column = [&](std::int64_t x) {
        for (std::int64_t y = ys.lo; y < ys.hi; ++y) row[y * g.ow + x] = T(0);
    };
    for (std::int64_t x = 0; x < xs.lo; ++x) zero_column(x);
    for (std::int64_t x = xs.hi; x < g.ow; ++x) zero_column(x);
}

// For shifted_rows: the entries [k0, k1) of a tap's row (rows ys) that
// read the image, padding columns included, and shift. Entries before or
// past the image are in the padding columns too.
struct shifted_run {
    std::int64_t k0, k1, shift;
};
inline shifted_run shifted_run_of(const window2d& g, std::int64_t first_image_row, span ys, std::int64_t xoff) noexcept {
    const std::int64_t first = ys.lo * g.ow, last = ys.hi * g.ow, shift = first_image_row + xoff - first;
    return {std::max(first, -shift), std::min(last, g.c * g.h * g.w - shift), shift};
}

}  // namespace conv_detail

// col [c * kh * kw, oh * ow]: col[(ci * kh + i) * kw + j][y * ow + x] is
// image[ci][y * sh - pt + i * dh][x * sw - pl + j * dw], 0 in the padding.
template <class T> inline void im2col(const window2d& g, const T* image, T* col) noexcept {
    const std::int64_t ohw = g.oh * g.ow;
    const bool shifted = conv_detail::shifted_rows(g);
    for_each_tap(g, [&](std::int64_t tap, auto image_row, conv_detail::span ys, std::int64_t xoff, conv_detail::span xs) {
        T* const row = col + tap * ohw;
        std::fill(row, row + ys.lo * g.ow, T(0));  // the rows in the padding
        std::fill(row + ys.hi * g.ow, row + ohw, T(0));
        if (ys.lo == ys.hi) return;
        if (shifted) {  // one copy; what it took from a neighbouring row is zeroed below
            const conv_detail::shifted_run r = conv_detail::shifted_run_of(g, image_row(ys.lo), ys, xoff);
            T* __restrict out = row;
            const T* __restrict in = image;
            for (std::int64_t k = r.k0; k < r.k1; ++k) out[k] = in[k + r.shift];
        } else {
            for (std::int64_t y = ys.lo; y < ys.hi; ++y) {
                T* __restrict out = row + y * g.ow;
                const T* __restrict in = image + image_row(y);
                if (g.sw == 1)
                    for (std::int64_t x = xs.lo; x < xs.hi; ++x) out[x] = in[x + xoff];
                else
                    for (std::int64_t x = xs.lo; x < xs.hi; ++x) out[x] = in[x * g.sw + xoff];
            }
        }
        conv_detail::zero_padding_columns(g, row, ys, xs);
    });
}

// The adjoint of im2col: image[ci][iy][ix] += every column entry that
// im2col read from it (the padding's entries are dropped). The caller
// zeroes the image first. Zeroes col's entries in the padding on the way.
template <class T> inline void col2im_add(const window2d& g, T* col, T* image) noexcept {
    const bool shifted = conv_detail::shifted_rows(g);
    for_each_tap(g, [&](std::int64_t tap, auto image_row, conv_detail::span ys, std::int64_t xoff, conv_detail::span xs) {
        T* const row = col + tap * g.oh * g.ow;
        if (ys.lo == ys.hi) return;
        if (shifted) {
            // One run of adds: the padding's entries, zeroed first, add
            // nothing (x + 0 is x: the image, zeroed to +0, never holds -0).
            conv_detail::zero_padding_columns(g, row, ys, xs);
            const conv_detail::shifted_run r = conv_detail::shifted_run_of(g, image_row(ys.lo), ys, xoff);
            T* __restrict out = image;
            const T* __restrict in = row;
            for (std::int64_t k = r.k0; k < r.k1; ++k) out[k + r.shift] += in[k];
            return;
        }
        for (std::int64_t y = ys.lo; y < ys.hi; ++y) {
            const T* __restrict in = row + y * g.ow;
            T* __restrict out = image + image_row(y);
            if (g.sw == 1)
                for (std::int64_t x = xs.lo; x < xs.hi; ++x) out[x + xoff] += in[x];
            else
                for (std::int64_t x = xs.lo; x < xs.hi; ++x) out[x * g.sw + xoff] += in[x];
        }
    });
}

// ---- pooling ---------------------------------------------------------------------------------
//
// Output position (y, x) of a channel pools the window's rows
// [y * sh - pt, y * sh - pt + kh) clipped to the input (columns likewise),
// or with `adaptive` rows [floor(y * h / oh), ceil((y + 1) * h / oh)).
// Average pooling divides by the clipped window's size when `exclusive` or
// `adaptive`, else by the window's size within the padded input (kh * kw
// unless a ceil_mode window runs past the padding), as Paddle's CPU kernel
// does. An empty window (one in the padding alone) gives the lowest value
// (max) or 0 (avg), and no gradient. Dilation is 1.

struct pool_range {
    std::int64_t lo, hi;  // the rows read
    std::int64_t span;    // the rows the non-exclusive average divides by
};

constexpr pool_range pool_rows(std::int64_t o, std::int64_t n, std::int64_t outs, std::int64_t k, std::int64_t s,
                               std::int64_t pad0, std::int64_t pad1, bool adaptive) noexcept {
    if (adaptive) {
        const std::int64_t lo = o * n / outs, hi = ((o + 1) * n + outs - 1) / outs;
        return {lo, hi, hi - lo};
    }
    const std::int64_t start = o * s - pad0, end = start + k < n + pad1 ? start + k : n + pad1;
    const std::int64_t lo = start < 0 ? 0 : start, hi = end > n ? n : end;
    return {lo, hi > lo ? hi : lo, end - start};
}

// The window of output (y, x): its rows r, columns c, and the divisor of
// an average.
struct pool_window {
    pool_range r, c;
    std::int64_t divisor;
};
constexpr pool_window pool_window_at(const window2d& g, bool adaptive, bool exclusive, std::int64_t y,
                                     std::int64_t x) noexcept {
    const pool_range r = pool_rows(y, g.h, g.oh, g.kh, g.sh, g.pt, g.pb, adaptive);
    const pool_range c = pool_rows(x, g.w, g.ow, g.kw, g.sw, g.pl, g.pr, adaptive);
    const std::int64_t d = exclusive || adaptive ? (r.hi - r.lo) * (c.hi - c.lo) : r.span * c.span;
    return {r, c, d};
}

// The max of a window, or its first NaN. Branch-free but for the NaN
// (data-dependent branches mispredict on half of a ReLU's outputs).
template <class T> inline T window_max(const window2d& g, const T* in, const pool_window& pw) noexcept {
    T m = std::numeric_limits<T>::lowest();
    bool nan = false;
    for (std::int64_t iy = pw.r.lo; iy < pw.r.hi; ++iy) {
        const T* row = in + iy * g.w;
        for (std::int64_t ix = pw.c.lo; ix < pw.c.hi; ++ix) {
            const T v = row[ix];
            nan |= v != v;
            m = v > m ? v : m;
        }
    }
    if (nan) [[unlikely]]
        for (std::int64_t iy = pw.r.lo; iy < pw.r.hi; ++iy)
            for (std::int64_t ix = pw.c.lo; ix < pw.c.hi; ++ix)
                if (in[iy * g.w + ix] != in[iy * g.w + ix]) return in[iy * g.w + ix];
    return m;
}

// The most common window, 2x2 with stride 2 inside the input, which the
// pooling loops take without computing each window's range.
constexpr bool plain_2x2(const window2d& g, bool adaptive) noexcept {
    return !adaptive && g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.pt == 0 && g.pl == 0 &&
           2 * g.oh <= g.h && 2 * g.ow <= g.w;
}

// One channel (h x w) pooled into (oh x ow).
template <class T> inline void max_pool2d(const window2d& g, bool adaptive, const T* in, T* out) noexcept {
    for (std::int64_t y = 0; y < g.oh; ++y) {
        if (plain_2x2(g, adaptive)) {
            // As window_max: from the lowest value, each of the four in
            // row-major order if greater; a row with a NaN again, exactly.
            const T* r0 = in + 2 * y * g.w;
            const T* r1 = r0 + g.w;
            bool nan = false;
            for (std::int64_t x = 0; x < g.ow; ++x) {
                const T a = r0[2 * x], b = r0[2 * x + 1], c = r1[2 * x], d = r1[2 * x + 1];
                T m = std::numeric_limits<T>::lowest();
                m = a > m ? a : m;
                m = b > m ? b : m;
                m = c > m ? c : m;
                m = d > m ? d : m;
                out[y * g.ow + x] = m;
                nan |= (a != a) | (b != b) | (c != c) | (d != d);
            }
            if (!nan) [[likely]]
                continue;
        }
        for (std::int64_t x = 0; x < g.ow; ++x) out[y * g.ow + x] = window_max(g, in, pool_window_at(g, adaptive, true, y, x));
    }
}

template <class T>
inline void avg_pool2d(const window2d& g, bool adaptive, bool exclusive, const T* in, T* out) noexcept {
    for (std::int64_t y = 0; y < g.oh; ++y)
        for (std::int64_t x = 0; x < g.ow; ++x) {
            const pool_window pw = pool_window_at(g, adaptive, exclusive, y, x);
            T s = 0;
            for (std::int64_t iy = pw.r.lo; iy < pw.r.hi; ++iy)
                for (std::int64_t ix = pw.c.lo; ix < pw.c.hi; ++ix) s += in[iy * g.w + ix];
            out[y * g.ow + x] = pw.divisor > 0 ? s / static_cast<T>(pw.divisor) : T(0);
        }
}

// The gradient of max_pool2d: each output's gradient goes to the first
// input of its window (row-major) equal to the output. dx is zeroed by the
// caller; overlapping windows add.
template <class T>
inline void max_pool2d_grad(const window2d& g, bool adaptive, const T* in, const T* out, const T* dout, T* dx) noexcept {
    using bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    auto bits_of = [](T v) { return std::bit_cast<bits>(static_cast<T>(v + T(0))); };  // -0 as +0
    for (std::int64_t y = 0; y < g.oh; ++y) {
        if (plain_2x2(g, adaptive)) {
            // Which of the four inputs (row-major) is the first equal to
            // the output, by arithmetic on the comparisons; a NaN output
            // takes the general path.
            bool nan = false;
            for (std::int64_t x = 0; x < g.ow; ++x) {
                const T m = out[y * g.ow + x];
                nan |= m != m;
                const bits mb = bits_of(m);
                const std::int64_t at0 = 2 * y * g.w + 2 * x;
                const int a = bits_of(in[at0]) != mb, b = bits_of(in[at0 + 1]) != mb;
                const int c = bits_of(in[at0 + g.w]) != mb, d = bits_of(in[at0 + g.w + 1]) != mb;
                const int first = a * (1 + b * (1 + c));  // 0, 1, 2, or 3: d or none
                if ((a & b & c & d) == 0 && m == m) dx[at0 + (first & 1) + (first >> 1) * g.w] += dout[y * g.ow + x];
            }
            if (!nan) [[likely]]
                continue;
            for (std::int64_t x = 0; x < g.ow; ++x) {  // only the NaN outputs, the rest are done
                const T m = out[y * g.ow + x];
                if (m == m) continue;
                const std::int64_t at0 = 2 * y * g.w + 2 * x;
                for (std::int64_t k : {at0, at0 + 1, at0 + g.w, at0 + g.w + 1})
                    if (in[k] != in[k]) {
                        dx[k] += dout[y * g.ow + x];
                        break;
                    }
            }
            continue;
        }
        for (std::int64_t x = 0; x < g.ow; ++x) {
            const pool_window pw = pool_window_at(g, adaptive, true, y, x);
            const T m = out[y * g.ow + x];
            std::int64_t at = -1;
            if (m == m) [[likely]] {
                // The first input equal to the output, found by comparing
                // bits (x + 0 makes -0 +0) and masking, not branching: a
                // branch on the data mispredicts on half of a ReLU's outputs
                // (3x slower at batch 64; compilers turn a ?: on floats or
                // && into one).
                const bits mb = bits_of(m);
                for (std::int64_t iy = pw.r.lo; iy < pw.r.hi; ++iy)
                    for (std::int64_t ix = pw.c.lo; ix < pw.c.hi; ++ix) {
                        const std::int64_t hit = -static_cast<std::int64_t>((bits_of(in[iy * g.w + ix]) == mb) & (at < 0));
                        at += (iy * g.w + ix - at) & hit;  // hit: all ones or 0
                    }
            } else {  // the max was the window's first NaN
                for (std::int64_t iy = pw.r.lo; iy < pw.r.hi && at < 0; ++iy)
                    for (std::int64_t ix = pw.c.lo; ix < pw.c.hi && at < 0; ++ix)
                        if (in[iy * g.w + ix] != in[iy * g.w + ix]) at = iy * g.w + ix;
            }
            if (at >= 0) dx[at] += dout[y * g.ow + x];
        }
    }
}

// The gradient of avg_pool2d: each output's gradient, divided as the
// forward divided, to every input of its window. dx is zeroed by the caller.
template <class T>
inline void avg_pool2d_grad(const window2d& g, bool adaptive, bool exclusive, const T* dout, T* dx) noexcept {
    for (std::int64_t y = 0; y < g.oh; ++y)
        for (std::int64_t x = 0; x < g.ow; ++x) {
            const pool_window pw = pool_window_at(g, adaptive, exclusive, y, x);
            if (pw.divisor <= 0) continue;
            const T d = dout[y * g.ow + x] / static_cast<T>(pw.divisor);
            for (std::int64_t iy = pw.r.lo; iy < pw.r.hi; ++iy)
                for (std::int64_t ix = pw.c.lo; ix < pw.c.hi; ++ix) dx[iy * g.w + ix] += d;
        }
}

}  // namespace dlgraph::kernels
