// The CPU kernels of ops/optimizers.hpp: each reads the learning rate and its
// attributes as plain values and runs the kernel core's update
// (kernels/optimizers.hpp) over the parameter, sgd split over the thread pool
// when long; and each op's kernel table.
#pragma once

#include "dlgraph/cpu/elementwise.hpp"
#include "dlgraph/kernels/optimizers.hpp"
#include "dlgraph/op.hpp"
#include "dlgraph/ops/optimizers.hpp"

namespace dlgraph::cpu_ops {

struct sgd_op : ops::sgd_op {
    // Ranges start on whole vectors (split_loop), so every element is
    // computed as on one thread.
    template <class T> static void compute(cpu, const KernelContext& c) {
        const T lr = *c.in(LearningRate).template data<T>();
        const T* g = c.in(Grad).template data<T>();
        const T* p = c.in(Param).template data<T>();
        T* out = c.out(0).template data<T>();
        split_loop<T>(c.in(Param).numel(),
                      [&](std::int64_t b, std::int64_t e) { kernels::sgd(e - b, p + b, g + b, lr, out + b); });
    }
};

// momentum and adam too: one pass over each parameter, split over the
// thread pool when long (their vector bodies and scalar tails give the same
// bits, so the cuts change none).
struct momentum_op : ops::momentum_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const T *p = c.in(Param).template data<T>(), *g = c.in(Grad).template data<T>();
        const T* v = c.in(Velocity).template data<T>();
        T *po = c.out(ParamOut).template data<T>(), *vo = c.out(VelocityOut).template data<T>();
        const T lr = *c.in(LearningRate).template data<T>(), m = static_cast<T>(c.attr(mu).f);
        const bool nesterov = c.attr(use_nesterov).b;
        split_loop<T>(c.in(Param).numel(), [&](std::int64_t b, std::int64_t e) {
            kernels::momentum(e - b, p + b, g + b, v + b, lr, m, nesterov, po + b, vo + b);
        });
    }
};

// adam, and adamw (W): its decay where with_decay is set, at LearningRate
// times lr_ratio.
template <bool W> struct adam_op : ops::adamw_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const T b1 = static_cast<T>(c.attr(beta1).f), b2 = static_cast<T>(c.attr(beta2).f);
        const T b1p = *c.in(Beta1Pow).template data<T>(), b2p = *c.in(Beta2Pow).template data<T>();
        T lr = *c.in(LearningRate).template data<T>();
        const T eps = static_cast<T>(c.attr(epsilon).f);
        bool decay = false;
        T k = 0;
        if constexpr (W) {
            lr = lr * static_cast<T>(c.attr(lr_ratio).f);
            decay = c.attr(with_decay).b;
            k = static_cast<T>(c.attr(coeff).f);
        }
        const T *p = c.in(Param).template data<T>(), *g = c.in(Grad).template data<T>();
        const T *m1 = c.in(Moment1).template data<T>(), *m2 = c.in(Moment2).template data<T>();
        T* po = c.out(ParamOut).template data<T>();
        T *m1o = c.out(Moment1Out).template data<T>(), *m2o = c.out(Moment2Out).template data<T>();
        split_loop<T>(c.in(Param).numel(), [&](std::int64_t b, std::int64_t e) {
            if (decay)
                kernels::adamw(e - b, p + b, g + b, m1 + b, m2 + b, lr, b1, b2, eps, b1p, b2p, k, po + b, m1o + b, m2o + b);
            else
                kernels::adam(e - b, p + b, g + b, m1 + b, m2 + b, lr, b1, b2, eps, b1p, b2p, po + b, m1o + b, m2o + b);
        });
        *c.out(Beta1PowOut).template data<T>() = b1p * b1;
        *c.out(Beta2PowOut).template data<T>() = b2p * b2;
    }
};

inline void sgd_kernels(OpDef& d) { d.kernels = cpu_kernels<sgd_op, float, double>(); }
inline void momentum_kernels(OpDef& d) { d.kernels = cpu_kernels<momentum_op, float, double>(); }
inline void adam_kernels(OpDef& d) { d.kernels = cpu_kernels<adam_op<false>, float, double>(); }
inline void adamw_kernels(OpDef& d) { d.kernels = cpu_kernels<adam_op<true>, float, double>(); }

}  // namespace dlgraph::cpu_ops
