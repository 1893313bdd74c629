// The CPU kernels of ops/logic.hpp: comparisons and logical ops over
// broadcast operands (cpu/elementwise.hpp's runs) into BOOL, logical_not,
// where and its gradient, on the kernel core (kernels/logic.hpp); and each
// op's kernel table.
#pragma once

#include <cstdint>

#include "dlgraph/cpu/elementwise.hpp"
#include "dlgraph/kernels/logic.hpp"
#include "dlgraph/op.hpp"
#include "dlgraph/ops/logic.hpp"

namespace dlgraph::cpu_ops {

// A comparison (with Paddle's axis attribute) or a logical op (without).
template <class Fn, bool WithAxis = true> struct compare_op : ops::compare_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const std::int64_t a = WithAxis ? c.attr(axis).i : -1;
        broadcast_each<T, bool>(c.in(X), c.in(Y), a, c.out(0),
                                [](std::int64_t n, const T* x, int sx, const T* y, int sy, bool* z) {
                                    kernels::compare_run(n, x, sx, y, sy, z, Fn{});
                                });
    }
    static void attach(OpDef& d) {
        d.kernels = cpu_kernels<compare_op, bool, std::int32_t, std::int64_t, float, double>();
    }
};

struct logical_not_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        kernels::logical_not(c.in(0).data<T>(), c.in(0).numel(), c.out(0).data<bool>());
    }
};

struct where_op : ops::where_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        kernels::where(c.in(Condition).data<bool>(), c.in(X).data<T>(), c.in(Y).data<T>(), c.in(X).numel(),
                       c.out(0).data<T>());
    }
};

struct where_grad_op : ops::where_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        T* dx = c.out_count(DX) ? c.out(DX).data<T>() : nullptr;
        T* dy = c.out_count(DY) ? c.out(DY).data<T>() : nullptr;
        kernels::where_grad(c.in(Condition).data<bool>(), c.in(DOut).data<T>(), c.in(DOut).numel(), dx, dy);
    }
};

inline void less_than_kernels(OpDef& d) { compare_op<kernels::less_than_fn>::attach(d); }
inline void less_equal_kernels(OpDef& d) { compare_op<kernels::less_equal_fn>::attach(d); }
inline void greater_than_kernels(OpDef& d) { compare_op<kernels::greater_than_fn>::attach(d); }
inline void greater_equal_kernels(OpDef& d) { compare_op<kernels::greater_equal_fn>::attach(d); }
inline void equal_kernels(OpDef& d) { compare_op<kernels::equal_fn>::attach(d); }
inline void not_equal_kernels(OpDef& d) { compare_op<kernels::not_equal_fn>::attach(d); }
inline void logical_and_kernels(OpDef& d) { compare_op<kernels::logical_and_fn, false>::attach(d); }
inline void logical_or_kernels(OpDef& d) { compare_op<kernels::logical_or_fn, false>::attach(d); }
inline void logical_xor_kernels(OpDef& d) { compare_op<kernels::logical_xor_fn, false>::attach(d); }
inline void logical_not_kernels(OpDef& d) {
    d.kernels = cpu_kernels<logical_not_op, bool, std::int32_t, std::int64_t, float, double>();
}
inline void where_kernels(OpDef& d) { d.kernels = cpu_kernels<where_op, float, double, std::int32_t, std::int64_t>(); }
inline void where_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<where_grad_op, float, double>(); }

}  // namespace dlgraph::cpu_ops
