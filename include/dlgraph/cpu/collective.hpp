// The CPU kernels of the collective ops (ops/collective.hpp): X is copied to
// Out unless the program writes X in place (Out names X, as Paddle's
// programs do), then the communicator the session gave the step
// (KernelContext::comm) does the rest in Out.
#pragma once

#include <cstdint>
#include <string>

#include "dlgraph/cpu/shape_ops.hpp"
#include "dlgraph/comm.hpp"
#include "dlgraph/ops/collective.hpp"

namespace dlgraph::cpu_ops {

// Out = X, unless they share memory; returns Out's elements.
template <class T> T* collective_out(const KernelContext& c) {
    const Tensor& x = c.in(0);
    T* out = c.out(0).data<T>();
    if (static_cast<const void*>(out) != x.raw()) kernels::copy_elements(x.data<T>(), x.numel(), out);
    return out;
}

template <ReduceOp R> struct c_allreduce_op : ops::c_allreduce_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        c.comm->all_reduce(collective_out<T>(c), c.out(0).numel(), dtype_of<T>, R, ops::allreduce_type(R));
    }
};

struct c_broadcast_op : ops::c_broadcast_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        c.comm->broadcast(collective_out<T>(c), c.out(0).numel(), dtype_of<T>, static_cast<int>(c.attr(root).i),
                          "c_broadcast");
    }
};

struct c_allgather_op : ops::c_allgather_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        if (c.attr(nranks).i != c.comm->size())
            throw comm_error("dlgraph.comm.size", "c_allgather: nranks is " + std::to_string(c.attr(nranks).i) +
                                                      " but the communicator (" + c.comm->describe() + ") has " +
                                                      std::to_string(c.comm->size()) + " ranks");
        const Tensor& x = c.in(X);
        c.comm->all_gather(x.data<T>(), x.numel(), dtype_of<T>, c.out(0).data<T>(), "c_allgather");
    }
};

template <ReduceOp R> KernelTable c_allreduce_kernels() {
    return cpu_kernels<c_allreduce_op<R>, float, double, std::int32_t, std::int64_t>();
}
inline void c_allreduce_sum_kernels(OpDef& d) { d.kernels = c_allreduce_kernels<ReduceOp::sum>(); }
inline void c_allreduce_max_kernels(OpDef& d) { d.kernels = c_allreduce_kernels<ReduceOp::max>(); }
inline void c_allreduce_min_kernels(OpDef& d) { d.kernels = c_allreduce_kernels<ReduceOp::min>(); }
inline void c_allreduce_prod_kernels(OpDef& d) { d.kernels = c_allreduce_kernels<ReduceOp::prod>(); }
inline void c_broadcast_kernels(OpDef& d) { d.kernels = copy_kernels<c_broadcast_op>(); }
inline void c_allgather_kernels(OpDef& d) { d.kernels = copy_kernels<c_allgather_op>(); }

}  // namespace dlgraph::cpu_ops
