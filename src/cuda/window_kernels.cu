// The CUDA kernels of the window and normalization ops of convolutional
// networks: conv2d and depthwise_conv2d (direct: a thread per output
// element, per input element for Input@GRAD, a block per filter element for
// Filter@GRAD), pool2d (a thread per output; its gradient a thread per
// input element that gathers the outputs whose windows hold it, in the
// CPU's order), batch_norm (a block per channel, sums in double) and
// dropout (the kernel core's counter-based draws). The window arithmetic is
// the kernel core's (kernels/conv.hpp, constexpr). Gradients gather rather
// than scatter: no atomics, the same bits on every run. Declared in
// include/dlgraph/cuda/launch.hpp.
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <type_traits>

#include "common.cuh"
#include "dlgraph/cuda/launch.hpp"
#include "dlgraph/kernels/conv.hpp"
#include "dlgraph/kernels/dropout.hpp"

namespace dlgraph::cuda_kernels {

namespace {

// ---- conv2d -------------------------------------------------------------------------------------

// Output [N, M, oh, ow] = Input [N, C, h, w] (*) Filter [M, c, kh, kw], C =
// groups * c (g.c), M = groups * mg.
template <class T>
__global__ void conv2d_kernel(k::window2d g, i64 images, i64 groups, i64 mg, const T* x, const T* f, T* y) {
    const i64 m_all = groups * mg, n_out = images * m_all * g.oh * g.ow, C = groups * g.c;
    for (i64 e = first_index(); e < n_out; e += stride_all()) {
        const i64 ox = e % g.ow, oy = e / g.ow % g.oh, m = e / (g.ow * g.oh) % m_all, n = e / (g.ow * g.oh * m_all);
        const i64 grp = m / mg;
        T acc = T(0);
        for (i64 ci = 0; ci < g.c; ++ci) {
            const T* image = x + ((n * C + grp * g.c + ci) * g.h) * g.w;
            const T* fk = f + (m * g.c + ci) * g.kh * g.kw;
            for (i64 i = 0; i < g.kh; ++i) {
                const i64 iy = oy * g.sh - g.pt + i * g.dh;
                if (iy < 0 || iy >= g.h) continue;
                for (i64 j = 0; j < g.kw; ++j) {
                    const i64 ix = ox * g.sw - g.pl + j * g.dw;
                    if (ix >= 0 && ix < g.w) acc += fk[i * g.kw + j] * image[iy * g.w + ix];
                }
            }
        }
        y[e] = acc;
    }
}

// The output position along one axis that tap t reads input position p
// from: o with o * s - pad + t * d == p, or -1.
__device__ inline i64 output_of(i64 p, i64 pad, i64 t, i64 d, i64 s, i64 outs) {
    const i64 q = p + pad - t * d;
    if (q < 0 || q % s != 0) return -1;
    const i64 o = q / s;
    return o < outs ? o : -1;
}

// Input@GRAD: each input element gathers Filter * Output@GRAD over the
// filters of its group and the taps that read it.
template <class T>
__global__ void conv2d_dx_kernel(k::window2d g, i64 images, i64 groups, i64 mg, const T* f, const T* dy, T* dx) {
    const i64 C = groups * g.c, m_all = groups * mg, n_in = images * C * g.h * g.w;
    for (i64 e = first_index(); e < n_in; e += stride_all()) {
        const i64 ix = e % g.w, iy = e / g.w % g.h, c = e / (g.w * g.h) % C, n = e / (g.w * g.h * C);
        const i64 grp = c / g.c, ci = c % g.c;
        T acc = T(0);
        for (i64 m = grp * mg; m < (grp + 1) * mg; ++m) {
            const T* dym = dy + (n * m_all + m) * g.oh * g.ow;
            const T* fk = f + (m * g.c + ci) * g.kh * g.kw;
            for (i64 i = 0; i < g.kh; ++i) {
                const i64 oy = output_of(iy, g.pt, i, g.dh, g.sh, g.oh);
                if (oy < 0) continue;
                for (i64 j = 0; j < g.kw; ++j) {
                    const i64 ox = output_of(ix, g.pl, j, g.dw, g.sw, g.ow);
                    if (ox >= 0) acc += fk[i * g.kw + j] * dym[oy * g.ow + ox];
                }
            }
        }
        dx[e] = acc;
    }
}

// Filter@GRAD: a block per filter element (m, ci, i, j) sums Output@GRAD *
// Input over the images and output positions, in double.
template <class T>
__global__ void conv2d_dw_kernel(k::window2d g, i64 images, i64 groups, i64 mg, const T* x, const T* dy, T* df) {
    const i64 C = groups * g.c, m_all = groups * mg, taps = g.c * g.kh * g.kw, ohw = g.oh * g.ow;
    for (i64 e = blockIdx.x; e < m_all * taps; e += gridDim.x) {
        const i64 j = e % g.kw, i = e / g.kw % g.kh, ci = e / (g.kw * g.kh) % g.c, m = e / taps;
        const i64 c = m / mg * g.c + ci;
        double acc = 0;
        for (i64 r = threadIdx.x; r < images * ohw; r += blockDim.x) {
            const i64 n = r / ohw, oy = r % ohw / g.ow, ox = r % g.ow;
            const i64 iy = oy * g.sh - g.pt + i * g.dh, ix = ox * g.sw - g.pl + j * g.dw;
            if (iy >= 0 && iy < g.h && ix >= 0 && ix < g.w)
                acc += static_cast<double>(dy[(n * m_all + m) * ohw + r % ohw]) *
                       static_cast<double>(x[((n * C + c) * g.h + iy) * g.w + ix]);
        }
        acc = block_fold(acc, add_double{});
        if (threadIdx.x == 0) df[e] = static_cast<T>(acc);
    }
}

// ---- pool2d -------------------------------------------------------------------------------------

template <class T>
__global__ void pool2d_kernel(k::window2d g, i64 planes, bool is_max, bool adaptive, bool exclusive, const T* x, T* y) {
    const i64 n_out = planes * g.oh * g.ow;
    for (i64 e = first_index(); e < n_out; e += stride_all()) {
        const i64 ox = e % g.ow, oy = e / g.ow % g.oh, plane = e / (g.ow * g.oh);
        const T* in = x + plane * g.h * g.w;
        const k::pool_window pw = k::pool_window_at(g, adaptive, exclusive, oy, ox);
        if (is_max) {  // kernels::window_max: the max, or the window's first NaN
            T m = std::numeric_limits<T>::lowest();
            bool nan = false;
            for (i64 iy = pw.r.lo; iy < pw.r.hi && !nan; ++iy)
                for (i64 ix = pw.c.lo; ix < pw.c.hi; ++ix) {
                    const T v = in[iy * g.w + ix];
                    if (v != v) {
                        m = v;
                        nan = true;
                        break;
                    }
                    m = v > m ? v : m;
                }
            y[e] = m;
        } else {
            T s = T(0);
            for (i64 iy = pw.r.lo; iy < pw.r.hi; ++iy)
                for (i64 ix = pw.c.lo; ix < pw.c.hi; ++ix) s += in[iy * g.w + ix];
            y[e] = pw.divisor > 0 ? s / static_cast<T>(pw.divisor) : T(0);
        }
    }
}

// The outputs along one axis whose windows may hold input position p (a
// superset; the caller checks each with kernels::pool_rows).
struct out_span {
    i64 lo, hi;
};
__device__ inline out_span pool_outputs_near(i64 p, i64 n, i64 outs, i64 k, i64 s, i64 pad0, bool adaptive) {
    i64 lo, hi;
    if (adaptive) {
        lo = p * outs / n - 1;
        hi = (p + 1) * outs / n + 1;
    } else {
        lo = (p + pad0 - k) / s;  // rounds toward 0: at most one below the first
        hi = (p + pad0) / s + 1;
    }
    return {lo < 0 ? 0 : lo, hi > outs ? outs : hi};
}

// Whether input (iy, ix) is where max output (oy, ox)'s gradient goes: the
// first input of the window (row-major) equal to the output (-0 as +0), or
// its first NaN when the output is NaN (kernels::max_pool2d_grad).
template <class T>
__device__ bool max_taken_at(const k::window2d& g, const k::pool_window& pw, const T* in, T m, i64 iy, i64 ix) {
    const bool nan = m != m;
    for (i64 ry = pw.r.lo; ry < pw.r.hi; ++ry)
        for (i64 rx = pw.c.lo; rx < pw.c.hi; ++rx) {
            const T v = in[ry * g.w + rx];
            if (nan ? v != v : v + T(0) == m + T(0)) return ry == iy && rx == ix;
        }
    return false;
}

// X@GRAD: each input element adds the gradients of the outputs whose
// windows give it one, in the order of the outputs (the CPU's order).
template <class T>
__global__ void pool2d_grad_kernel(k::window2d g, i64 planes, bool is_max, bool adaptive, bool exclusive, const T* x,
                                   const T* y, const T* dy, T* dx) {
    const i64 n_in = planes * g.h * g.w;
    for (i64 e = first_index(); e < n_in; e += stride_all()) {
        const i64 ix = e % g.w, iy = e / g.w % g.h, plane = e / (g.w * g.h);
        const T* in = x + plane * g.h * g.w;
        const T* outs = y + plane * g.oh * g.ow;
        const T* douts = dy + plane * g.oh * g.ow;
        const out_span ys = pool_outputs_near(iy, g.h, g.oh, g.kh, g.sh, g.pt, adaptive);
        const out_span xs = pool_outputs_near(ix, g.w, g.ow, g.kw, g.sw, g.pl, adaptive);
        T acc = T(0);
        for (i64 oy = ys.lo; oy < ys.hi; ++oy)
            for (i64 ox = xs.lo; ox < xs.hi; ++ox) {
                const k::pool_window pw = k::pool_window_at(g, adaptive, exclusive, oy, ox);
                if (iy < pw.r.lo || iy >= pw.r.hi || ix < pw.c.lo || ix >= pw.c.hi) continue;
                const i64 o = oy * g.ow + ox;
                if (is_max) {
                    if (max_taken_at(g, pw, in, outs[o], iy, ix)) acc += douts[o];
                } else if (pw.divisor > 0) {
                    acc += douts[o] / static_cast<T>(pw.divisor);
                }
            }
        dx[e] = acc;
    }
}

// ---- batch_norm ---------------------------------------------------------------------------------

// Channel k of X [N, C, hw...]: element r (of n * hw) at this offset.
__device__ inline i64 channel_at(i64 k, i64 r, i64 hw, i64 c) { return (r / hw * c + k) * hw + r % hw; }

template <class T> __device__ double momentum_of(double attr, const void* tensor, bool fp64) {
    if (!tensor) return attr;
    return fp64 ? *static_cast<const double*>(tensor) : static_cast<double>(*static_cast<const float*>(tensor));
}

// A block per channel: its batch moments in double (two passes) unless
// global, Y, and the statistics' outputs (kernels/norm.hpp, cpu/norm.hpp).
template <class T>
__global__ void batch_norm_kernel(batch_norm_args a, const T* x, const T* scale, const T* bias, const T* mean,
                                  const T* var, T* y, T* mean_out, T* var_out, T* saved_mean, T* saved_inv) {
    const i64 count = a.n * a.hw;
    for (i64 k = blockIdx.x; k < a.c; k += gridDim.x) {
        const double m0 = static_cast<double>(mean[k]), v0 = static_cast<double>(var[k]);
        double mu = m0, v = v0;
        if (!a.global) {
            double s = 0;
            for (i64 r = threadIdx.x; r < count; r += blockDim.x) s += static_cast<double>(x[channel_at(k, r, a.hw, a.c)]);
            s = block_fold(s, add_double{});
            mu = count > 0 ? s / static_cast<double>(count) : 0.0;
            double q = 0;
            for (i64 r = threadIdx.x; r < count; r += blockDim.x) {
                const double d = static_cast<double>(x[channel_at(k, r, a.hw, a.c)]) - mu;
                q += d * d;
            }
            q = block_fold(q, add_double{});
            v = count > 0 ? q / static_cast<double>(count) : 0.0;
        }
        const T inv = static_cast<T>(1.0 / sqrt(v + a.eps));
        const bool degenerate = !a.global && count <= 1;
        const T mt = static_cast<T>(mu), sc = inv * scale[k], b = bias[k];
        for (i64 r = threadIdx.x; r < count; r += blockDim.x) {
            const i64 at = channel_at(k, r, a.hw, a.c);
            y[at] = degenerate ? x[at] : (x[at] - mt) * sc + b;
        }
        __syncthreads();  // every thread has read Mean and Variance, which MeanOut and VarianceOut may be
        if (threadIdx.x == 0) {
            const double mom = momentum_of<T>(a.momentum, a.momentum_tensor, a.momentum_fp64);
            const bool update = !a.global && !degenerate;
            if (mean_out) mean_out[k] = static_cast<T>(update ? m0 * mom + mu * (1 - mom) : m0);
            if (var_out) var_out[k] = static_cast<T>(update ? v0 * mom + v * (1 - mom) : v0);
            if (saved_mean) saved_mean[k] = degenerate ? T(0) : mt;
            if (saved_inv) saved_inv[k] = degenerate ? T(0) : inv;
        }
    }
}

// A block per channel: sum(dy) and sum(dy (x - mean)) in double, then the
// gradients (kernels::batch_norm_dx).
template <class T>
__global__ void batch_norm_grad_kernel(batch_norm_args a, const T* x, const T* dy, const T* scale, const T* mean,
                                       const T* stat, T* dx, T* dscale, T* dbias) {
    const i64 count = a.n * a.hw;
    for (i64 k = blockIdx.x; k < a.c; k += gridDim.x) {
        const T inv = a.global ? static_cast<T>(1.0 / sqrt(static_cast<double>(stat[k]) + a.eps)) : stat[k];
        const double m = static_cast<double>(mean[k]);
        double sdy = 0, sdx = 0;
        for (i64 r = threadIdx.x; r < count; r += blockDim.x) {
            const i64 at = channel_at(k, r, a.hw, a.c);
            const double d = static_cast<double>(dy[at]);
            sdy += d;
            sdx += d * (static_cast<double>(x[at]) - m);
        }
        sdy = block_fold(sdy, add_double{});
        sdx = block_fold(sdx, add_double{});
        if (threadIdx.x == 0) {
            if (dbias) dbias[k] = static_cast<T>(sdy);
            if (dscale) dscale[k] = static_cast<T>(sdx * static_cast<double>(inv));
        }
        if (!dx) continue;
        const double cnt = static_cast<double>(count);
        const T sa = scale[k] * inv, mean_dy = static_cast<T>(sdy / cnt), mt = mean[k];
        const T c = static_cast<T>(static_cast<double>(inv) * static_cast<double>(inv) * sdx / cnt);
        for (i64 r = threadIdx.x; r < count; r += blockDim.x) {
            const i64 at = channel_at(k, r, a.hw, a.c);
            dx[at] = a.global ? sa * dy[at] : count == 1 ? dy[at] : sa * (dy[at] - mean_dy - (x[at] - mt) * c);
        }
    }
}

// ---- dropout ------------------------------------------------------------------------------------

// The seed: the value given, the Seed tensor's (INT32 or INT64), or the
// context's state (fresh: advanced by seed_advance_kernel just before).
__device__ inline std::uint64_t seed_of(const dropout_seed& s) {
    switch (s.kind) {
        case dropout_seed::int32_tensor: return static_cast<std::uint64_t>(*static_cast<const std::int32_t*>(s.tensor));
        case dropout_seed::int64_tensor: return static_cast<std::uint64_t>(*static_cast<const std::int64_t*>(s.tensor));
        case dropout_seed::fresh: return k::mix64(*s.state);
        default: return s.value;
    }
}
__global__ void seed_advance_kernel(std::uint64_t* state) { *state += 1; }

template <class T>
__global__ void dropout_kernel(i64 n, const T* x, T* y, bool* mask, double p, T keep_scale, dropout_seed s) {
    const std::uint64_t seed = seed_of(s);
    for (i64 i = first_index(); i < n; i += stride_all()) {
        const bool keep = k::dropout_draw(seed, i) >= p;
        if (mask) mask[i] = keep;
        y[i] = keep ? x[i] * keep_scale : T(0);
    }
}
template <class T> __global__ void dropout_test_kernel(i64 n, const T* x, T* y, bool* mask, T s) {
    for (i64 i = first_index(); i < n; i += stride_all()) {
        y[i] = x[i] * s;
        if (mask) mask[i] = true;
    }
}
template <class T> __global__ void dropout_grad_kernel(i64 n, const bool* mask, const T* dy, T* dx, T keep_scale) {
    for (i64 i = first_index(); i < n; i += stride_all()) dx[i] = mask[i] ? dy[i] * keep_scale : T(0);
}

}  // namespace

// ---- launchers ----------------------------------------------------------------------------------

template <class T>
void conv2d(const k::window2d& g, i64 images, i64 groups, i64 mg, const T* x, const T* f, T* y, stream_t s) {
    const i64 n = images * groups * mg * g.oh * g.ow;
    if (n > 0) conv2d_kernel<<<grid_for(n), block_threads, 0, s>>>(g, images, groups, mg, x, f, y);
}
template <class T>
void conv2d_grad(const k::window2d& g, i64 images, i64 groups, i64 mg, const T* x, const T* f, const T* dy, T* dx,
                 T* df, stream_t s) {
    const i64 n_in = images * groups * g.c * g.h * g.w, n_f = groups * mg * g.c * g.kh * g.kw;
    if (dx && n_in > 0) conv2d_dx_kernel<<<grid_for(n_in), block_threads, 0, s>>>(g, images, groups, mg, f, dy, dx);
    if (df && n_f > 0) conv2d_dw_kernel<<<grid_items(n_f), block_threads, 0, s>>>(g, images, groups, mg, x, dy, df);
}
template <class T>
void pool2d(const k::window2d& g, i64 planes, bool is_max, bool adaptive, bool exclusive, const T* x, T* y,
            stream_t s) {
    const i64 n = planes * g.oh * g.ow;
    if (n > 0) pool2d_kernel<<<grid_for(n), block_threads, 0, s>>>(g, planes, is_max, adaptive, exclusive, x, y);
}
template <class T>
void pool2d_grad(const k::window2d& g, i64 planes, bool is_max, bool adaptive, bool exclusive, const T* x, const T* y,
                 const T* dy, T* dx, stream_t s) {
    const i64 n = planes * g.h * g.w;
    if (n > 0)
        pool2d_grad_kernel<<<grid_for(n), block_threads, 0, s>>>(g, planes, is_max, adaptive, exclusive, x, y, dy, dx);
}
template <class T>
void batch_norm(const batch_norm_args& a, const T* x, const T* scale, const T* bias, const T* mean, const T* var, T* y,
                T* mean_out, T* var_out, T* saved_mean, T* saved_inv, stream_t s) {
    if (a.c > 0)
        batch_norm_kernel<<<grid_items(a.c), block_threads, 0, s>>>(a, x, scale, bias, mean, var, y, mean_out, var_out,
                                                                    saved_mean, saved_inv);
}
template <class T>
void batch_norm_grad(const batch_norm_args& a, const T* x, const T* dy, const T* scale, const T* mean, const T* stat,
                     T* dx, T* dscale, T* dbias, stream_t s) {
    if (a.c > 0)
        batch_norm_grad_kernel<<<grid_items(a.c), block_threads, 0, s>>>(a, x, dy, scale, mean, stat, dx, dscale, dbias);
}
template <class T>
void dropout(i64 n, const T* x, T* y, bool* mask, bool is_test, double p, T scale, const dropout_seed& seed,
             stream_t s) {
    if (!is_test && seed.kind == dropout_seed::fresh) seed_advance_kernel<<<1, 1, 0, s>>>(seed.state);
    if (n == 0) return;
    if (is_test) dropout_test_kernel<<<grid_for(n), block_threads, 0, s>>>(n, x, y, mask, scale);
    else dropout_kernel<<<grid_for(n), block_threads, 0, s>>>(n, x, y, mask, p, scale, seed);
}
template <class T> void dropout_grad(i64 n, const bool* mask, const T* dy, T* dx, T keep_scale, stream_t s) {
    if (n > 0) dropout_grad_kernel<<<grid_for(n), block_threads, 0, s>>>(n, mask, dy, dx, keep_scale);
}

#define DLGRAPH_CUDA_WINDOW(T)                                                                                     \
    template void conv2d<T>(const k::window2d&, i64, i64, i64, const T*, const T*, T*, stream_t);                \
    template void conv2d_grad<T>(const k::window2d&, i64, i64, i64, const T*, const T*, const T*, T*, T*, stream_t); \
    template void pool2d<T>(const k::window2d&, i64, bool, bool, bool, const T*, T*, stream_t);                   \
    template void pool2d_grad<T>(const k::window2d&, i64, bool, bool, bool, const T*, const T*, const T*, T*,     \
                                 stream_t);                                                                        \
    template void batch_norm<T>(const batch_norm_args&, const T*, const T*, const T*, const T*, const T*, T*, T*, \
                                T*, T*, T*, stream_t);                                                             \
    template void batch_norm_grad<T>(const batch_norm_args&, const T*, const T*, const T*, const T*, const T*, T*, \
                                     T*, T*, stream_t);                                                            \
    template void dropout<T>(i64, const T*, T*, bool*, bool, double, T, const dropout_seed&, stream_t);          \
    template void dropout_grad<T>(i64, const bool*, const T*, T*, T, stream_t);
DLGRAPH_CUDA_WINDOW(float)
DLGRAPH_CUDA_WINDOW(double)

}  // namespace dlgraph::cuda_kernels
