// The CPU kernels of ops/softmax.hpp: each reads its tensors and attributes,
// runs the kernel core (kernels/softmax.hpp) with the row sweeps split over
// the thread pool when a row is long, and records a bad label as the step's
// fault; and each op's kernel table.
#pragma once

#include "dlgraph/cpu/elementwise.hpp"
#include "dlgraph/kernels/softmax.hpp"
#include "dlgraph/op.hpp"
#include "dlgraph/ops/op_util.hpp"
#include "dlgraph/ops/softmax.hpp"

namespace dlgraph::cpu_ops {

// The core's row sweeps on the thread pool: a row longer than
// loop_per_thread elements per thread is split at whole vectors, which
// computes every element as serial_loops does.
struct pool_loops {
    static constexpr bool nothrow = false;  // starting the pool may throw
    template <class T, class F> void unary(std::int64_t n, const T* x, T* z, F f) const { unary_loop(n, x, z, f); }
    template <class T, class F> void binary(std::int64_t n, const T* x, int sx, const T* y, int sy, T* z, F f) const {
        binary_loop(n, x, sx, y, sy, z, f);
    }
};

namespace softmax_detail {
// Rows and classes of a loss's [..., d] input.
struct loss_rows {
    std::int64_t rows, d;
};
inline loss_rows rows_of(const Shape& s) { return {ops::dim_product(s, 0, s.rank() - 1), s[s.rank() - 1]}; }
}  // namespace softmax_detail

struct softmax_op : ops::softmax_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        if (x.numel() == 0) return;
        const auto g = ops::split_at_axis(x.shape(), c.attr(axis).i);
        kernels::softmax(x.data<T>(), c.out(0).data<T>(), g.outer, g.d, g.inner, pool_loops{});
    }
};

struct softmax_grad_op : ops::softmax_grad_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& out = c.in(Out);
        if (out.numel() == 0) return;
        const auto g = ops::split_at_axis(out.shape(), c.attr(axis).i);
        kernels::softmax_grad(out.data<T>(), c.in(DOut).data<T>(), c.out(0).data<T>(), g.outer, g.d, g.inner,
                              pool_loops{});
    }
};

struct log_softmax_op : ops::softmax_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        if (x.numel() == 0) return;
        const auto g = ops::split_at_axis(x.shape(), c.attr(axis).i);
        kernels::log_softmax(x.data<T>(), c.out(0).data<T>(), g.outer, g.d, g.inner, pool_loops{});
    }
};

struct log_softmax_grad_op : ops::softmax_grad_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& out = c.in(Out);
        if (out.numel() == 0) return;
        const auto g = ops::split_at_axis(out.shape(), c.attr(axis).i);
        kernels::log_softmax_grad(out.data<T>(), c.in(DOut).data<T>(), c.out(0).data<T>(), g.outer, g.d, g.inner,
                                  pool_loops{});
    }
};

struct cross_entropy_op : ops::cross_entropy_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Tensor& label = c.in(Label);
        const auto g = softmax_detail::rows_of(x.shape());
        T* y = c.out(0).data<T>();
        if (c.attr(soft_label).b) return kernels::cross_entropy_soft(x.data<T>(), label.data<T>(), y, g.rows, g.d);
        c.fault->raise(kernels::cross_entropy_hard(x.data<T>(), label.data<std::int64_t>(), y, g.rows, g.d,
                                                   c.attr(ignore_index).i));
    }
};

struct cross_entropy_grad_op : ops::cross_entropy_grad_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        const auto g = softmax_detail::rows_of(x.shape());
        const T* dy = c.in(DY).data<T>();
        T* dx = c.out(0).data<T>();
        if (c.attr(soft_label).b)
            return kernels::cross_entropy_grad_soft(x.data<T>(), c.in(Label).data<T>(), dy, dx, g.rows, g.d);
        c.fault->raise(
            kernels::cross_entropy_grad_hard(x.data<T>(), c.in(Label).data<std::int64_t>(), dy, dx, g.rows, g.d,
                                             c.attr(ignore_index).i));
    }
};

struct softmax_with_cross_entropy_op : ops::softmax_with_cross_entropy_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(Logits);
        const Tensor& label = c.in(Label);
        const auto g = softmax_detail::rows_of(x.shape());
        T* sm = c.out(Softmax).data<T>();
        T* loss = c.out(Loss).data<T>();
        if (c.attr(soft_label).b)
            return kernels::softmax_with_cross_entropy_soft(x.data<T>(), label.data<T>(), sm, loss, g.rows, g.d,
                                                            pool_loops{});
        c.fault->raise(kernels::softmax_with_cross_entropy_hard(x.data<T>(), label.data<std::int64_t>(), sm, loss,
                                                                g.rows, g.d, pool_loops{}, c.attr(ignore_index).i));
    }
};

struct softmax_with_cross_entropy_grad_op : ops::softmax_with_cross_entropy_grad_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& sm = c.in(Softmax);
        const auto g = softmax_detail::rows_of(sm.shape());
        const T* dl = c.in(DLoss).data<T>();
        T* dx = c.out(0).data<T>();
        if (c.attr(soft_label).b)
            return kernels::softmax_with_cross_entropy_grad_soft(c.in(Label).data<T>(), sm.data<T>(), dl, dx, g.rows,
                                                                 g.d);
        c.fault->raise(kernels::softmax_with_cross_entropy_grad_hard(c.in(Label).data<std::int64_t>(), sm.data<T>(),
                                                                     dl, dx, g.rows, g.d, pool_loops{},
                                                                     c.attr(ignore_index).i));
    }
};

inline void softmax_kernels(OpDef& d) { d.kernels = cpu_kernels<softmax_op, float, double>(); }
inline void softmax_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<softmax_grad_op, float, double>(); }
inline void log_softmax_kernels(OpDef& d) { d.kernels = cpu_kernels<log_softmax_op, float, double>(); }
inline void log_softmax_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<log_softmax_grad_op, float, double>(); }
inline void cross_entropy_kernels(OpDef& d) { d.kernels = cpu_kernels<cross_entropy_op, float, double>(); }
inline void cross_entropy_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<cross_entropy_grad_op, float, double>(); }
inline void softmax_with_cross_entropy_kernels(OpDef& d) {
    d.kernels = cpu_kernels<softmax_with_cross_entropy_op, float, double>();
}
inline void softmax_with_cross_entropy_grad_kernels(OpDef& d) {
    d.kernels = cpu_kernels<softmax_with_cross_entropy_grad_op, float, double>();
}

}  // namespace dlgraph::cpu_ops
