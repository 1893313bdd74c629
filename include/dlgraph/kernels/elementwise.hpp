// Element-wise math, the kernel core of the element-wise ops: each functor
// is written once for scalars and vectors (vm::), so the same definition
// gives the CPU's vector loops, its scalar loops and a device's per-thread
// code; the serial loops; the broadcast geometry (NumPy alignment or
// Paddle's `axis`) and its walk; and the gradient loops.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "dlgraph/kernels/config.hpp"
#include "dlgraph/kernels/vec.hpp"

namespace dlgraph::kernels {

inline constexpr int max_rank = 8;  // as dlgraph::Shape

// ---- functors: operator() is the op, dx/dy (binary) or grad (unary) its gradient --------
//
// On integers, + - * wrap around (wrap_add, ...) as NumPy's do.

struct add_fn {
    static constexpr bool grad_reads_out = false;  // whether dx, dy read Out
    template <class V> DLGRAPH_HD V operator()(V a, V b) const { return wrap_add(a, b); }
    template <class V> DLGRAPH_HD V dx(V, V, V, V d) const { return d; }
    template <class V> DLGRAPH_HD V dy(V, V, V, V d) const { return d; }
};
struct sub_fn {
    static constexpr bool grad_reads_out = false;  // whether dx, dy read Out
    template <class V> DLGRAPH_HD V operator()(V a, V b) const { return wrap_sub(a, b); }
    template <class V> DLGRAPH_HD V dx(V, V, V, V d) const { return d; }
    template <class V> DLGRAPH_HD V dy(V, V, V, V d) const { return -d; }
};
struct mul_fn {
    static constexpr bool grad_reads_out = false;  // whether dx, dy read Out
    template <class V> DLGRAPH_HD V operator()(V a, V b) const { return wrap_mul(a, b); }
    template <class V> DLGRAPH_HD V dx(V, V y, V, V d) const { return d * y; }
    template <class V> DLGRAPH_HD V dy(V x, V, V, V d) const { return d * x; }
};
// Integer division by zero is a fault the caller finds before dividing
// (find_zero); a divisor of -1 negates with wrap-around, so INT_MIN / -1 is
// INT_MIN (as NumPy gives) rather than a trap.
struct div_fn {
    static constexpr bool grad_reads_out = true;  // whether dx, dy read Out
    template <class V> DLGRAPH_HD V operator()(V a, V b) const {
        if constexpr (std::is_integral_v<V>) {
            if (b == -1) return static_cast<V>(std::make_unsigned_t<V>(0) - static_cast<std::make_unsigned_t<V>>(a));
            if (b == 0) return 0;
        }
        return a / b;
    }
    template <class V> DLGRAPH_HD V dx(V, V y, V, V d) const { return d / y; }
    template <class V> DLGRAPH_HD V dy(V, V y, V out, V d) const { return -d * out / y; }
};
struct max_fn {
    static constexpr bool grad_reads_out = false;  // whether dx, dy read Out
    template <class V> DLGRAPH_HD V operator()(V a, V b) const { return vm::max(a, b); }
    // Ties send the gradient to Y, as PaddlePaddle does.
    template <class V> DLGRAPH_HD V dx(V x, V y, V, V d) const { return vm::select(x > y, d, V(0)); }
    template <class V> DLGRAPH_HD V dy(V x, V y, V, V d) const { return vm::select(x > y, V(0), d); }
};
struct min_fn {
    static constexpr bool grad_reads_out = false;  // whether dx, dy read Out
    template <class V> DLGRAPH_HD V operator()(V a, V b) const { return vm::min(a, b); }
    template <class V> DLGRAPH_HD V dx(V x, V y, V, V d) const { return vm::select(x < y, d, V(0)); }
    template <class V> DLGRAPH_HD V dy(V x, V y, V, V d) const { return vm::select(x < y, V(0), d); }
};
struct pow_fn {
    static constexpr bool grad_reads_out = true;  // whether dx, dy read Out
    template <class V> DLGRAPH_HD V operator()(V a, V b) const { return vm::pow(a, b); }
    template <class V> DLGRAPH_HD V dx(V x, V y, V, V d) const { return d * y * vm::pow(x, y - V(1)); }
    template <class V> DLGRAPH_HD V dy(V x, V, V out, V d) const { return d * out * vm::log(x); }
};

// Paddle's elementwise_mod and elementwise_floordiv, Python's rounding: the
// remainder takes the divisor's sign, the quotient rounds toward -inf. On
// integers a divisor of 0 is a fault the caller finds first (find_zero) and
// -1 is answered without dividing (INT_MIN % -1 traps). Floats: the
// remainder from fmod (exact); the quotient is CPython's float //, (a -
// fmod(a, b)) / b corrected to agree with that remainder and rounded to the
// nearest integer, so 1.0 // 0.1 is 9 (floor(a / b) would give 10, whose
// remainder is not mod's). Scalar only (no vector path); the gradients
// exist for a device's shared visitors, and no grad op uses them.
struct mod_fn {
    static constexpr bool grad_reads_out = false;
    template <class V> DLGRAPH_HD V operator()(V a, V b) const {
        V r;
        if constexpr (std::is_integral_v<V>) {
            if (b == 0 || b == -1) return 0;
            r = static_cast<V>(a % b);
        } else {
            r = std::fmod(a, b);
        }
        return r != V(0) && ((r < V(0)) != (b < V(0))) ? static_cast<V>(r + b) : r;
    }
    template <class V> DLGRAPH_HD V dx(V, V, V, V d) const { return d; }
    template <class V> DLGRAPH_HD V dy(V x, V y, V, V d) const { return -d * floordiv(x, y); }
    template <class V> DLGRAPH_HD static V floordiv(V a, V b) {
        if constexpr (std::is_integral_v<V>) {
            if (b == -1) return static_cast<V>(std::make_unsigned_t<V>(0) - static_cast<std::make_unsigned_t<V>>(a));
            if (b == 0) return 0;
            const V q = static_cast<V>(a / b);
            return (a % b != 0 && ((a < 0) != (b < 0))) ? static_cast<V>(q - 1) : q;
        } else {
            if (b == V(0)) return a / b;  // inf or NaN, as NumPy's
            const V m = std::fmod(a, b);
            V div = (a - m) / b;
            if (m != V(0) && ((b < V(0)) != (m < V(0)))) div -= V(1);
            if (div == V(0)) return std::copysign(V(0), a / b);
            V q = std::floor(div);
            if (div - q > V(0.5)) q += V(1);
            return q;
        }
    }
};
struct floordiv_fn {
    static constexpr bool grad_reads_out = false;
    template <class V> DLGRAPH_HD V operator()(V a, V b) const { return mod_fn::floordiv(a, b); }
    template <class V> DLGRAPH_HD V dx(V, V, V, V) const { return V(0); }
    template <class V> DLGRAPH_HD V dy(V, V, V, V) const { return V(0); }
};

struct relu_fn {
    static constexpr bool grad_reads_out = true;  // grad reads Out (else X)
    template <class V> DLGRAPH_HD V operator()(V a) const { return vm::max(a, V(0)); }
    template <class V> DLGRAPH_HD V grad(V, V out, V dout) const { return vm::select(out > V(0), dout, V(0)); }
};
struct sigmoid_fn {
    static constexpr bool grad_reads_out = true;  // grad reads Out (else X)
    template <class V> DLGRAPH_HD V operator()(V a) const { return V(1) / (V(1) + vm::exp(-a)); }
    template <class V> DLGRAPH_HD V grad(V, V out, V dout) const { return dout * out * (V(1) - out); }
};
struct tanh_fn {
    static constexpr bool grad_reads_out = true;  // grad reads Out (else X)
    template <class V> DLGRAPH_HD V operator()(V a) const { return vm::tanh(a); }
    template <class V> DLGRAPH_HD V grad(V, V out, V dout) const { return dout * (V(1) - out * out); }
};
struct exp_fn {
    static constexpr bool grad_reads_out = true;  // grad reads Out (else X)
    template <class V> DLGRAPH_HD V operator()(V a) const { return vm::exp(a); }
    template <class V> DLGRAPH_HD V grad(V, V out, V dout) const { return dout * out; }
};
struct log_fn {
    static constexpr bool grad_reads_out = false;  // grad reads Out (else X)
    template <class V> DLGRAPH_HD V operator()(V a) const { return vm::log(a); }
    template <class V> DLGRAPH_HD V grad(V x, V, V dout) const { return dout / x; }
};
struct sqrt_fn {
    static constexpr bool grad_reads_out = true;  // grad reads Out (else X)
    template <class V> DLGRAPH_HD V operator()(V a) const { return vm::sqrt(a); }
    template <class V> DLGRAPH_HD V grad(V, V out, V dout) const { return dout * V(0.5) / out; }
};
struct abs_fn {
    static constexpr bool grad_reads_out = false;  // grad reads Out (else X)
    template <class V> DLGRAPH_HD V operator()(V a) const { return vm::abs(a); }
    template <class V> DLGRAPH_HD V grad(V x, V, V dout) const {
        return vm::select(x > V(0), dout, vm::select(x < V(0), -dout, V(0)));
    }
};
struct square_fn {
    static constexpr bool grad_reads_out = false;  // grad reads Out (else X)
    template <class V> DLGRAPH_HD V operator()(V a) const { return wrap_mul(a, a); }
    template <class V> DLGRAPH_HD V grad(V x, V, V dout) const { return dout * V(2) * x; }
};

// ---- more math and activations, as Paddle's activation ops define them ----
//
// Each gradient reads what Paddle's grad op reads (X or Out). floor, ceil,
// round and sign have a gradient of 0, as in Paddle.
struct softsign_fn {
    static constexpr bool grad_reads_out = false;  // grad reads Out (else X)
    template <class V> DLGRAPH_HD V operator()(V a) const { return a / (V(1) + vm::abs(a)); }
    template <class V> DLGRAPH_HD V grad(V x, V, V dout) const {
        const V t = V(1) + vm::abs(x);
        return dout / (t * t);
    }
};
struct sin_fn {
    static constexpr bool grad_reads_out = false;  // grad reads Out (else X)
    template <class V> DLGRAPH_HD V operator()(V a) const { return vm::sin(a); }
    template <class V> DLGRAPH_HD V grad(V x, V, V dout) const { return dout * vm::cos(x); }
};
struct cos_fn {
    static constexpr bool grad_reads_out = false;  // grad reads Out (else X)
    template <class V> DLGRAPH_HD V operator()(V a) const { return vm::cos(a); }
    template <class V> DLGRAPH_HD V grad(V x, V, V dout) const { return -(dout * vm::sin(x)); }
};
struct reciprocal_fn {
    static constexpr bool grad_reads_out = true;  // grad reads Out (else X)
    template <class V> DLGRAPH_HD V operator()(V a) const { return V(1) / a; }
    template <class V> DLGRAPH_HD V grad(V, V out, V dout) const { return -(dout * out * out); }
};
struct rsqrt_fn {
    static constexpr bool grad_reads_out = true;  // grad reads Out (else X)
    template <class V> DLGRAPH_HD V operator()(V a) const { return V(1) / vm::sqrt(a); }
    template <class V> DLGRAPH_HD V grad(V, V out, V dout) const { return V(-0.5) * dout * out * out * out; }
};
// A step function's gradient: 0 (Paddle's), whatever Out@GRAD holds.
struct zero_grad {
    static constexpr bool grad_reads_out = true;  // grad reads Out (else X)
    template <class V> DLGRAPH_HD V grad(V, V, V) const { return V(0); }
};
struct floor_fn : zero_grad {
    template <class V> DLGRAPH_HD V operator()(V a) const { return vm::floor(a); }
};
struct ceil_fn : zero_grad {
    template <class V> DLGRAPH_HD V operator()(V a) const { return vm::ceil(a); }
};
struct round_fn : zero_grad {  // halves away from zero
    template <class V> DLGRAPH_HD V operator()(V a) const { return vm::round(a); }
};
// 1, -1, or the input itself for 0, -0 and NaN (NumPy's sign: a NaN stays
// NaN; Eigen's, which Paddle uses, may give 0 for it).
struct sign_fn : zero_grad {
    template <class V> DLGRAPH_HD V operator()(V a) const {
        return vm::select(a > V(0), V(1), vm::select(a < V(0), V(-1), a));
    }
};
// gelu: x * Phi(x) with Phi the normal CDF, exactly (erf) ...
struct gelu_fn {
    static constexpr bool grad_reads_out = false;  // grad reads Out (else X)
    template <class V> DLGRAPH_HD V operator()(V a) const {
        return V(0.5) * a * (V(1) + vm::erf(a * V(0.70710678118654752440)));
    }
    template <class V> DLGRAPH_HD V grad(V x, V, V dout) const {
        const V cdf = V(0.5) * (V(1) + vm::erf(x * V(0.70710678118654752440)));
        const V pdf = vm::exp(V(-0.5) * x * x) * V(0.39894228040143267794);  // 1 / sqrt(2 pi)
        return dout * (cdf + x * pdf);
    }
};
// ... or with Paddle's `approximate` tanh form.
struct gelu_tanh_fn {
    static constexpr bool grad_reads_out = false;  // grad reads Out (else X)
    template <class V> DLGRAPH_HD V operator()(V a) const {
        return V(0.5) * a * (V(1) + vm::tanh(V(0.79788456080286535588) * (a + V(0.044715) * a * a * a)));
    }
    template <class V> DLGRAPH_HD V grad(V x, V, V dout) const {
        const V t = vm::tanh(V(0.79788456080286535588) * (x + V(0.044715) * x * x * x));
        const V dt = (V(1) - t * t) * V(0.79788456080286535588) * (V(1) + V(3 * 0.044715) * x * x);
        return dout * (V(0.5) * (V(1) + t) + V(0.5) * x * dt);
    }
};

// Activations with attributes: the functor holds them as T, in the order of
// the op's FLOAT attributes (`params` of them), so a kernel builds it as
// Fn<T>{attr 0, attr 1, ...}.
template <class T> struct leaky_relu_fn {  // alpha
    static constexpr int params = 1;
    static constexpr bool grad_reads_out = false;  // grad reads Out (else X)
    T alpha;
    template <class V> DLGRAPH_HD V operator()(V a) const { return vm::select(a < V(0), a * V(alpha), a); }
    template <class V> DLGRAPH_HD V grad(V x, V, V dout) const { return vm::select(x < V(0), dout * V(alpha), dout); }
};
// The derivative of the forward for any alpha (Paddle's ELUGradFunctor
// agrees for alpha > 0).
template <class T> struct elu_fn {  // alpha
    static constexpr int params = 1;
    static constexpr bool grad_reads_out = false;  // grad reads Out (else X)
    T alpha;
    template <class V> DLGRAPH_HD V operator()(V a) const {
        return vm::select(a < V(0), V(alpha) * (vm::exp(a) - V(1)), a);
    }
    template <class V> DLGRAPH_HD V grad(V x, V, V dout) const {
        return vm::select(x > V(0), dout, dout * V(alpha) * vm::exp(x));
    }
};
template <class T> struct relu6_fn {  // threshold
    static constexpr int params = 1;
    static constexpr bool grad_reads_out = true;  // grad reads Out (else X)
    T threshold;
    template <class V> DLGRAPH_HD V operator()(V a) const { return vm::min(vm::max(a, V(0)), V(threshold)); }
    template <class V> DLGRAPH_HD V grad(V, V out, V dout) const {
        return vm::select(out > V(0), vm::select(out < V(threshold), dout, V(0)), V(0));
    }
};
template <class T> struct hard_sigmoid_fn {  // slope, offset
    static constexpr int params = 2;
    static constexpr bool grad_reads_out = true;  // grad reads Out (else X)
    T slope, offset;
    template <class V> DLGRAPH_HD V operator()(V a) const {
        return vm::min(vm::max(a * V(slope) + V(offset), V(0)), V(1));
    }
    template <class V> DLGRAPH_HD V grad(V, V out, V dout) const {
        return vm::select(out > V(0), vm::select(out < V(1), dout * V(slope), V(0)), V(0));
    }
};
// Its gradient is the forward's derivative: threshold / scale where x +
// offset >= threshold. Paddle's HardSwishGradFunctor takes 1 there, which
// agrees only when threshold == scale (the defaults).
template <class T> struct hard_swish_fn {  // threshold, scale, offset
    static constexpr int params = 3;
    static constexpr bool grad_reads_out = false;  // grad reads Out (else X)
    T threshold, scale, offset;
    template <class V> DLGRAPH_HD V operator()(V a) const {
        return a * vm::min(vm::max(a + V(offset), V(0)), V(threshold)) / V(scale);
    }
    template <class V> DLGRAPH_HD V grad(V x, V, V dout) const {
        const V s = x + V(offset);
        const V mid = (V(2) * x + V(offset)) / V(scale);
        return vm::select(s > V(0), vm::select(s < V(threshold), dout * mid, dout * (V(threshold) / V(scale))), V(0));
    }
};
// log(1 + exp(beta x)) / beta, and x itself where beta x > threshold.
template <class T> struct softplus_fn {  // beta, threshold
    static constexpr int params = 2;
    static constexpr bool grad_reads_out = false;  // grad reads Out (else X)
    T beta, threshold;
    template <class V> DLGRAPH_HD V operator()(V a) const {
        const V xb = a * V(beta);
        return vm::select(xb > V(threshold), a, vm::log(V(1) + vm::exp(xb)) / V(beta));
    }
    template <class V> DLGRAPH_HD V grad(V x, V, V dout) const {
        const V xb = x * V(beta);
        return vm::select(xb > V(threshold), dout, dout / (V(1) + vm::exp(-xb)));
    }
};
// x * sigmoid(beta x).
template <class T> struct swish_fn {  // beta
    static constexpr int params = 1;
    static constexpr bool grad_reads_out = false;  // grad reads Out (else X)
    T beta;
    template <class V> DLGRAPH_HD V operator()(V a) const { return a / (V(1) + vm::exp(-(V(beta) * a))); }
    template <class V> DLGRAPH_HD V grad(V x, V, V dout) const {
        const V sg = V(1) / (V(1) + vm::exp(-(V(beta) * x)));
        const V out = x * sg;
        return dout * (V(beta) * out + sg * (V(1) - V(beta) * out));
    }
};

// Paddle's clip: min where x < min, max where x > max, else x (NaN stays);
// the gradient passes only strictly inside (min, max).
template <class T> struct clip_fn {  // min, max
    static constexpr int params = 2;
    static constexpr bool grad_reads_out = false;  // grad reads Out (else X)
    T lo, hi;
    template <class V> DLGRAPH_HD V operator()(V a) const {
        return vm::select(a < V(lo), V(lo), vm::select(a > V(hi), V(hi), a));
    }
    template <class V> DLGRAPH_HD V grad(V x, V, V dout) const {
        return vm::select(x > V(lo), vm::select(x < V(hi), dout, V(0)), V(0));
    }
};
// Paddle's pow: x ^ factor, its gradient factor * x ^ (factor - 1).
template <class T> struct pow_factor_fn {  // factor
    static constexpr int params = 1;
    static constexpr bool grad_reads_out = false;  // grad reads Out (else X)
    T factor;
    template <class V> DLGRAPH_HD V operator()(V a) const { return vm::pow(a, V(factor)); }
    template <class V> DLGRAPH_HD V grad(V x, V, V dout) const {
        return dout * V(factor) * vm::pow(x, V(factor) - V(1));
    }
};

// x * s (a mean's 1/n, softmax's 1/sum).
template <class T> struct scale_by_fn {
    T s;
    template <class V> DLGRAPH_HD V operator()(V v) const { return v * V(s); }
};
// scale: s * x + b (BiasAfter), or s * (x + b).
template <class T, bool BiasAfter> struct scale_fn {
    T s, b;
    template <class V> DLGRAPH_HD V operator()(V v) const {
        if constexpr (BiasAfter) return wrap_add(wrap_mul(v, V(s)), V(b));
        else return wrap_mul(wrap_add(v, V(b)), V(s));
    }
};

// ---- serial loops ------------------------------------------------------------------------
//
// For FP types the last partial vector also goes through the vector path
// (via a padded copy), so an element's result does not depend on where it
// sits: xsimd's exp or tanh and the C library's differ in the last bit, and
// fused chains and threads cut the data at other places than one loop.

// z[i] = f(x[i * sx], y[i * sy]) for i < n, with sx, sy in {0, 1}.
template <class T, class F>
inline void binary_loop_serial(std::int64_t n, const T* x, int sx, const T* y, int sy, T* z, F f) noexcept {
    std::int64_t i = 0;
    if constexpr (simd_type<T>) {
        using B = batch<T>;
        constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
        if (sx && sy) {
            for (; i + W <= n; i += W) f(B::load_unaligned(x + i), B::load_unaligned(y + i)).store_unaligned(z + i);
        } else if (sx) {
            const B yb(*y);
            for (; i + W <= n; i += W) f(B::load_unaligned(x + i), yb).store_unaligned(z + i);
        } else if (sy) {
            const B xb(*x);
            for (; i + W <= n; i += W) f(xb, B::load_unaligned(y + i)).store_unaligned(z + i);
        }
        if (i < n) {
            alignas(64) T xt[W] = {}, yt[W] = {}, zt[W];
            for (std::int64_t k = i; k < n; ++k) {
                xt[k - i] = x[k * sx];
                yt[k - i] = y[k * sy];
            }
            f(B::load_aligned(xt), B::load_aligned(yt)).store_aligned(zt);
            std::copy(zt, zt + (n - i), z + i);
        }
        return;
    }
    for (; i < n; ++i) z[i] = f(x[i * sx], y[i * sy]);
}

// z[i] = f(x[i]) for i < n.
template <class T, class F> inline void unary_loop_serial(std::int64_t n, const T* x, T* z, F f) noexcept {
    std::int64_t i = 0;
    if constexpr (simd_type<T>) {
        using B = batch<T>;
        constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
        for (; i + W <= n; i += W) f(B::load_unaligned(x + i)).store_unaligned(z + i);
        if (i < n) {  // as in binary_loop_serial
            alignas(64) T xt[W] = {}, zt[W];
            std::copy(x + i, x + n, xt);
            f(B::load_aligned(xt)).store_aligned(zt);
            std::copy(zt, zt + (n - i), z + i);
        }
        return;
    }
    for (; i < n; ++i) z[i] = f(x[i]);
}

// dx[i] = f.grad(x[i], y[i], dy[i]) for i < n (a unary op's gradient). The
// tail goes through the vector form too (padded, as in unary_loop_serial):
// a gradient of exp, sin, erf, ... then gives an element the same bits
// wherever the loop ends (a fused chain ends its blocks elsewhere).
template <class T, class F>
inline void unary_grad_loop(std::int64_t n, const T* x, const T* y, const T* dy, T* dx, F f) noexcept {
    std::int64_t i = 0;
    if constexpr (simd_type<T>) {
        using B = batch<T>;
        constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
        for (; i + W <= n; i += W)
            f.grad(B::load_unaligned(x + i), B::load_unaligned(y + i), B::load_unaligned(dy + i)).store_unaligned(dx + i);
        if (i < n) {
            alignas(64) T xt[W] = {}, yt[W] = {}, dt[W] = {}, zt[W];
            std::copy(x + i, x + n, xt);
            std::copy(y + i, y + n, yt);
            std::copy(dy + i, dy + n, dt);
            f.grad(B::load_aligned(xt), B::load_aligned(yt), B::load_aligned(dt)).store_aligned(zt);
            std::copy(zt, zt + (n - i), dx + i);
        }
        return;
    }
    for (; i < n; ++i) dx[i] = f.grad(x[i], y[i], dy[i]);
}

// A unary op's gradient as a binary function of (Out@GRAD, v), v being the
// forward value its grad reads (Out if F::grad_reads_out, else X): what a
// fused chain of gradients runs.
template <class F> struct grad_by_fn {
    template <class V> DLGRAPH_HD V operator()(V dout, V v) const { return F{}.grad(v, v, dout); }
};

// Whether any of y[0..n) is zero (an integer division's fault).
template <class T> inline bool find_zero(const T* y, std::int64_t n) noexcept {
    for (std::int64_t i = 0; i < n; ++i)
        if (y[i] == T(0)) return true;
    return false;
}

// ---- broadcasting ------------------------------------------------------------------------

// X's and Y's dims padded to one rank `r`: Y placed onto X from dim `axis`
// (Paddle), or with axis -1 both aligned at their trailing dims (NumPy).
// False when Y does not fit into X at that axis.
constexpr bool align_dims(const std::int64_t* x, int xr, const std::int64_t* y, int yr, std::int64_t axis,
                       std::int64_t* xa, std::int64_t* ya, int& r) noexcept {
    if (axis == -1 || xr < yr) {
        r = std::max(xr, yr);
        for (int i = 0; i < r; ++i) {
            xa[i] = i < r - xr ? 1 : x[i - (r - xr)];
            ya[i] = i < r - yr ? 1 : y[i - (r - yr)];
        }
        return true;
    }
    if (axis < 0 || axis > xr - yr) return false;  // (axis + yr could overflow)
    r = xr;
    for (int i = 0; i < r; ++i) {
        xa[i] = x[i];
        ya[i] = i < axis || i >= axis + yr ? 1 : y[i - axis];
    }
    return true;
}

// How a broadcasting binary op walks its output: element strides of X and
// Y per output dim (0 along a broadcast dim), and an inner run over the
// trailing dims where both operands keep one access pattern.
struct broadcast_geometry {
    int rank = 0;
    std::int64_t zs[max_rank] = {}, xst[max_rank] = {}, yst[max_rank] = {};
    std::int64_t inner = 1;  // elements per inner run
    int first_outer = -1;    // the dims [0, first_outer] are walked outside the runs
    int sx = 1, sy = 1;      // X's and Y's stride (0 or 1) within a run
};

// The geometry of Z = X op Y (dims as given; axis as align_dims). Z's dims
// are the broadcast of X's and Y's.
constexpr broadcast_geometry broadcast_walk_of(const std::int64_t* xd, int xr, const std::int64_t* yd, int yr,
                                            std::int64_t axis, const std::int64_t* zd, int zr) noexcept {
    broadcast_geometry g;
    std::int64_t xa[max_rank], ya[max_rank];
    int r = 0;
    align_dims(xd, xr, yd, yr, axis, xa, ya, r);
    g.rank = zr;
    std::int64_t sx = 1, sy = 1;
    for (int i = zr - 1; i >= 0; --i) {
        g.zs[i] = zd[i];
        g.xst[i] = xa[i] == 1 && zd[i] != 1 ? 0 : sx;
        g.yst[i] = ya[i] == 1 && zd[i] != 1 ? 0 : sy;
        sx *= xa[i];
        sy *= ya[i];
    }
    int d = zr - 1;
    while (d >= 0 && zd[d] == 1) --d;
    if (d < 0) {  // one element
        g.first_outer = -1;
        g.inner = 1;
        return g;
    }
    g.sx = g.xst[d] != 0;
    g.sy = g.yst[d] != 0;
    g.inner = zd[d];
    int o = d - 1;
    while (o >= 0 && ((g.xst[o] != 0) == (g.sx != 0) || zd[o] == 1) && ((g.yst[o] != 0) == (g.sy != 0) || zd[o] == 1)) {
        g.inner *= zd[o];
        --o;
    }
    g.first_outer = o;
    return g;
}

// Calls run(x_offset, y_offset, z_offset) for every inner run of `g` over an
// output of n elements, in order.
template <class Run> inline void broadcast_runs(const broadcast_geometry& g, std::int64_t n, Run run) noexcept {
    std::int64_t idx[max_rank] = {};
    for (std::int64_t base = 0; base < n; base += g.inner) {
        std::int64_t ox = 0, oy = 0;
        for (int i = 0; i <= g.first_outer; ++i) {
            ox += idx[i] * g.xst[i];
            oy += idx[i] * g.yst[i];
        }
        run(ox, oy, base);
        for (int i = g.first_outer; i >= 0; --i) {
            if (++idx[i] < g.zs[i]) break;
            idx[i] = 0;
        }
    }
}

// Whether F's gradient functors give the same bits on vectors as on
// scalars (true of + - * / max min; pow's vector pow and the C library's
// differ in the last bit, so its gradient stays scalar).
template <class F> inline constexpr bool batch_exact_grad = !std::is_same_v<F, pow_fn>;

// One run of a binary op's gradient: for i < n, g = f.dx(x[i sx], y[i sy],
// out[i], d[i]) goes to dx[i] (sx = 1) or is summed into dx[0] in order
// (sx = 0), likewise f.dy for dy; `assign` writes dx[i] = g rather than
// adding. Null dx or dy: not wanted. Vectors carry whole strides of 1; a
// sum into one element adds the vector's lanes in order, so every element
// gets the bits of the scalar loop.
template <class T, class F>
inline void binary_grad_run(std::int64_t n, const T* x, int sx, const T* y, int sy, const T* out, const T* d, T* dx,
                            T* dy, bool assign, F f) noexcept {
    std::int64_t i = 0;
    T ax = dx && !sx ? dx[0] : T(0), ay = dy && !sy ? dy[0] : T(0);  // the sums of stride-0 sides
    auto put = [assign](T* p, T g) { *p = assign ? g : *p + g; };
    if constexpr (simd_type<T> && batch_exact_grad<F>) {
        using B = batch<T>;
        constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
        const B xs(n >= W && !sx ? *x : T(0)), ys(n >= W && !sy ? *y : T(0));  // a stride-0 side's one value
        alignas(64) T lanes[W];
        for (; i + W <= n; i += W) {
            const B xb = sx ? B::load_unaligned(x + i) : xs, yb = sy ? B::load_unaligned(y + i) : ys;
            const B ob = B::load_unaligned(out + i), db = B::load_unaligned(d + i);
            for (int side = 0; side < 2; ++side) {
                T* g = side ? dy : dx;
                if (!g) continue;
                const B v = side ? f.dy(xb, yb, ob, db) : f.dx(xb, yb, ob, db);
                const bool strided = side ? sy : sx;
                if (strided) {
                    (assign ? v : B::load_unaligned(g + i) + v).store_unaligned(g + i);
                } else {
                    v.store_aligned(lanes);
                    T& acc = side ? ay : ax;
                    for (std::int64_t k = 0; k < W; ++k) acc += lanes[k];
                }
            }
        }
    }
    for (; i < n; ++i) {
        const T xv = x[i * sx], yv = y[i * sy];
        if (dx) {
            const T g = f.dx(xv, yv, out[i], d[i]);
            if (sx) put(dx + i, g);
            else ax += g;
        }
        if (dy) {
            const T g = f.dy(xv, yv, out[i], d[i]);
            if (sy) put(dy + i, g);
            else ay += g;
        }
    }
    if (dx && !sx) dx[0] = ax;
    if (dy && !sy) dy[0] = ay;
}

// The gradient of a broadcasting binary op: dx[.] += f.dx(...), dy[.] +=
// f.dy(...) summed over the broadcast output in its row-major order (run by
// run, binary_grad_run), so a broadcast operand's gradient needs no scratch
// memory. dx or dy may be null (not wanted). X and Y of the same size as
// the output take one assigning run (cpu_ops splits that over threads).
template <class T, class F>
inline void binary_grad(const broadcast_geometry& g, std::int64_t n, std::int64_t xn, std::int64_t yn, const T* x,
                        const T* y, const T* out, const T* d, T* dx, T* dy, F f) noexcept {
    if (xn == n && yn == n) return binary_grad_run(n, x, 1, y, 1, out, d, dx, dy, true, f);
    if (dx) std::fill(dx, dx + xn, T(0));
    if (dy) std::fill(dy, dy + yn, T(0));
    if (n == 0) return;
    broadcast_runs(g, n, [&](std::int64_t ox, std::int64_t oy, std::int64_t oz) {
        binary_grad_run(g.inner, x + ox, g.sx, y + oy, g.sy, out + oz, d + oz, dx ? dx + ox : nullptr,
                        dy ? dy + oy : nullptr, false, f);
    });
}

}  // namespace dlgraph::kernels
