// The CPU kernels of the ops that create values (ops/fill.hpp): the kernel
// core's fills (kernels/fill.hpp) on the output tensor, and the host's
// choice of a fresh seed when the `seed` attribute is 0.
#pragma once

#include <cstdint>
#include <random>
#include <type_traits>

#include "dlgraph/kernels/fill.hpp"
#include "dlgraph/op.hpp"
#include "dlgraph/ops/fill.hpp"

namespace dlgraph::cpu_ops {

// `seed`, or a fresh one from std::random_device when it is 0.
inline std::uint64_t seed_or_random(std::int64_t seed) {
    if (seed != 0) return static_cast<std::uint64_t>(seed);
    return (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
}

struct fill_constant_op : ops::fill_constant_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        Tensor& out = c.out(0);
        kernels::fill_constant(out.data<T>(), out.numel(), kernels::convert<T>(c.attr(value).f));
    }
};

struct uniform_random_op : ops::uniform_random_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        Tensor& out = c.out(0);
        kernels::fill_uniform(out.data<T>(), out.numel(), seed_or_random(c.attr(seed).i), c.attr(min).f,
                              c.attr(max).f);
    }
};

struct gaussian_random_op : ops::gaussian_random_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        Tensor& out = c.out(0);
        kernels::fill_gaussian(out.data<T>(), out.numel(), seed_or_random(c.attr(seed).i), c.attr(mean).f,
                               c.attr(std_).f);
    }
};

// Chosen by X's dtype, it fills Out in Out's own dtype.
struct fill_any_like_op : ops::fill_any_like_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        Tensor& out = c.out(0);
        const double v = c.attr(value).f;
        visit_dtype(out.dtype(), [&]<class U>(type_tag<U>) {
            // No FP16 fill: an FP16 Out is refused by inference (or has no
            // kernel, for an FP16 X), so none reaches here.
            if constexpr (!std::is_same_v<U, float16>)
                kernels::fill_constant(out.data<U>(), out.numel(), kernels::convert<U>(v));
        });
    }
};

struct range_op : ops::range_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        Tensor& out = c.out(0);
        kernels::fill_range(out.data<T>(), out.numel(), *c.in(Start).data<T>(), *c.in(Step).data<T>());
    }
};

inline void fill_constant_kernels(OpDef& d) {
    d.kernels = cpu_kernels<fill_constant_op, bool, std::int16_t, std::int32_t, std::int64_t, float, double>();
}
inline void uniform_random_kernels(OpDef& d) { d.kernels = cpu_kernels<uniform_random_op, float, double>(); }
inline void gaussian_random_kernels(OpDef& d) { d.kernels = cpu_kernels<gaussian_random_op, float, double>(); }
inline void range_kernels(OpDef& d) { d.kernels = cpu_kernels<range_op, std::int32_t, std::int64_t, float, double>(); }
inline void fill_any_like_kernels(OpDef& d) {
    d.kernels = cpu_kernels<fill_any_like_op, bool, std::int16_t, std::int32_t, std::int64_t, float, double>();
}

}  // namespace dlgraph::cpu_ops
