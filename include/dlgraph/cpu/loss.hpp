// The CPU kernels of ops/loss.hpp on the kernel core (kernels/loss.hpp):
// an X outside [0, 1] is recorded as the step's fault. And each op's
// kernel table.
#pragma once

#include "dlgraph/kernels/loss.hpp"
#include "dlgraph/op.hpp"
#include "dlgraph/ops/loss.hpp"

namespace dlgraph::cpu_ops {

struct bce_loss_op : ops::bce_loss_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        c.fault->raise(kernels::bce_loss(c.in(X).data<T>(), c.in(Label).data<T>(), c.in(X).numel(), c.out(0).data<T>()));
    }
};
struct bce_loss_grad_op : ops::bce_loss_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        kernels::bce_loss_grad(c.in(X).data<T>(), c.in(Label).data<T>(), c.in(DOut).data<T>(), c.in(X).numel(),
                               c.out(0).data<T>());
    }
};

inline void bce_loss_kernels(OpDef& d) { d.kernels = cpu_kernels<bce_loss_op, float, double>(); }
inline void bce_loss_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<bce_loss_grad_op, float, double>(); }

struct sigmoid_ce_op : ops::sigmoid_ce_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        kernels::sigmoid_cross_entropy_with_logits(c.in(X).data<T>(), c.in(Label).data<T>(), c.in(X).numel(),
                                                   c.attr(ignore_index).i, c.attr(normalize).b, c.out(0).data<T>());
    }
};
struct sigmoid_ce_grad_op : ops::sigmoid_ce_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        kernels::sigmoid_cross_entropy_with_logits_grad(c.in(X).data<T>(), c.in(Label).data<T>(), c.in(DOut).data<T>(),
                                                        c.in(X).numel(), c.attr(ignore_index).i, c.attr(normalize).b,
                                                        c.out(0).data<T>());
    }
};
struct huber_loss_op : ops::huber_loss_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        kernels::huber_loss(c.in(X).data<T>(), c.in(Y).data<T>(), c.in(X).numel(), static_cast<T>(c.attr(delta).f),
                            c.out(Residual).data<T>(), c.out(Out).data<T>());
    }
};
struct huber_loss_grad_op : ops::huber_loss_grad_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        kernels::huber_loss_grad(c.in(Residual).data<T>(), c.in(DOut).data<T>(), c.in(DOut).numel(),
                                 static_cast<T>(c.attr(ops::huber_loss_op::delta).f),
                                 c.out_count(DX) ? c.out(DX).data<T>() : nullptr, c.out_count(DY) ? c.out(DY).data<T>() : nullptr);
    }
};
// An optional input's data, or null.
template <class T> const T* optional_in(const KernelContext& c, int slot) { return c.in_count(slot) ? c.in(slot).data<T>() : nullptr; }
struct smooth_l1_loss_op : ops::smooth_l1_loss_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        const std::int64_t rows = x.shape()[0], cols = rows ? x.numel() / rows : 0;
        const T s = static_cast<T>(c.attr(sigma).f);
        kernels::smooth_l1_loss(x.data<T>(), c.in(Y).data<T>(), optional_in<T>(c, InsideWeight), optional_in<T>(c, OutsideWeight),
                                rows, cols, s * s, c.out(Diff).data<T>(), c.out(Out).data<T>());
    }
};
struct smooth_l1_loss_grad_op : ops::smooth_l1_loss_grad_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& d = c.in(Diff);
        const std::int64_t rows = d.shape()[0], cols = rows ? d.numel() / rows : 0;
        const T s = static_cast<T>(c.attr(ops::smooth_l1_loss_op::sigma).f);
        kernels::smooth_l1_loss_grad(optional_in<T>(c, InsideWeight), optional_in<T>(c, OutsideWeight), d.data<T>(),
                                     c.in(DOut).data<T>(), rows, cols, s * s, c.out_count(DX) ? c.out(DX).data<T>() : nullptr,
                                     c.out_count(DY) ? c.out(DY).data<T>() : nullptr);
    }
};
struct kldiv_loss_op : ops::kldiv_loss_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        kernels::kldiv_loss(x.data<T>(), c.in(Target).data<T>(), x.numel(), x.rank() ? x.shape()[0] : 1,
                            reduction_of(nullptr, c.attr(reduction).s), c.out(0).data<T>());
    }
};
struct kldiv_loss_grad_op : ops::kldiv_loss_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        kernels::kldiv_loss_grad(c.in(Target).data<T>(), c.in(DLoss).data<T>(), x.numel(), x.rank() ? x.shape()[0] : 1,
                                 reduction_of(nullptr, c.attr(reduction).s), c.out(0).data<T>());
    }
};

inline void sigmoid_cross_entropy_with_logits_kernels(OpDef& d) { d.kernels = cpu_kernels<sigmoid_ce_op, float, double>(); }
inline void sigmoid_cross_entropy_with_logits_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<sigmoid_ce_grad_op, float, double>(); }
inline void huber_loss_kernels(OpDef& d) { d.kernels = cpu_kernels<huber_loss_op, float, double>(); }
inline void huber_loss_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<huber_loss_grad_op, float, double>(); }
inline void smooth_l1_loss_kernels(OpDef& d) { d.kernels = cpu_kernels<smooth_l1_loss_op, float, double>(); }
inline void smooth_l1_loss_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<smooth_l1_loss_grad_op, float, double>(); }
inline void kldiv_loss_kernels(OpDef& d) { d.kernels = cpu_kernels<kldiv_loss_op, float, double>(); }
inline void kldiv_loss_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<kldiv_loss_grad_op, float, double>(); }

}  // namespace dlgraph::cpu_ops
