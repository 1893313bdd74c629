// The CPU kernels of ops/eval_ops.hpp: top_k and accuracy read their tensors
// and attributes and run the kernel core (kernels/eval.hpp); a k the data
// cannot satisfy is recorded as the step's fault. And each op's kernel table.
#pragma once

#include "dlgraph/kernels/eval.hpp"
#include "dlgraph/op.hpp"
#include "dlgraph/ops/eval_ops.hpp"
#include "dlgraph/ops/op_util.hpp"

namespace dlgraph::cpu_ops {

struct top_k_op : ops::top_k_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Shape& xs = x.shape();
        const std::int64_t n = xs[xs.rank() - 1], rows = ops::dim_product(xs, 0, xs.rank() - 1);
        // Inference refuses a k above the last dim; the core's check guards
        // the heap against a stale plan.
        c.fault->raise(kernels::top_k(x.data<T>(), c.out(Out).data<T>(), c.out(Indices).data<std::int64_t>(), rows, n,
                                      c.attr(k).i));
    }
};

struct accuracy_op : ops::accuracy_op {
    // Out's values are not read (its dtype selects the kernel, as in Paddle).
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& ind = c.in(Indices);
        kernels::accuracy(ind.data<std::int64_t>(), c.in(Label).data<std::int64_t>(), ind.shape()[0], ind.shape()[1],
                          c.out(Accuracy).data<float>(), c.out(Correct).data<std::int32_t>(),
                          c.out(Total).data<std::int32_t>());
    }
};

inline void top_k_kernels(OpDef& d) { d.kernels = cpu_kernels<top_k_op, float, double, std::int32_t, std::int64_t>(); }
inline void accuracy_kernels(OpDef& d) {
    d.kernels = cpu_kernels<accuracy_op, float, double, std::int32_t, std::int64_t>();
}

}  // namespace dlgraph::cpu_ops
