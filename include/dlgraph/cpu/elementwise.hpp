// The CPU kernels of the element-wise ops (ops/elementwise.hpp): the kernel
// core's loops (kernels/elementwise.hpp) split over the thread pool when
// long, broadcasting, the integer division check, and each op's kernel
// table and fusion entry.
#pragma once

#include <cstring>
#include <utility>

#include "dlgraph/kernels/elementwise.hpp"
#include "dlgraph/op.hpp"
#include "dlgraph/ops/elementwise.hpp"
#include "dlgraph/thread_pool.hpp"

namespace dlgraph::cpu_ops {

using kernels::simd_type;

// Elements per thread below which a loop stays on one thread.
inline constexpr std::int64_t loop_per_thread = std::int64_t(1) << 16;

// Splits [0, n) into up to parallelism() pieces that start on whole vectors
// (so every element is computed as a serial loop would), and runs
// piece(begin, end) for each.
template <class T, class P> inline void split_loop(std::int64_t n, P piece) {
    const int tasks = static_cast<int>(std::clamp<std::int64_t>(n / loop_per_thread, 1, parallelism()));
    if (tasks == 1) return piece(std::int64_t(0), n);
    constexpr std::int64_t W = simd_type<T> ? static_cast<std::int64_t>(kernels::batch<T>::size) : 1;
    parallel_for(tasks, [&](int t) {
        const std::int64_t b = n * t / tasks / W * W, e = t + 1 == tasks ? n : n * (t + 1) / tasks / W * W;
        piece(b, e);
    });
}

// The loops kernels call: threaded when long (results as serial).
template <class T, class F>
inline void binary_loop(std::int64_t n, const T* x, int sx, const T* y, int sy, T* z, F f) {
    split_loop<T>(n, [&](std::int64_t b, std::int64_t e) {
        kernels::binary_loop_serial(e - b, x + b * sx, sx, y + b * sy, sy, z + b, f);
    });
}
template <class T, class F> inline void unary_loop(std::int64_t n, const T* x, T* z, F f) {
    split_loop<T>(n, [&](std::int64_t b, std::int64_t e) { kernels::unary_loop_serial(e - b, x + b, z + b, f); });
}

// Runs run(n, x, sx, y, sy, z) over broadcast operands X, Y of T into Z of
// U: the output is visited in row-major order with an inner run as long as
// both operands keep one access pattern (strides sx, sy of 0 or 1).
template <class T, class U, class Run>
void broadcast_each(const Tensor& X, const Tensor& Y, std::int64_t axis, Tensor& Z, Run run) {
    const T* x = X.data<T>();
    const T* y = Y.data<T>();
    U* z = Z.data<U>();
    const std::int64_t n = Z.numel();
    if (n == 0) return;
    if (X.numel() == n && Y.numel() == n) return run(n, x, 1, y, 1, z);
    if (Y.numel() == 1 && X.numel() == n) return run(n, x, 1, y, 0, z);
    if (X.numel() == 1 && Y.numel() == n) return run(n, x, 0, y, 1, z);
    const kernels::broadcast_geometry g = kernels::broadcast_walk_of(
        X.shape().begin(), X.rank(), Y.shape().begin(), Y.rank(), axis, Z.shape().begin(), Z.rank());
    kernels::broadcast_runs(g, n, [&](std::int64_t ox, std::int64_t oy, std::int64_t oz) {
        run(g.inner, x + ox, g.sx, y + oy, g.sy, z + oz);
    });
}

// Binary op f over broadcast operands, threaded where a run is long.
template <class T, class F> void broadcast_apply(const Tensor& X, const Tensor& Y, std::int64_t axis, Tensor& Z, F f) {
    broadcast_each<T, T>(X, Y, axis, Z, [&](std::int64_t n, const T* x, int sx, const T* y, int sy, T* z) {
        binary_loop(n, x, sx, y, sy, z, f);
    });
}

// The Fusible entry of an op whose math is functor F (binary or unary).
template <class F, int Arity> Fusible fusible_of() {
    auto block = []<class T>(type_tag<T>) -> BlockFn {
        return [](std::int64_t n, const void* x, int sx, const void* y, int sy, void* z) {
            if constexpr (Arity == 2)
                kernels::binary_loop_serial(n, static_cast<const T*>(x), sx, static_cast<const T*>(y), sy,
                                            static_cast<T*>(z), F{});
            else
                kernels::unary_loop_serial(n, static_cast<const T*>(x), static_cast<T*>(z), F{});
            (void)sx, (void)y, (void)sy;
        };
    };
    return {Arity, block(type_tag<float>{}), block(type_tag<double>{})};
}

template <class Fn> struct elementwise_binary {
    enum { X = 0, Y = 1 };
    enum { axis = 0 };
    // mod and floordiv: scalar loops (their functors have no vector form).
    static constexpr bool scalar_only = std::is_same_v<Fn, kernels::mod_fn> || std::is_same_v<Fn, kernels::floordiv_fn>;
    template <class T> static void compute(cpu, const KernelContext& c) {
        if constexpr (std::is_integral_v<T> && (scalar_only || std::is_same_v<Fn, kernels::div_fn>)) {
            // Every element of Y divides some element of a non-empty output.
            if (c.out(0).numel() > 0 && kernels::find_zero(c.in(Y).template data<T>(), c.in(Y).numel()))
                return c.fault->raise(fault_code::div_by_zero);
        }
        if constexpr (scalar_only)
            broadcast_each<T, T>(c.in(X), c.in(Y), c.attr(axis).i, c.out(0),
                                 [](std::int64_t n, const T* x, int sx, const T* y, int sy, T* z) {
                                     for (std::int64_t i = 0; i < n; ++i) z[i] = Fn{}(x[i * sx], y[i * sy]);
                                 });
        else
            broadcast_apply<T>(c.in(X), c.in(Y), c.attr(axis).i, c.out(0), Fn{});
    }
    static void attach(OpDef& d) {
        d.kernels = cpu_kernels<elementwise_binary, float, double, std::int32_t, std::int64_t>();
        d.in_place = true;  // z[i] from x[i] and y[i] (or a broadcast element): Out may be X or Y
        if constexpr (!std::is_same_v<Fn, kernels::pow_fn> && !scalar_only) d.fusible = fusible_of<Fn, 2>();
    }
};

template <class Fn> struct elementwise_binary_grad {
    enum { X = 0, Y = 1, Out = 2, DOut = 3 };
    enum { DX = 0, DY = 1 };
    enum { axis = 0 };
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Tensor& y = c.in(Y);
        const Shape& zs = c.in(DOut).shape();
        const std::int64_t n = zs.numel();
        const T *xd = x.template data<T>(), *yd = y.template data<T>();
        // Without Out (a gradient that does not read it), Out@GRAD of its
        // shape stands in for it.
        const T* dd = c.in(DOut).template data<T>();
        const T* od = c.in_count(Out) ? c.in(Out).template data<T>() : dd;
        T* dx = c.out_count(DX) ? c.out(DX).template data<T>() : nullptr;
        T* dy = c.out_count(DY) ? c.out(DY).template data<T>() : nullptr;
        if (x.numel() == n && y.numel() == n) {  // element by element: split over threads, bits as one loop
            return split_loop<T>(n, [&](std::int64_t b, std::int64_t e) {
                kernels::binary_grad_run(e - b, xd + b, 1, yd + b, 1, od + b, dd + b, dx ? dx + b : nullptr,
                                         dy ? dy + b : nullptr, true, Fn{});
            });
        }
        const kernels::broadcast_geometry g = kernels::broadcast_walk_of(x.shape().begin(), x.rank(), y.shape().begin(),
                                                                         y.rank(), c.attr(axis).i, zs.begin(), zs.rank());
        kernels::binary_grad(g, n, x.numel(), y.numel(), xd, yd, od, dd, dx, dy, Fn{});
    }
    static void attach(OpDef& d) { d.kernels = cpu_kernels<elementwise_binary_grad, float, double>(); }
};

template <class Fn, class... Ts> struct elementwise_unary {
    template <class T> static void compute(cpu, const KernelContext& c) {
        unary_loop(c.in(0).numel(), c.in(0).template data<T>(), c.out(0).template data<T>(), Fn{});
    }
    static void attach(OpDef& d) {
        d.kernels = cpu_kernels<elementwise_unary, Ts...>();
        d.in_place = true;
        d.fusible = fusible_of<Fn, 1>();
    }
};

// X@GRAD of a unary op from X (or Out), Out and Out@GRAD by f.grad.
template <class T, class F> void unary_grad_compute(const KernelContext& c, F f) {
    enum { X = 0, Out = 1, DOut = 2 };
    // X is absent where the gradient reads only Out (f ignores it then).
    const T *y = c.in(Out).template data<T>(), *d = c.in(DOut).template data<T>();
    const T* x = c.in_count(X) ? c.in(X).template data<T>() : y;
    T* dx = c.out(0).template data<T>();
    split_loop<T>(c.in(DOut).numel(), [&](std::int64_t b, std::int64_t e) {
        kernels::unary_grad_loop(e - b, x + b, y + b, d + b, dx + b, f);
    });
}

template <class Fn> struct elementwise_unary_grad {
    enum { X = 0, Out = 1, DOut = 2 };
    template <class T> static void compute(cpu, const KernelContext& c) { unary_grad_compute<T>(c, Fn{}); }
    static void attach(OpDef& d) {
        d.kernels = cpu_kernels<elementwise_unary_grad, float, double>();
        d.in_place = true;  // dX[i] from dOut[i] and X[i] or Out[i]
        // Fused as dX = g(Out@GRAD, Out or X) where Fn says which one its
        // grad reads: a chain of unary grads runs as one pass.
        if constexpr (requires { bool(Fn::grad_reads_out); }) {
            d.fusible = fusible_of<kernels::grad_by_fn<Fn>, 2>();
            d.fusible.slots = {DOut, Fn::grad_reads_out ? Out : X};
            d.fusible.axis_attr = -1;
        }
    }
};

// A unary op whose functor Fn<T> holds the op's first Fn<T>::params
// attributes, all FLOAT (leaky_relu's alpha, ...), as T. Not fusible: a
// fused block has no attributes.
template <template <class> class Fn, class T, std::size_t... I>
Fn<T> functor_of_attrs(const KernelContext& c, std::index_sequence<I...>) {
    return Fn<T>{kernels::convert<T>(c.attr(static_cast<int>(I)).f)...};
}
template <template <class> class Fn, class T> Fn<T> functor_of_attrs(const KernelContext& c) {
    return functor_of_attrs<Fn, T>(c, std::make_index_sequence<static_cast<std::size_t>(Fn<T>::params)>{});
}
template <template <class> class Fn> struct elementwise_unary_attrs {
    template <class T> static void compute(cpu, const KernelContext& c) {
        unary_loop(c.in(0).numel(), c.in(0).template data<T>(), c.out(0).template data<T>(), functor_of_attrs<Fn, T>(c));
    }
    static void attach(OpDef& d) {
        d.kernels = cpu_kernels<elementwise_unary_attrs, float, double>();
        d.in_place = true;
    }
};
template <template <class> class Fn> struct elementwise_unary_attrs_grad {
    template <class T> static void compute(cpu, const KernelContext& c) {
        unary_grad_compute<T>(c, functor_of_attrs<Fn, T>(c));
    }
    static void attach(OpDef& d) {
        d.kernels = cpu_kernels<elementwise_unary_attrs_grad, float, double>();
        d.in_place = true;
    }
};

// gelu: exact, or the tanh form where `approximate` is set.
struct gelu_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const std::int64_t n = c.in(0).numel();
        const T* x = c.in(0).template data<T>();
        T* z = c.out(0).template data<T>();
        if (c.attr(0).b) unary_loop(n, x, z, kernels::gelu_tanh_fn{});
        else unary_loop(n, x, z, kernels::gelu_fn{});
    }
};
struct gelu_grad_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        if (c.attr(0).b) unary_grad_compute<T>(c, kernels::gelu_tanh_fn{});
        else unary_grad_compute<T>(c, kernels::gelu_fn{});
    }
};

struct scale_op {
    enum { scale = 0, bias = 1, bias_after_scale = 2 };
    template <class T> static void compute(cpu, const KernelContext& c) {
        const T s = kernels::convert<T>(c.attr(scale).f), b = kernels::convert<T>(c.attr(bias).f);
        const std::int64_t n = c.in(0).numel();
        if (c.attr(bias_after_scale).b)
            unary_loop(n, c.in(0).template data<T>(), c.out(0).template data<T>(), kernels::scale_fn<T, true>{s, b});
        else
            unary_loop(n, c.in(0).template data<T>(), c.out(0).template data<T>(), kernels::scale_fn<T, false>{s, b});
    }
};

struct assign_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(0);
        if (x.raw() != c.out(0).raw() && x.bytes()) std::memcpy(c.out(0).raw(), x.raw(), x.bytes());
    }
};

inline void elementwise_add_kernels(OpDef& d) { elementwise_binary<kernels::add_fn>::attach(d); }
inline void elementwise_sub_kernels(OpDef& d) { elementwise_binary<kernels::sub_fn>::attach(d); }
inline void elementwise_mul_kernels(OpDef& d) { elementwise_binary<kernels::mul_fn>::attach(d); }
inline void elementwise_div_kernels(OpDef& d) { elementwise_binary<kernels::div_fn>::attach(d); }
inline void elementwise_max_kernels(OpDef& d) { elementwise_binary<kernels::max_fn>::attach(d); }
inline void elementwise_min_kernels(OpDef& d) { elementwise_binary<kernels::min_fn>::attach(d); }
inline void elementwise_pow_kernels(OpDef& d) { elementwise_binary<kernels::pow_fn>::attach(d); }
inline void elementwise_mod_kernels(OpDef& d) { elementwise_binary<kernels::mod_fn>::attach(d); }
inline void elementwise_floordiv_kernels(OpDef& d) { elementwise_binary<kernels::floordiv_fn>::attach(d); }
inline void elementwise_add_grad_kernels(OpDef& d) { elementwise_binary_grad<kernels::add_fn>::attach(d); }
inline void elementwise_sub_grad_kernels(OpDef& d) { elementwise_binary_grad<kernels::sub_fn>::attach(d); }
inline void elementwise_mul_grad_kernels(OpDef& d) { elementwise_binary_grad<kernels::mul_fn>::attach(d); }
inline void elementwise_div_grad_kernels(OpDef& d) { elementwise_binary_grad<kernels::div_fn>::attach(d); }
inline void elementwise_max_grad_kernels(OpDef& d) { elementwise_binary_grad<kernels::max_fn>::attach(d); }
inline void elementwise_min_grad_kernels(OpDef& d) { elementwise_binary_grad<kernels::min_fn>::attach(d); }
inline void elementwise_pow_grad_kernels(OpDef& d) { elementwise_binary_grad<kernels::pow_fn>::attach(d); }

inline void relu_kernels(OpDef& d) { elementwise_unary<kernels::relu_fn, float, double>::attach(d); }
inline void sigmoid_kernels(OpDef& d) { elementwise_unary<kernels::sigmoid_fn, float, double>::attach(d); }
inline void tanh_kernels(OpDef& d) { elementwise_unary<kernels::tanh_fn, float, double>::attach(d); }
inline void exp_kernels(OpDef& d) { elementwise_unary<kernels::exp_fn, float, double>::attach(d); }
inline void log_kernels(OpDef& d) { elementwise_unary<kernels::log_fn, float, double>::attach(d); }
inline void sqrt_kernels(OpDef& d) { elementwise_unary<kernels::sqrt_fn, float, double>::attach(d); }
inline void abs_kernels(OpDef& d) {
    elementwise_unary<kernels::abs_fn, float, double, std::int32_t, std::int64_t>::attach(d);
}
inline void square_kernels(OpDef& d) {
    elementwise_unary<kernels::square_fn, float, double, std::int32_t, std::int64_t>::attach(d);
}
inline void relu_grad_kernels(OpDef& d) { elementwise_unary_grad<kernels::relu_fn>::attach(d); }
inline void sigmoid_grad_kernels(OpDef& d) { elementwise_unary_grad<kernels::sigmoid_fn>::attach(d); }
inline void tanh_grad_kernels(OpDef& d) { elementwise_unary_grad<kernels::tanh_fn>::attach(d); }
inline void exp_grad_kernels(OpDef& d) { elementwise_unary_grad<kernels::exp_fn>::attach(d); }
inline void log_grad_kernels(OpDef& d) { elementwise_unary_grad<kernels::log_fn>::attach(d); }
inline void sqrt_grad_kernels(OpDef& d) { elementwise_unary_grad<kernels::sqrt_fn>::attach(d); }
inline void abs_grad_kernels(OpDef& d) { elementwise_unary_grad<kernels::abs_fn>::attach(d); }
inline void square_grad_kernels(OpDef& d) { elementwise_unary_grad<kernels::square_fn>::attach(d); }

inline void softsign_kernels(OpDef& d) { elementwise_unary<kernels::softsign_fn, float, double>::attach(d); }
inline void sin_kernels(OpDef& d) { elementwise_unary<kernels::sin_fn, float, double>::attach(d); }
inline void cos_kernels(OpDef& d) { elementwise_unary<kernels::cos_fn, float, double>::attach(d); }
inline void reciprocal_kernels(OpDef& d) { elementwise_unary<kernels::reciprocal_fn, float, double>::attach(d); }
inline void rsqrt_kernels(OpDef& d) { elementwise_unary<kernels::rsqrt_fn, float, double>::attach(d); }
inline void floor_kernels(OpDef& d) { elementwise_unary<kernels::floor_fn, float, double>::attach(d); }
inline void ceil_kernels(OpDef& d) { elementwise_unary<kernels::ceil_fn, float, double>::attach(d); }
inline void round_kernels(OpDef& d) { elementwise_unary<kernels::round_fn, float, double>::attach(d); }
inline void sign_kernels(OpDef& d) { elementwise_unary<kernels::sign_fn, float, double>::attach(d); }
inline void softsign_grad_kernels(OpDef& d) { elementwise_unary_grad<kernels::softsign_fn>::attach(d); }
inline void sin_grad_kernels(OpDef& d) { elementwise_unary_grad<kernels::sin_fn>::attach(d); }
inline void cos_grad_kernels(OpDef& d) { elementwise_unary_grad<kernels::cos_fn>::attach(d); }
inline void reciprocal_grad_kernels(OpDef& d) { elementwise_unary_grad<kernels::reciprocal_fn>::attach(d); }
inline void rsqrt_grad_kernels(OpDef& d) { elementwise_unary_grad<kernels::rsqrt_fn>::attach(d); }
inline void floor_grad_kernels(OpDef& d) { elementwise_unary_grad<kernels::floor_fn>::attach(d); }
inline void ceil_grad_kernels(OpDef& d) { elementwise_unary_grad<kernels::ceil_fn>::attach(d); }
inline void round_grad_kernels(OpDef& d) { elementwise_unary_grad<kernels::round_fn>::attach(d); }
inline void sign_grad_kernels(OpDef& d) { elementwise_unary_grad<kernels::sign_fn>::attach(d); }

inline void gelu_kernels(OpDef& d) { d.kernels = cpu_kernels<gelu_op, float, double>(); }
inline void gelu_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<gelu_grad_op, float, double>(); }
inline void leaky_relu_kernels(OpDef& d) { elementwise_unary_attrs<kernels::leaky_relu_fn>::attach(d); }
inline void elu_kernels(OpDef& d) { elementwise_unary_attrs<kernels::elu_fn>::attach(d); }
inline void relu6_kernels(OpDef& d) { elementwise_unary_attrs<kernels::relu6_fn>::attach(d); }
inline void hard_sigmoid_kernels(OpDef& d) { elementwise_unary_attrs<kernels::hard_sigmoid_fn>::attach(d); }
inline void hard_swish_kernels(OpDef& d) { elementwise_unary_attrs<kernels::hard_swish_fn>::attach(d); }
inline void softplus_kernels(OpDef& d) { elementwise_unary_attrs<kernels::softplus_fn>::attach(d); }
inline void swish_kernels(OpDef& d) { elementwise_unary_attrs<kernels::swish_fn>::attach(d); }
inline void clip_kernels(OpDef& d) { elementwise_unary_attrs<kernels::clip_fn>::attach(d); }
inline void pow_kernels(OpDef& d) { elementwise_unary_attrs<kernels::pow_factor_fn>::attach(d); }
inline void leaky_relu_grad_kernels(OpDef& d) { elementwise_unary_attrs_grad<kernels::leaky_relu_fn>::attach(d); }
inline void elu_grad_kernels(OpDef& d) { elementwise_unary_attrs_grad<kernels::elu_fn>::attach(d); }
inline void relu6_grad_kernels(OpDef& d) { elementwise_unary_attrs_grad<kernels::relu6_fn>::attach(d); }
inline void hard_sigmoid_grad_kernels(OpDef& d) { elementwise_unary_attrs_grad<kernels::hard_sigmoid_fn>::attach(d); }
inline void hard_swish_grad_kernels(OpDef& d) { elementwise_unary_attrs_grad<kernels::hard_swish_fn>::attach(d); }
inline void softplus_grad_kernels(OpDef& d) { elementwise_unary_attrs_grad<kernels::softplus_fn>::attach(d); }
inline void swish_grad_kernels(OpDef& d) { elementwise_unary_attrs_grad<kernels::swish_fn>::attach(d); }
inline void clip_grad_kernels(OpDef& d) { elementwise_unary_attrs_grad<kernels::clip_fn>::attach(d); }
inline void pow_grad_kernels(OpDef& d) { elementwise_unary_attrs_grad<kernels::pow_factor_fn>::attach(d); }

inline void scale_kernels(OpDef& d) {
    d.kernels = cpu_kernels<scale_op, float, double, std::int32_t, std::int64_t>();
    d.in_place = true;  // element by element
}
inline void assign_kernels(OpDef& d) {
    d.kernels = cpu_kernels<assign_op, bool, std::int16_t, std::int32_t, std::int64_t, float16, float, double>();
}

}  // namespace dlgraph::cpu_ops
