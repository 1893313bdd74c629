// Optimizer updates over raw arrays, the kernel core of ops/optimizers.hpp:
// sgd, momentum (optionally Nesterov), adam, adamw, adagrad and rmsprop over
// elements [0, n), with the hyper-parameters as plain values (a device may
// split a parameter into ranges); lamb over a whole parameter (its trust
// ratio needs two norms).
#pragma once

#include <cmath>
#include <cstdint>

#include "dlgraph/kernels/config.hpp"
#include "dlgraph/kernels/elementwise.hpp"
#include "dlgraph/kernels/vec.hpp"

namespace dlgraph::kernels {

// Outputs may alias their inputs (the ops update in place): every element is
// read before it is written.

// p - lr * g
template <class T> struct sgd_fn {
    T lr;
    template <class V> DLGRAPH_HD V operator()(V p, V g) const { return p - V(lr) * g; }
};

// param_out = param - lr * grad. Vector loop with a padded tail (as
// binary_loop_serial), so an element's bits do not depend on where a range
// starts or ends as long as ranges start on whole vectors.
template <class T, class N>
inline void sgd(N n, const T* param, const T* grad, T lr, T* param_out) noexcept {
    binary_loop_serial(extent(n), param, 1, grad, 1, param_out, sgd_fn<T>{lr});
}

// v = mu * v + g; p -= lr * (nesterov ? g + mu * v : v), where g is
// rescale * grad + l2 * param (Paddle's rescale_grad and l2_decay
// regularization) unless rescale is 1 and l2 is 0: then g is grad itself.
template <class T, class N>
inline void momentum(N n_, const T* param, const T* grad, const T* velocity, T lr, T mu, bool nesterov, T* param_out,
                     T* velocity_out, T rescale = T(1), T l2 = T(0)) noexcept {
    const std::int64_t n = extent(n_);
    const bool reg = rescale != T(1) || l2 != T(0);
    std::int64_t i = 0;
    if constexpr (simd_type<T>) {  // the same operations in the same order as the scalar tail: the same bits
        using B = batch<T>;
        constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
        const B vmu(mu), vlr(lr), vres(rescale), vl2(l2);
        for (; i + W <= n; i += W) {
            const B g = reg ? vres * B::load_unaligned(grad + i) + vl2 * B::load_unaligned(param + i) : B::load_unaligned(grad + i);
            const B vn = vmu * B::load_unaligned(velocity + i) + g;
            vn.store_unaligned(velocity_out + i);
            (B::load_unaligned(param + i) - vlr * (nesterov ? g + vmu * vn : vn)).store_unaligned(param_out + i);
        }
    }
    for (; i < n; ++i) {
        const T g = reg ? rescale * grad[i] + l2 * param[i] : grad[i];
        const T vn = mu * velocity[i] + g;
        velocity_out[i] = vn;
        param_out[i] = param[i] - lr * (nesterov ? g + mu * vn : vn);
    }
}

// Adam (Kingma & Ba), as PaddlePaddle computes it: the bias corrections use
// beta1_pow/beta2_pow (beta^t, starting at beta for the first step), which
// the op advances (times beta1, beta2) after the update.
//   m1 = beta1 * m1 + (1 - beta1) * g;  m2 = beta2 * m2 + (1 - beta2) * g^2
//   p -= lr_t * m1 / (sqrt(m2) + eps_t), with
//   lr_t = lr * sqrt(1 - beta2_pow) / (1 - beta1_pow), eps_t = epsilon * sqrt(1 - beta2_pow).
// With Decay (AdamW, decoupled weight decay), p -= decay * p first, decay
// being lr * coeff. The tail after the last whole vector is scalar code
// doing the same operations in the same order (nothing is contracted:
// -ffp-contract=off), so an element's bits do not depend on where [0, n) is
// split.
template <bool Decay, class T, class N>
inline void adam_update(N n_, const T* param, const T* grad, const T* moment1, const T* moment2, T lr, T beta1, T beta2,
                        T epsilon, T beta1_pow, T beta2_pow, T decay, T* param_out, T* moment1_out,
                        T* moment2_out) noexcept {
    const std::int64_t n = extent(n_);
    const T b1 = beta1, b2 = beta2;
    const T lr_t = lr * std::sqrt(T(1) - beta2_pow) / (T(1) - beta1_pow);
    const T eps_t = epsilon * std::sqrt(T(1) - beta2_pow);
    const T* g = grad;
    const T* p = param;
    const T* m1 = moment1;
    const T* m2 = moment2;
    std::int64_t i = 0;
    if constexpr (simd_type<T>) {
        using B = batch<T>;
        constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
        const B vb1(b1), vb2(b2), vc1(T(1) - b1), vc2(T(1) - b2), vlr(lr_t), veps(eps_t);
        for (; i + W <= n; i += W) {
            const B gv = B::load_unaligned(g + i);
            const B a = vb1 * B::load_unaligned(m1 + i) + vc1 * gv;
            const B b = vb2 * B::load_unaligned(m2 + i) + vc2 * gv * gv;
            a.store_unaligned(moment1_out + i);
            b.store_unaligned(moment2_out + i);
            B pv = B::load_unaligned(p + i);
            if constexpr (Decay) pv = pv - B(decay) * pv;
            (pv - vlr * a / (vm::sqrt(b) + veps)).store_unaligned(param_out + i);
        }
    }
    for (; i < n; ++i) {
        const T a = b1 * m1[i] + (T(1) - b1) * g[i];
        const T b = b2 * m2[i] + (T(1) - b2) * g[i] * g[i];
        moment1_out[i] = a;
        moment2_out[i] = b;
        T pv = p[i];
        if constexpr (Decay) pv = pv - decay * pv;
        param_out[i] = pv - lr_t * a / (std::sqrt(b) + eps_t);
    }
}

template <class T, class N>
inline void adam(N n, const T* param, const T* grad, const T* moment1, const T* moment2, T lr, T beta1, T beta2,
                 T epsilon, T beta1_pow, T beta2_pow, T* param_out, T* moment1_out, T* moment2_out) noexcept {
    adam_update<false>(n, param, grad, moment1, moment2, lr, beta1, beta2, epsilon, beta1_pow, beta2_pow, T(0),
                       param_out, moment1_out, moment2_out);
}

// AdamW (Loshchilov & Hutter) as Paddle's adamw op with with_decay: the
// parameter decays by lr * coeff before Adam's step, both at lr (the op's
// LearningRate times its lr_ratio).
template <class T, class N>
inline void adamw(N n, const T* param, const T* grad, const T* moment1, const T* moment2, T lr, T beta1, T beta2,
                  T epsilon, T beta1_pow, T beta2_pow, T coeff, T* param_out, T* moment1_out, T* moment2_out) noexcept {
    adam_update<true>(n, param, grad, moment1, moment2, lr, beta1, beta2, epsilon, beta1_pow, beta2_pow, lr * coeff,
                      param_out, moment1_out, moment2_out);
}

// Adagrad (Paddle's): m += g^2; p -= lr * g / (sqrt(m) + epsilon).
template <class T, class N>
inline void adagrad(N n_, const T* param, const T* grad, const T* moment, T lr, T epsilon, T* param_out,
                    T* moment_out) noexcept {
    const std::int64_t n = extent(n_);
    for (std::int64_t i = 0; i < n; ++i) {
        const T g = grad[i], m = moment[i] + g * g;
        moment_out[i] = m;
        param_out[i] = param[i] - lr * g / (std::sqrt(m) + epsilon);
    }
}

// RMSProp (Paddle's rmsprop op): ms = decay ms + (1 - decay) g^2; centered:
// mg = decay mg + (1 - decay) g and the denominator sqrt(ms - mg^2 + eps),
// else sqrt(ms + eps); mom = momentum mom + lr g / denominator; p -= mom.
// mean_grad and mean_grad_out are read and written only when centered.
template <class T, class N>
inline void rmsprop(N n_, const T* param, const T* grad, const T* mean_square, const T* moment, const T* mean_grad, T lr,
                    T epsilon, T decay, T momentum, bool centered, T* param_out, T* mean_square_out, T* moment_out,
                    T* mean_grad_out) noexcept {
    const std::int64_t n = extent(n_);
    for (std::int64_t i = 0; i < n; ++i) {
        const T g = grad[i];
        const T ms = decay * mean_square[i] + (T(1) - decay) * g * g;
        T den;
        if (centered) {
            const T mg = decay * mean_grad[i] + (T(1) - decay) * g;
            mean_grad_out[i] = mg;
            den = std::sqrt(ms - mg * mg + epsilon);
        } else {
            den = std::sqrt(ms + epsilon);
        }
        const T mom = momentum * moment[i] + lr * g / den;
        mean_square_out[i] = ms;
        moment_out[i] = mom;
        param_out[i] = param[i] - mom;
    }
}

// LAMB (You et al.; Paddle's lamb op): Adam's moments with bias corrections
// from beta1_pow/beta2_pow, r = m1_hat / (sqrt(m2_hat) + epsilon) +
// weight_decay * p, and p -= lr * trust * r, trust = |p| / |r| (1 when
// either norm is 0). Two passes over the parameter: the norms, then the
// update (r computed again, the same bits). Outputs may alias inputs: the
// first pass writes only the moments' outputs, which the second reads.
template <class T, class N>
inline void lamb(N n_, const T* param, const T* grad, const T* moment1, const T* moment2, T lr, T beta1, T beta2,
                 T epsilon, T weight_decay, T beta1_pow, T beta2_pow, T* param_out, T* moment1_out,
                 T* moment2_out) noexcept {
    const std::int64_t n = extent(n_);
    double pn = 0, rn = 0;
    for (std::int64_t i = 0; i < n; ++i) {
        const T g = grad[i];
        const T a = beta1 * moment1[i] + (T(1) - beta1) * g;
        const T b = beta2 * moment2[i] + (T(1) - beta2) * g * g;
        moment1_out[i] = a;
        moment2_out[i] = b;
        const T r = (a / (T(1) - beta1_pow)) / (std::sqrt(b / (T(1) - beta2_pow)) + epsilon) + weight_decay * param[i];
        pn += static_cast<double>(param[i]) * static_cast<double>(param[i]);
        rn += static_cast<double>(r) * static_cast<double>(r);
    }
    const T trust = pn > 0 && rn > 0 ? static_cast<T>(std::sqrt(pn) / std::sqrt(rn)) : T(1);
    for (std::int64_t i = 0; i < n; ++i) {
        const T a = moment1_out[i], b = moment2_out[i];
        const T r = (a / (T(1) - beta1_pow)) / (std::sqrt(b / (T(1) - beta2_pow)) + epsilon) + weight_decay * param[i];
        param_out[i] = param[i] - lr * trust * r;
    }
}

}  // namespace dlgraph::kernels
