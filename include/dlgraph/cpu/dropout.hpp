// The CPU kernels of dropout and increment (ops/dropout.hpp): the mask's
// draws from the kernel core (kernels/dropout.hpp), split over the thread
// pool like an element-wise loop (a draw depends on its index alone).
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>

#include "dlgraph/cpu/elementwise.hpp"
#include "dlgraph/kernels/dropout.hpp"
#include "dlgraph/op.hpp"
#include "dlgraph/ops/dropout.hpp"

namespace dlgraph::cpu_ops {

struct dropout_op : ops::dropout_op {
    // The Seed input's value; else the seed attribute with fix_seed; else a
    // fresh seed (a different mask each run, as Paddle's global generator).
    static std::uint64_t seed_of(const KernelContext& c) {
        if (c.in_count(Seed)) {
            const Tensor& s = c.in(Seed);
            return static_cast<std::uint64_t>(s.dtype() == DataType::INT64 ? s.data<std::int64_t>()[0]
                                                                           : s.data<std::int32_t>()[0]);
        }
        if (c.attr(fix_seed).b) return static_cast<std::uint64_t>(c.attr(seed).i);
        static thread_local std::mt19937_64 fresh{std::random_device{}()};
        return fresh();
    }

    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        const T* xp = x.data<T>();
        T* y = c.out(Out).data<T>();
        bool* mask = c.out_count(Mask) ? c.out(Mask).data<bool>() : nullptr;
        const double p = c.attr(dropout_prob).f;
        const std::int64_t n = x.numel();
        if (c.attr(is_test).b) {  // the expected value: x * (1 - p), or x when training upscaled
            const T s = upscale(c.attrs) ? T(1) : static_cast<T>(1 - p);
            for (std::int64_t i = 0; i < n; ++i) y[i] = xp[i] * s;
            if (mask) std::fill(mask, mask + n, true);
            return;
        }
        const T keep = !upscale(c.attrs) ? T(1) : p < 1 ? static_cast<T>(1 / (1 - p)) : T(0);
        const std::uint64_t seed = seed_of(c);
        split_loop<T>(n, [&](std::int64_t b, std::int64_t e) { kernels::dropout_train(xp, y, mask, b, e, seed, p, keep); });
    }
};

struct dropout_grad_op : ops::dropout_grad_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const double p = c.attr(ops::dropout_op::dropout_prob).f;
        const T keep = !ops::dropout_op::upscale(c.attrs) ? T(1) : p < 1 ? static_cast<T>(1 / (1 - p)) : T(0);
        const bool* mask = c.in(Mask).data<bool>();
        const T* dy = c.in(DOut).data<T>();
        T* dx = c.out(0).data<T>();
        split_loop<T>(c.in(DOut).numel(), [&](std::int64_t b, std::int64_t e) { kernels::dropout_grad(mask, dy, dx, b, e, keep); });
    }
};

// Defined for every step and X: an integer counter wraps, and a step out of
// its range saturates (as the CUDA kernel computes it).
struct increment_op : ops::increment_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        c.out(0).data<T>()[0] = kernels::wrap_add(c.in(X).data<T>()[0], kernels::convert<T>(c.attr(step).f));
    }
};

inline void dropout_kernels(OpDef& d) { d.kernels = cpu_kernels<dropout_op, float, double>(); }
inline void dropout_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<dropout_grad_op, float, double>(); }
inline void increment_kernels(OpDef& d) {
    d.kernels = cpu_kernels<increment_op, std::int32_t, std::int64_t, float, double>();
}

}  // namespace dlgraph::cpu_ops
