// The CPU kernels of ops/optimizers.hpp: each reads the learning rate and its
// attributes as plain values and runs the kernel core's update
// (kernels/optimizers.hpp) over the parameter, sgd split over the thread pool
// when long; and each op's kernel table.
#pragma once

#include "dlgraph/cpu/elementwise.hpp"
#include "dlgraph/kernels/optimizers.hpp"
#include "dlgraph/kernels/shape.hpp"  // copy_elements
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
        const T rescale = static_cast<T>(c.attr(rescale_grad).f), l2_coeff = static_cast<T>(l2(c.attrs));
        split_loop<T>(c.in(Param).numel(), [&](std::int64_t b, std::int64_t e) {
            kernels::momentum(e - b, p + b, g + b, v + b, lr, m, nesterov, po + b, vo + b, rescale, l2_coeff);
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

struct adagrad_op : ops::adagrad_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const T lr = *c.in(LearningRate).template data<T>(), eps = static_cast<T>(c.attr(epsilon).f);
        const T *p = c.in(Param).template data<T>(), *g = c.in(Grad).template data<T>(), *m = c.in(Moment).template data<T>();
        T *po = c.out(ParamOut).template data<T>(), *mo = c.out(MomentOut).template data<T>();
        split_loop<T>(c.in(Param).numel(), [&](std::int64_t b, std::int64_t e) {
            kernels::adagrad(e - b, p + b, g + b, m + b, lr, eps, po + b, mo + b);
        });
    }
};
struct rmsprop_op : ops::rmsprop_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const T lr = *c.in(LearningRate).template data<T>();
        const T eps = static_cast<T>(c.attr(epsilon).f), dec = static_cast<T>(c.attr(decay).f);
        const T mom = static_cast<T>(c.attr(momentum).f);
        const bool cen = c.attr(centered).b;
        const T *p = c.in(Param).template data<T>(), *g = c.in(Grad).template data<T>();
        const T *ms = c.in(MeanSquare).template data<T>(), *m = c.in(Moment).template data<T>();
        const T* mg = cen ? c.in(MeanGrad).template data<T>() : nullptr;
        T *po = c.out(ParamOut).template data<T>(), *mso = c.out(MeanSquareOut).template data<T>();
        T *mo = c.out(MomentOut).template data<T>(), *mgo = cen ? c.out(MeanGradOut).template data<T>() : nullptr;
        split_loop<T>(c.in(Param).numel(), [&](std::int64_t b, std::int64_t e) {
            kernels::rmsprop(e - b, p + b, g + b, ms + b, m + b, mg ? mg + b : nullptr, lr, eps, dec, mom, cen, po + b, mso + b,
                             mo + b, mgo ? mgo + b : nullptr);
        });
        if (!cen && c.out_count(MeanGradOut) && c.out(MeanGradOut).raw() != c.in(MeanGrad).raw())
            kernels::copy_elements(c.in(MeanGrad).template data<T>(), c.in(MeanGrad).numel(), c.out(MeanGradOut).template data<T>());
    }
};
// One pass over the whole parameter (the trust ratio's norms), not split.
struct lamb_op : ops::lamb_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const T b1 = static_cast<T>(c.attr(beta1).f), b2 = static_cast<T>(c.attr(beta2).f);
        const T b1p = *c.in(Beta1Pow).template data<T>(), b2p = *c.in(Beta2Pow).template data<T>();
        kernels::lamb(c.in(Param).numel(), c.in(Param).template data<T>(), c.in(Grad).template data<T>(),
                      c.in(Moment1).template data<T>(), c.in(Moment2).template data<T>(), *c.in(LearningRate).template data<T>(),
                      b1, b2, static_cast<T>(c.attr(epsilon).f), static_cast<T>(c.attr(weight_decay).f), b1p, b2p,
                      c.out(ParamOut).template data<T>(), c.out(Moment1Out).template data<T>(),
                      c.out(Moment2Out).template data<T>());
        *c.out(Beta1PowOut).template data<T>() = b1p * b1;
        *c.out(Beta2PowOut).template data<T>() = b2p * b2;
    }
};

inline void adagrad_kernels(OpDef& d) { d.kernels = cpu_kernels<adagrad_op, float, double>(); }
inline void rmsprop_kernels(OpDef& d) { d.kernels = cpu_kernels<rmsprop_op, float, double>(); }
inline void lamb_kernels(OpDef& d) { d.kernels = cpu_kernels<lamb_op, float, double>(); }

}  // namespace dlgraph::cpu_ops
