// A custom operator from user code: Mish (Misra 2019), Out = X * tanh(softplus(X)),
// with its gradient op, defined outside dlgraph and registered at start-up
// (mish.cpp). Everything an op needs is here: slots, shape inference, the
// CPU kernels (on the kernel core: one functor for scalars, SIMD vectors
// and device threads), the gradient (a GradSpec naming mish_grad), the
// fusion entries (both ops are element-wise), and a builder function.
#pragma once

#include <dlgraph/cpu/elementwise.hpp>  // cpu_ops::unary_loop, fusible_of
#include <dlgraph/dlgraph.hpp>

namespace mish_op {

using namespace dlgraph;
namespace vm = kernels::vm;

// The math, once for float, double and their SIMD batches.
struct mish_fn {
    // softplus(x) = log(1 + e^x), computed without overflow.
    template <class V> DLGRAPH_HD static V softplus(V x) { return vm::max(x, V(0)) + vm::log(V(1) + vm::exp(-vm::abs(x))); }
    template <class V> DLGRAPH_HD V operator()(V x) const { return x * vm::tanh(softplus(x)); }
    // d/dx x tanh(sp(x)) = tanh(sp) + x (1 - tanh(sp)^2) sigmoid(x).
    template <class V> DLGRAPH_HD V grad(V x, V, V dout) const {
        const V t = vm::tanh(softplus(x));
        const V sig = V(1) / (V(1) + vm::exp(-x));
        return dout * (t + x * (V(1) - t * t) * sig);
    }
};

// Out has X's dtype and shape; FP32 and FP64 only.
inline void mish_infer(const InferContext& c) {
    c.dtype_in(0, {DataType::FP32, DataType::FP64});
    c.set(0, c.dtype(0), c.shape(0));
}

struct mish_kernel {
    template <class T> static void compute(cpu, const KernelContext& c) {
        // The library's threaded, vectorized loop over the functor.
        cpu_ops::unary_loop(c.in(0).numel(), c.in(0).data<T>(), c.out(0).data<T>(), mish_fn{});
    }
};

inline OpDef mish_def() {
    OpDef d{"mish", {{"X"}}, {{"Out"}}, {}, &mish_infer};
    d.doc = "Out = X * tanh(softplus(X)) (a custom op: examples/custom_op)";
    d.kernels = cpu_kernels<mish_kernel, float, double>();
    // The usual grad op: mish_grad reads X, Out and Out@GRAD, writes X@GRAD.
    d.grad_spec = {"mish_grad", {"X"}, {"Out"}, {"X"}};
    // Element-wise: the session may fuse it with its neighbours.
    d.fusible = cpu_ops::fusible_of<mish_fn, 1>();
    return d;
}

// mish_grad: X, Out, Out@GRAD -> X@GRAD, all of X's shape.
inline void mish_grad_infer(const InferContext& c) {
    c.same_dtype({0, 1, 2});
    for (int slot : {1, 2})
        if (!(c.shape(slot) == c.shape(0)))
            c.fail("dlgraph.shape.grad", c.slot_name(slot) + " is " + to_string(c.shape(slot)) + " but X is " +
                                             to_string(c.shape(0)));
    c.set(0, c.dtype(0), c.shape(0));
}

struct mish_grad_kernel {
    template <class T> static void compute(cpu, const KernelContext& c) {
        kernels::unary_grad_loop(c.in(0).numel(), c.in(0).data<T>(), c.in(1).data<T>(), c.in(2).data<T>(),
                                 c.out(0).data<T>(), mish_fn{});
    }
};

inline OpDef mish_grad_def() {
    OpDef d{"mish_grad", {{"X"}, {"Out"}, {"Out@GRAD"}}, {{"X@GRAD"}}, {}, &mish_grad_infer};
    d.doc = "X@GRAD of mish";
    d.kernels = cpu_kernels<mish_grad_kernel, float, double>();
    // Element-wise too: X@GRAD = g(Out@GRAD, X), so a chain of gradients
    // (mish_grad after another activation's) runs as one pass. The block
    // reads input slots 2 (Out@GRAD) and 0 (X); Out is not read.
    d.fusible = cpu_ops::fusible_of<kernels::grad_by_fn<mish_fn>, 2>();
    d.fusible.slots = {2, 0};
    d.fusible.axis_attr = -1;  // no `axis` attribute: same-shape operands
    return d;
}

}  // namespace mish_op

namespace dlgraph {
// The builder function: y = mish(x).
template <element_type T> Var<T> mish(const Var<T>& x) { return apply_op<T>("mish", {{"X", x}}); }
}  // namespace dlgraph
