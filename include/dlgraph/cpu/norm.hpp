// The CPU kernels of batch normalization (ops/norm.hpp): the kernel core's
// per-channel loops (kernels/norm.hpp), the channels split over the thread
// pool.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "dlgraph/kernels/norm.hpp"
#include "dlgraph/op.hpp"
#include "dlgraph/ops/norm.hpp"
#include "dlgraph/thread_pool.hpp"

namespace dlgraph::cpu_ops {

// X's channels: C, and each channel's layout: channel k is ch.n blocks of
// ch.hw elements from k * ch.hw, ch.stride apart. NCHW: the images' planes;
// NHWC (channels last): single elements C apart, so the same loops serve.
struct channels_of {
    std::int64_t c = 0;
    kernels::channel ch;
    channels_of(const Shape& x, const Attribute* attrs) {
        if (ops::batch_norm_op::channel_axis(attrs, x.rank()) == 1) {
            c = x[1];
            ch.n = x[0];
            ch.hw = ops::dim_product(x, 2, x.rank());
        } else {
            c = x[x.rank() - 1];
            ch.n = ops::dim_product(x, 0, x.rank() - 1);
            ch.hw = 1;
        }
        ch.stride = c * ch.hw;
    }
    // Runs f(channel) for each channel, split over the pool.
    template <class F> void each(F f) const {
        if (c <= 0) return;
        const int tasks = static_cast<int>(std::clamp<std::int64_t>(c * ch.count() / (1 << 15), 1, std::min<std::int64_t>(c, 64)));
        parallel_for(tasks, [&](int t) {
            for (std::int64_t i = c * t / tasks, e = c * (t + 1) / tasks; i < e; ++i) f(i);
        });
    }
};

struct batch_norm_op : ops::batch_norm_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        const channels_of cs(x.shape(), c.attrs);
        const T* xp = x.data<T>();
        T* y = c.out(Y).data<T>();
        const T* scale = c.in(Scale).data<T>();
        const T* bias = c.in(Bias).data<T>();
        const T* mean = c.in(Mean).data<T>();
        const T* var = c.in(Variance).data<T>();
        auto out = [&](int slot) { return c.out_count(slot) ? c.out(slot).template data<T>() : nullptr; };
        T* mean_out = out(MeanOut);
        T* var_out = out(VarianceOut);
        T* saved_mean = out(SavedMean);
        T* saved_inv = out(SavedVariance);
        const double eps = c.attr(epsilon).f;
        const bool global = global_stats(c.attrs);
        double mom = c.attr(momentum).f;
        if (c.in_count(MomentumTensor)) {
            const Tensor& m = c.in(MomentumTensor);
            mom = m.dtype() == DataType::FP64 ? m.data<double>()[0] : static_cast<double>(m.data<float>()[0]);
        }
        const kernels::channel ch = cs.ch;
        cs.each([&](std::int64_t k) {
            const T* xk = xp + k * ch.hw;
            T* yk = y + k * ch.hw;
            double mu, v;
            if (global) {
                mu = static_cast<double>(mean[k]);
                v = static_cast<double>(var[k]);
            } else {
                kernels::channel_moments(xk, ch, mu, v);
            }
            const T inv = static_cast<T>(1.0 / std::sqrt(v + eps));
            // Read Mean and Variance before writing: MeanOut is usually Mean itself.
            const double m0 = static_cast<double>(mean[k]), v0 = static_cast<double>(var[k]);
            // At most one value per channel: Paddle passes X through, zeroes
            // the saved statistics and updates no moving one.
            const bool degenerate = !global && ch.count() <= 1;
            if (degenerate) std::copy(xk, xk + ch.count(), yk);
            else kernels::normalize_channel(xk, yk, ch, static_cast<T>(mu), inv, scale[k], bias[k]);
            const bool update = !global && !degenerate;
            if (mean_out) mean_out[k] = static_cast<T>(update ? m0 * mom + mu * (1 - mom) : m0);
            if (var_out) var_out[k] = static_cast<T>(update ? v0 * mom + v * (1 - mom) : v0);
            if (saved_mean) saved_mean[k] = degenerate ? T(0) : static_cast<T>(mu);
            if (saved_inv) saved_inv[k] = degenerate ? T(0) : inv;
        });
    }
};

struct batch_norm_grad_op : ops::batch_norm_grad_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        const channels_of cs(x.shape(), c.attrs);
        const bool global = global_stats(c.attrs);
        const double eps = c.attr(ops::batch_norm_op::epsilon).f;
        const T* xp = x.data<T>();
        const T* dy = c.in(DY).data<T>();
        const T* scale = c.in(Scale).data<T>();
        const T* mean = c.in(global ? Mean : SavedMean).data<T>();
        const T* stat = c.in(global ? Variance : SavedVariance).data<T>();  // a variance, or 1 / std
        T* dx = c.out_count(DX) ? c.out(DX).data<T>() : nullptr;
        T* dscale = c.out_count(DScale) ? c.out(DScale).data<T>() : nullptr;
        T* dbias = c.out_count(DBias) ? c.out(DBias).data<T>() : nullptr;
        const kernels::channel ch = cs.ch;
        cs.each([&](std::int64_t k) {
            const T* xk = xp + k * ch.hw;
            const T* dyk = dy + k * ch.hw;
            const T inv = global ? static_cast<T>(1.0 / std::sqrt(static_cast<double>(stat[k]) + eps)) : stat[k];
            double sum_dy, sum_dy_xmu;
            kernels::channel_grad_sums(xk, dyk, ch, mean[k], sum_dy, sum_dy_xmu);
            if (dbias) dbias[k] = static_cast<T>(sum_dy);
            if (dscale) dscale[k] = static_cast<T>(sum_dy_xmu * static_cast<double>(inv));
            if (!dx) return;
            T* dxk = dx + k * ch.hw;
            if (global) {
                const T a = scale[k] * inv;
                kernels::for_each_in_channel(ch, [&](std::int64_t i) { dxk[i] = a * dyk[i]; });
            } else if (ch.count() == 1) {
                dxk[0] = dyk[0];
            } else {
                kernels::batch_norm_dx(xk, dyk, dxk, ch, mean[k], inv, scale[k], sum_dy, sum_dy_xmu);
            }
        });
    }
};

// Rows [0, rows) of a layer norm, split over the pool in runs of whole
// rows (each row's result depends only on the row).
template <class F> void each_row(std::int64_t rows, std::int64_t n, F f) {
    if (rows <= 0) return;
    const int tasks = static_cast<int>(std::clamp<std::int64_t>(rows * n / (1 << 15), 1, std::min<std::int64_t>(rows, 64)));
    parallel_for(tasks, [&](int t) {
        for (std::int64_t r = rows * t / tasks, e = rows * (t + 1) / tasks; r < e; ++r) f(r);
    });
}

// X as layer_norm's rows, split at begin_norm_axis. A struct, not a pair: the
// kernels' lambdas capture both, and clang 14 cannot capture structured bindings.
struct Rows {
    std::int64_t rows, n;
};
inline Rows rows_of(const Shape& x, std::int64_t begin_norm_axis) {
    const int a = static_cast<int>(begin_norm_axis);
    return {ops::dim_product(x, 0, a), ops::dim_product(x, a, x.rank())};
}

struct layer_norm_op : ops::layer_norm_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Rows split = rows_of(x.shape(), c.attr(begin_norm_axis).i);
        const std::int64_t rows = split.rows, n = split.n;
        const T* xp = x.data<T>();
        T* y = c.out(Y).data<T>();
        const T* scale = c.in_count(Scale) ? c.in(Scale).data<T>() : nullptr;
        const T* bias = c.in_count(Bias) ? c.in(Bias).data<T>() : nullptr;
        T* mean = c.out_count(Mean) ? c.out(Mean).data<T>() : nullptr;
        T* var = c.out_count(Variance) ? c.out(Variance).data<T>() : nullptr;
        const double eps = c.attr(epsilon).f;
        each_row(rows, n, [&](std::int64_t r) {
            T m, v;
            kernels::layer_norm_row(xp + r * n, y + r * n, n, scale, bias, eps, m, v);
            if (mean) mean[r] = m;
            if (var) var[r] = v;
        });
    }
};

struct layer_norm_grad_op : ops::layer_norm_grad_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Rows split = rows_of(x.shape(), c.attr(begin_norm_axis).i);
        const std::int64_t rows = split.rows, n = split.n;
        const T* xp = x.data<T>();
        const T* dy = c.in(DY).data<T>();
        const T* scale = c.in_count(Scale) ? c.in(Scale).data<T>() : nullptr;
        const T* mean = c.in(Mean).data<T>();
        const T* var = c.in(Variance).data<T>();
        const double eps = c.attr(epsilon).f;
        if (c.out_count(DX)) {
            T* dx = c.out(DX).data<T>();
            each_row(rows, n, [&](std::int64_t r) {
                kernels::layer_norm_dx_row(xp + r * n, dy + r * n, scale, mean[r], var[r], eps, dx + r * n, n);
            });
        }
        T* ds = c.out_count(DScale) ? c.out(DScale).data<T>() : nullptr;
        T* db = c.out_count(DBias) ? c.out(DBias).data<T>() : nullptr;
        if (ds || db) kernels::layer_norm_param_grads(xp, dy, mean, var, eps, ds, db, rows, n);
    }
};

inline void layer_norm_kernels(OpDef& d) { d.kernels = cpu_kernels<layer_norm_op, float, double>(); }
inline void layer_norm_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<layer_norm_grad_op, float, double>(); }

inline void batch_norm_kernels(OpDef& d) { d.kernels = cpu_kernels<batch_norm_op, float, double>(); }
inline void batch_norm_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<batch_norm_grad_op, float, double>(); }

}  // namespace dlgraph::cpu_ops
