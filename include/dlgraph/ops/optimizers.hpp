// Optimizers as ops (PaddlePaddle's slots): sgd, momentum, adam. Each reads a
// parameter, its gradient, a learning-rate variable and its state, and writes
// the parameter and state back in place (ParamOut names the Param variable).
#pragma once

#include <cmath>

#include "dlgraph/ops/op_util.hpp"

namespace dlgraph::ops {

namespace detail {
// Every listed input slot must match Param's shape; LearningRate is one value.
inline void check_like_param(const InferContext& c, std::initializer_list<int> slots, int lr_slot) {
    const Shape& p = c.shape(0);
    for (int s : slots)
        if (p.known() && c.shape(s).known() && !(c.shape(s) == p))
            c.fail("dlgraph.shape.optimizer", c.slot_name(s) + " is " + to_string(c.shape(s)) + " but Param is " + to_string(p));
    if (c.shape(lr_slot).known() && c.shape(lr_slot).numel() != 1)
        c.fail("dlgraph.shape.optimizer", "LearningRate must hold one value, it is " + to_string(c.shape(lr_slot)));
}
}  // namespace detail

// ParamOut = Param - lr * Grad
struct sgd_op {
    enum { Param = 0, Grad = 1, LearningRate = 2 };
    static void infer(const InferContext& c) {
        c.dtype_in(Param, {DataType::FP32, DataType::FP64});
        c.same_dtype({Param, Grad, LearningRate});
        detail::check_like_param(c, {Grad}, LearningRate);
        c.set(0, c.dtype(Param), c.shape(Param));
    }
    template <class T> static void compute(cpu, const KernelContext& c) {
        const T lr = *c.in(LearningRate).template data<T>();
        const T* g = c.in(Grad).template data<T>();
        const T* p = c.in(Param).template data<T>();
        T* out = c.out(0).template data<T>();
        binary_loop(c.in(Param).numel(), p, 1, g, 1, out, [lr](auto pv, auto gv) { return pv - decltype(pv)(lr) * gv; });
    }
};
inline OpDef sgd_def() {
    OpDef d{"sgd", {{"Param"}, {"Grad"}, {"LearningRate"}}, {{"ParamOut"}}, {}, &sgd_op::infer};
    d.kernels = cpu_kernels<sgd_op, float, double>();
    d.doc = "ParamOut = Param - LearningRate * Grad";
    return d;
}

// v = mu * v + g; p -= lr * (nesterov ? g + mu * v : v)
struct momentum_op {
    enum { Param = 0, Grad = 1, Velocity = 2, LearningRate = 3 };
    enum { ParamOut = 0, VelocityOut = 1 };
    enum { mu = 0, use_nesterov = 1 };
    static void infer(const InferContext& c) {
        c.dtype_in(Param, {DataType::FP32, DataType::FP64});
        c.same_dtype({Param, Grad, Velocity, LearningRate});
        detail::check_like_param(c, {Grad, Velocity}, LearningRate);
        c.set(ParamOut, c.dtype(Param), c.shape(Param));
        c.set(VelocityOut, c.dtype(Param), c.shape(Param));
    }
    template <class T> static void compute(cpu, const KernelContext& c) {
        const T lr = *c.in(LearningRate).template data<T>();
        const T m = static_cast<T>(c.attr(mu).f);
        const bool nesterov = c.attr(use_nesterov).b;
        const T* g = c.in(Grad).template data<T>();
        const T* p = c.in(Param).template data<T>();
        const T* v = c.in(Velocity).template data<T>();
        T* po = c.out(ParamOut).template data<T>();
        T* vo = c.out(VelocityOut).template data<T>();
        const std::int64_t n = c.in(Param).numel();
        for (std::int64_t i = 0; i < n; ++i) {
            const T vn = m * v[i] + g[i];
            vo[i] = vn;
            po[i] = p[i] - lr * (nesterov ? g[i] + m * vn : vn);
        }
    }
};
inline OpDef momentum_def() {
    OpDef d{"momentum", {{"Param"}, {"Grad"}, {"Velocity"}, {"LearningRate"}}, {{"ParamOut"}, {"VelocityOut"}},
            {{"mu", Attribute::make_float("mu", 0.9)}, {"use_nesterov", Attribute::make_bool("use_nesterov", false)}},
            &momentum_op::infer};
    d.kernels = cpu_kernels<momentum_op, float, double>();
    d.doc = "momentum SGD (optionally Nesterov)";
    return d;
}

// Adam (Kingma & Ba), as PaddlePaddle computes it: the bias corrections use
// Beta1Pow/Beta2Pow (beta^t, starting at beta for the first step), which the
// op advances after the update.
struct adam_op {
    enum { Param = 0, Grad = 1, LearningRate = 2, Moment1 = 3, Moment2 = 4, Beta1Pow = 5, Beta2Pow = 6 };
    enum { ParamOut = 0, Moment1Out = 1, Moment2Out = 2, Beta1PowOut = 3, Beta2PowOut = 4 };
    enum { beta1 = 0, beta2 = 1, epsilon = 2 };
    static void infer(const InferContext& c) {
        c.dtype_in(Param, {DataType::FP32, DataType::FP64});
        c.same_dtype({Param, Grad, LearningRate, Moment1, Moment2, Beta1Pow, Beta2Pow});
        detail::check_like_param(c, {Grad, Moment1, Moment2}, LearningRate);
        for (int s : {Beta1Pow, Beta2Pow})
            if (c.shape(s).known() && c.shape(s).numel() != 1)
                c.fail("dlgraph.shape.optimizer", c.slot_name(s) + " must hold one value, it is " + to_string(c.shape(s)));
        for (int o : {ParamOut, Moment1Out, Moment2Out}) c.set(o, c.dtype(Param), c.shape(Param));
        c.set(Beta1PowOut, c.dtype(Param), c.shape(Beta1Pow));
        c.set(Beta2PowOut, c.dtype(Param), c.shape(Beta2Pow));
    }
    template <class T> static void compute(cpu, const KernelContext& c) {
        const T b1 = static_cast<T>(c.attr(beta1).f), b2 = static_cast<T>(c.attr(beta2).f);
        const T eps = static_cast<T>(c.attr(epsilon).f);
        const T lr = *c.in(LearningRate).template data<T>();
        const T b1p = *c.in(Beta1Pow).template data<T>(), b2p = *c.in(Beta2Pow).template data<T>();
        const T lr_t = lr * std::sqrt(T(1) - b2p) / (T(1) - b1p);
        const T eps_t = eps * std::sqrt(T(1) - b2p);
        const T* g = c.in(Grad).template data<T>();
        const T* p = c.in(Param).template data<T>();
        const T* m1 = c.in(Moment1).template data<T>();
        const T* m2 = c.in(Moment2).template data<T>();
        T* po = c.out(ParamOut).template data<T>();
        T* m1o = c.out(Moment1Out).template data<T>();
        T* m2o = c.out(Moment2Out).template data<T>();
        const std::int64_t n = c.in(Param).numel();
        std::int64_t i = 0;
        if constexpr (simd_type<T>) {
            using B = xsimd::batch<T>;
            constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
            const B vb1(b1), vb2(b2), vc1(T(1) - b1), vc2(T(1) - b2), vlr(lr_t), veps(eps_t);
            for (; i + W <= n; i += W) {
                const B gv = B::load_unaligned(g + i);
                const B a = vb1 * B::load_unaligned(m1 + i) + vc1 * gv;
                const B b = vb2 * B::load_unaligned(m2 + i) + vc2 * gv * gv;
                a.store_unaligned(m1o + i);
                b.store_unaligned(m2o + i);
                (B::load_unaligned(p + i) - vlr * a / (xsimd::sqrt(b) + veps)).store_unaligned(po + i);
            }
        }
        for (; i < n; ++i) {
            const T a = b1 * m1[i] + (T(1) - b1) * g[i];
            const T b = b2 * m2[i] + (T(1) - b2) * g[i] * g[i];
            m1o[i] = a;
            m2o[i] = b;
            po[i] = p[i] - lr_t * a / (std::sqrt(b) + eps_t);
        }
        *c.out(Beta1PowOut).template data<T>() = b1p * b1;
        *c.out(Beta2PowOut).template data<T>() = b2p * b2;
    }
};
inline OpDef adam_def() {
    OpDef d{"adam",
            {{"Param"}, {"Grad"}, {"LearningRate"}, {"Moment1"}, {"Moment2"}, {"Beta1Pow"}, {"Beta2Pow"}},
            {{"ParamOut"}, {"Moment1Out"}, {"Moment2Out"}, {"Beta1PowOut"}, {"Beta2PowOut"}},
            {{"beta1", Attribute::make_float("beta1", 0.9)},
             {"beta2", Attribute::make_float("beta2", 0.999)},
             {"epsilon", Attribute::make_float("epsilon", 1e-8)}},
            &adam_op::infer};
    d.kernels = cpu_kernels<adam_op, float, double>();
    d.doc = "Adam update of Param and its moments";
    return d;
}

}  // namespace dlgraph::ops

