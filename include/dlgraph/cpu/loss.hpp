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

}  // namespace dlgraph::cpu_ops
