// Element-wise ops: binary ops with NumPy or Paddle-axis broadcasting, unary
// math, scale and assign. Each functor is written once for scalars and xsimd
// batches (one definition gives both paths).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>

#include "dlgraph/op.hpp"
#include "dlgraph/simd.hpp"
#include "dlgraph/thread_pool.hpp"

namespace dlgraph::ops {

template <class T> inline constexpr bool simd_type = std::is_same_v<T, float> || std::is_same_v<T, double>;
template <class V> inline constexpr bool is_batch = xsimd::is_batch<V>::value;

// Applies z[i] = f(x[i*sx], y[i*sy]) for i < n, with sx, sy in {0, 1}.
// For FP types the last partial vector also goes through the batch path
// (via a padded copy), so an element's result does not depend on where it
// sits: xsimd's exp or tanh and the C library's differ in the last bit, and
// fused chains cut the data at other places than the unfused ops.
template <class T, class F>
inline void binary_loop_serial(std::int64_t n, const T* x, int sx, const T* y, int sy, T* z, F f) {
    std::int64_t i = 0;
    if constexpr (simd_type<T>) {
        using B = xsimd::batch<T>;
        constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
        if (sx && sy) {
            for (; i + W <= n; i += W) f(B::load_unaligned(x + i), B::load_unaligned(y + i)).store_unaligned(z + i);
        } else if (sx) {
            B yb(*y);
            for (; i + W <= n; i += W) f(B::load_unaligned(x + i), yb).store_unaligned(z + i);
        } else if (sy) {
            B xb(*x);
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

template <class T, class F> inline void unary_loop_serial(std::int64_t n, const T* x, T* z, F f) {
    std::int64_t i = 0;
    if constexpr (simd_type<T>) {
        using B = xsimd::batch<T>;
        constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
        for (; i + W <= n; i += W) f(B::load_unaligned(x + i)).store_unaligned(z + i);
        if (i < n) {  // as in binary_loop
            alignas(64) T xt[W] = {}, zt[W];
            std::copy(x + i, x + n, xt);
            f(B::load_aligned(xt)).store_aligned(zt);
            std::copy(zt, zt + (n - i), z + i);
        }
        return;
    }
    for (; i < n; ++i) z[i] = f(x[i]);
}

// The Fusible entry of an op whose math is functor F (binary or unary).
template <class F, int Arity> Fusible fusible_of() {
    auto block = []<class T>(type_tag<T>) -> BlockFn {
        return [](std::int64_t n, const void* x, int sx, const void* y, int sy, void* z) {
            if constexpr (Arity == 2)
                binary_loop_serial(n, static_cast<const T*>(x), sx, static_cast<const T*>(y), sy, static_cast<T*>(z), F{});
            else
                unary_loop_serial(n, static_cast<const T*>(x), static_cast<T*>(z), F{});
            (void)sx, (void)y, (void)sy;
        };
    };
    return {Arity, block(type_tag<float>{}), block(type_tag<double>{})};
}

// Elements per thread below which a loop stays on one thread.
inline constexpr std::int64_t loop_per_thread = std::int64_t(1) << 16;

// Splits [0, n) into up to parallelism() pieces that start on whole vectors
// (so every element is computed as a serial loop would), and runs
// piece(begin, end) for each.
template <class T, class P> inline void split_loop(std::int64_t n, P piece) {
    const int tasks = static_cast<int>(std::clamp<std::int64_t>(n / loop_per_thread, 1, parallelism()));
    if (tasks == 1) return piece(std::int64_t(0), n);
    constexpr std::int64_t W = simd_type<T> ? static_cast<std::int64_t>(xsimd::batch<T>::size) : 1;
    parallel_for(tasks, [&](int t) {
        const std::int64_t b = n * t / tasks / W * W, e = t + 1 == tasks ? n : n * (t + 1) / tasks / W * W;
        piece(b, e);
    });
}

// The loops kernels call: threaded when long (results as serial).
template <class T, class F>
inline void binary_loop(std::int64_t n, const T* x, int sx, const T* y, int sy, T* z, F f) {
    split_loop<T>(n, [&](std::int64_t b, std::int64_t e) {
        binary_loop_serial(e - b, x + b * sx, sx, y + b * sy, sy, z + b, f);
    });
}
template <class T, class F> inline void unary_loop(std::int64_t n, const T* x, T* z, F f) {
    split_loop<T>(n, [&](std::int64_t b, std::int64_t e) { unary_loop_serial(e - b, x + b, z + b, f); });
}

// ---- broadcasting ----------------------------------------------------------

// The Y shape padded to X's rank as Paddle's `axis` places it; axis -1 means
// NumPy alignment (trailing dims), with X padded instead when Y is longer.
inline void align_shapes(const Shape& x, const Shape& y, std::int64_t axis, Shape& xa, Shape& ya, bool& ok) {
    ok = true;
    xa = Shape();
    ya = Shape();
    if (axis == -1 || x.rank() < y.rank()) {
        const int r = std::max(x.rank(), y.rank());
        for (int i = x.rank(); i < r; ++i) xa.push_back(1);
        for (auto v : x) xa.push_back(v);
        for (int i = y.rank(); i < r; ++i) ya.push_back(1);
        for (auto v : y) ya.push_back(v);
        return;
    }
    if (axis < 0 || axis + y.rank() > x.rank()) {
        ok = false;
        return;
    }
    xa = x;
    for (std::int64_t i = 0; i < axis; ++i) ya.push_back(1);
    for (auto v : y) ya.push_back(v);
    while (ya.rank() < x.rank()) ya.push_back(1);
}

inline Shape broadcast_infer(const InferContext& c, const Shape& x, const Shape& y, std::int64_t axis) {
    Shape xa, ya;
    bool ok;
    align_shapes(x, y, axis, xa, ya, ok);
    auto fail = [&](const std::string& why) {
        c.fail("dlgraph.shape.broadcast", "X is " + to_string(x) + " but Y is " + to_string(y) + " (axis " +
                                              std::to_string(axis) + "): " + why);
    };
    if (!ok) fail("Y does not fit into X at that axis");
    Shape out;
    for (int i = 0; i < xa.rank(); ++i) {
        auto a = xa[i], b = ya[i];
        std::int64_t d;
        if (a == b) d = a;
        else if (a == 1) d = b;
        else if (b == 1) d = a;
        else if (a == -1) d = b;
        else if (b == -1) d = a;
        else { fail("dim " + std::to_string(i) + " is " + std::to_string(a) + " vs " + std::to_string(b)); }
        out.push_back(d);
    }
    if (axis != -1 && !(out == xa) && x.known() && y.known()) fail("with an axis, only Y is broadcast onto X");
    return out;
}

// Runs f over broadcast operands: the output is visited in row-major order
// with an inner run as long as both operands keep one access pattern.
template <class T, class F>
void broadcast_apply(const Tensor& X, const Tensor& Y, std::int64_t axis, Tensor& Z, F f) {
    const T* x = X.data<T>();
    const T* y = Y.data<T>();
    T* z = Z.data<T>();
    const std::int64_t n = Z.numel();
    if (n == 0) return;
    if (X.numel() == n && Y.numel() == n) return binary_loop(n, x, 1, y, 1, z, f);
    if (Y.numel() == 1 && X.numel() == n) return binary_loop(n, x, 1, y, 0, z, f);
    if (X.numel() == 1 && Y.numel() == n) return binary_loop(n, x, 0, y, 1, z, f);

    Shape xa, ya;
    bool ok;
    align_shapes(X.shape(), Y.shape(), axis, xa, ya, ok);
    const Shape& zs = Z.shape();
    const int r = zs.rank();
    std::int64_t xst[max_rank], yst[max_rank], zst[max_rank];
    row_major_strides(xa, xst);
    row_major_strides(ya, yst);
    row_major_strides(zs, zst);
    for (int i = 0; i < r; ++i) {
        if (xa[i] == 1 && zs[i] != 1) xst[i] = 0;
        if (ya[i] == 1 && zs[i] != 1) yst[i] = 0;
    }
    // Inner run: trailing dims with one pattern (full or broadcast) per operand.
    int d = r - 1;
    while (d >= 0 && zs[d] == 1) --d;
    if (d < 0) return binary_loop(n, x, 1, y, 1, z, f);
    const int sx = xst[d] != 0, sy = yst[d] != 0;
    std::int64_t inner = zs[d];
    int first_outer = d - 1;
    while (first_outer >= 0 && ((xst[first_outer] != 0) == sx || zs[first_outer] == 1) &&
           ((yst[first_outer] != 0) == sy || zs[first_outer] == 1)) {
        inner *= zs[first_outer];
        --first_outer;
    }
    std::int64_t idx[max_rank] = {};
    for (std::int64_t base = 0; base < n; base += inner) {
        std::int64_t ox = 0, oy = 0;
        for (int i = 0; i <= first_outer; ++i) { ox += idx[i] * xst[i]; oy += idx[i] * yst[i]; }
        binary_loop(inner, x + ox, sx, y + oy, sy, z + base, f);
        for (int i = first_outer; i >= 0; --i) {
            if (++idx[i] < zs[i]) break;
            idx[i] = 0;
        }
    }
}

// ---- binary ops ---------------------------------------------------------------

struct add_fn {
    template <class V> V operator()(V a, V b) const { return a + b; }
    template <class V> V dx(V, V, V, V d) const { return d; }
    template <class V> V dy(V, V, V, V d) const { return d; }
};
struct sub_fn {
    template <class V> V operator()(V a, V b) const { return a - b; }
    template <class V> V dx(V, V, V, V d) const { return d; }
    template <class V> V dy(V, V, V, V d) const { return -d; }
};
struct mul_fn {
    template <class V> V operator()(V a, V b) const { return a * b; }
    template <class V> V dx(V, V y, V, V d) const { return d * y; }
    template <class V> V dy(V x, V, V, V d) const { return d * x; }
};
// Integer division by zero is a fault the kernel finds before dividing
// (elementwise_binary::compute); a divisor of -1 negates with wrap-around,
// so INT_MIN / -1 is INT_MIN (as NumPy gives) rather than a trap.
struct div_fn {
    template <class V> V operator()(V a, V b) const {
        if constexpr (std::is_integral_v<V>) {
            if (b == -1) return static_cast<V>(std::make_unsigned_t<V>(0) - static_cast<std::make_unsigned_t<V>>(a));
            if (b == 0) return 0;
        }
        return a / b;
    }
    template <class V> V dx(V, V y, V, V d) const { return d / y; }
    template <class V> V dy(V, V y, V out, V d) const { return -d * out / y; }
};
struct max_fn {
    template <class V> V operator()(V a, V b) const {
        if constexpr (is_batch<V>) return xsimd::max(a, b); else return a > b ? a : b;
    }
    // Ties send the gradient to Y, as PaddlePaddle does.
    template <class V> V dx(V x, V y, V, V d) const { return x > y ? d : V(0); }
    template <class V> V dy(V x, V y, V, V d) const { return x > y ? V(0) : d; }
};
struct min_fn {
    template <class V> V operator()(V a, V b) const {
        if constexpr (is_batch<V>) return xsimd::min(a, b); else return a < b ? a : b;
    }
    template <class V> V dx(V x, V y, V, V d) const { return x < y ? d : V(0); }
    template <class V> V dy(V x, V y, V, V d) const { return x < y ? V(0) : d; }
};
struct pow_fn {
    template <class V> V operator()(V a, V b) const {
        if constexpr (is_batch<V>) return xsimd::pow(a, b);
        else if constexpr (std::is_integral_v<V>) return static_cast<V>(std::pow(static_cast<double>(a), static_cast<double>(b)));
        else return std::pow(a, b);
    }
    template <class V> V dx(V x, V y, V, V d) const { return d * y * std::pow(x, y - V(1)); }
    template <class V> V dy(V x, V, V out, V d) const { return d * out * std::log(x); }
};

template <class Fn> struct elementwise_binary {
    enum { X = 0, Y = 1 };
    enum { axis = 0 };
    static void infer(const InferContext& c) {
        c.same_dtype({X, Y});
        c.set(0, c.dtype(X), broadcast_infer(c, c.shape(X), c.shape(Y), c.attr(axis).i));
    }
    template <class T> static void compute(cpu, const KernelContext& c) {
        if constexpr (std::is_integral_v<T> && std::is_same_v<Fn, div_fn>) {
            // Every element of Y divides some element of a non-empty output.
            const T* y = c.in(Y).template data<T>();
            if (c.out(0).numel() > 0 && std::find(y, y + c.in(Y).numel(), T(0)) != y + c.in(Y).numel())
                return c.fault->raise(fault_code::div_by_zero);
        }
        broadcast_apply<T>(c.in(X), c.in(Y), c.attr(axis).i, c.out(0), Fn{});
    }
    static OpDef make(std::string_view type, std::string_view grad_type, std::string_view doc) {
        OpDef d{type, {{"X"}, {"Y"}}, {{"Out"}}, {{"axis", Attribute::make_int("axis", -1)}}, &infer};
        d.kernels = cpu_kernels<elementwise_binary, float, double, std::int32_t, std::int64_t>();
        d.doc = doc;
        if constexpr (!std::is_same_v<Fn, pow_fn>) d.fusible = fusible_of<Fn, 2>();
        d.grad_spec = {grad_type, {"X", "Y"}, {"Out"}, {"X", "Y"}};
        return d;
    }
};

// The grad op of a binary op: X, Y, Out, Out@GRAD -> X@GRAD, Y@GRAD (each
// optional). Gradients are accumulated over the broadcast output, which also
// sums them over the dims an operand was broadcast along; no scratch memory.
template <class Fn> struct elementwise_binary_grad {
    enum { X = 0, Y = 1, Out = 2, DOut = 3 };
    enum { DX = 0, DY = 1 };
    enum { axis = 0 };
    static void infer(const InferContext& c) {
        c.same_dtype({X, Y, Out, DOut});
        if (c.shape(Out).known() && c.shape(DOut).known() && !(c.shape(Out) == c.shape(DOut)))
            c.fail("dlgraph.shape.grad", "Out is " + to_string(c.shape(Out)) + " but Out@GRAD is " + to_string(c.shape(DOut)));
        if (c.out_count(DX)) c.set(DX, c.dtype(X), c.shape(X));
        if (c.out_count(DY)) c.set(DY, c.dtype(Y), c.shape(Y));
    }
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Fn f{};
        const Tensor& Xt = c.in(X);
        const Tensor& Yt = c.in(Y);
        const T* x = Xt.template data<T>();
        const T* y = Yt.template data<T>();
        const T* out = c.in(Out).template data<T>();
        const T* d = c.in(DOut).template data<T>();
        T* dx = c.out_count(DX) ? c.out(DX).template data<T>() : nullptr;
        T* dy = c.out_count(DY) ? c.out(DY).template data<T>() : nullptr;
        const Shape& zs = c.in(DOut).shape();
        const std::int64_t n = zs.numel();
        if (Xt.numel() == n && Yt.numel() == n) {  // no broadcasting
            for (std::int64_t i = 0; i < n; ++i) {
                if (dx) dx[i] = f.dx(x[i], y[i], out[i], d[i]);
                if (dy) dy[i] = f.dy(x[i], y[i], out[i], d[i]);
            }
            return;
        }
        if (dx) std::fill(dx, dx + Xt.numel(), T(0));
        if (dy) std::fill(dy, dy + Yt.numel(), T(0));
        if (n == 0) return;
        Shape xa, ya;
        bool ok;
        align_shapes(Xt.shape(), Yt.shape(), c.attr(axis).i, xa, ya, ok);
        const int r = zs.rank();
        std::int64_t xst[max_rank], yst[max_rank], idx[max_rank] = {};
        row_major_strides(xa, xst);
        row_major_strides(ya, yst);
        for (int i = 0; i < r; ++i) {
            if (xa[i] == 1 && zs[i] != 1) xst[i] = 0;
            if (ya[i] == 1 && zs[i] != 1) yst[i] = 0;
        }
        std::int64_t ox = 0, oy = 0;
        for (std::int64_t i = 0; i < n; ++i) {
            if (dx) dx[ox] += f.dx(x[ox], y[oy], out[i], d[i]);
            if (dy) dy[oy] += f.dy(x[ox], y[oy], out[i], d[i]);
            for (int k = r - 1; k >= 0; --k) {  // odometer, offsets kept incrementally
                ox += xst[k];
                oy += yst[k];
                if (++idx[k] < zs[k]) break;
                ox -= xst[k] * zs[k];
                oy -= yst[k] * zs[k];
                idx[k] = 0;
            }
        }
    }
    static OpDef make(std::string_view type) {
        OpDef d{type, {{"X"}, {"Y"}, {"Out"}, {"Out@GRAD"}}, {{"X@GRAD", false, true}, {"Y@GRAD", false, true}},
                {{"axis", Attribute::make_int("axis", -1)}}, &infer};
        d.kernels = cpu_kernels<elementwise_binary_grad, float, double>();
        d.doc = "X@GRAD, Y@GRAD of a broadcasting binary op";
        return d;
    }
};

inline OpDef elementwise_add_def() { return elementwise_binary<add_fn>::make("elementwise_add", "elementwise_add_grad", "Out = X + Y"); }
inline OpDef elementwise_sub_def() { return elementwise_binary<sub_fn>::make("elementwise_sub", "elementwise_sub_grad", "Out = X - Y"); }
inline OpDef elementwise_mul_def() { return elementwise_binary<mul_fn>::make("elementwise_mul", "elementwise_mul_grad", "Out = X * Y"); }
inline OpDef elementwise_div_def() { return elementwise_binary<div_fn>::make("elementwise_div", "elementwise_div_grad", "Out = X / Y"); }
inline OpDef elementwise_max_def() { return elementwise_binary<max_fn>::make("elementwise_max", "elementwise_max_grad", "Out = max(X, Y)"); }
inline OpDef elementwise_min_def() { return elementwise_binary<min_fn>::make("elementwise_min", "elementwise_min_grad", "Out = min(X, Y)"); }
inline OpDef elementwise_pow_def() { return elementwise_binary<pow_fn>::make("elementwise_pow", "elementwise_pow_grad", "Out = X ^ Y"); }

// ---- unary ops ------------------------------------------------------------------

struct relu_fn {
    template <class V> V operator()(V a) const {
        if constexpr (is_batch<V>) return xsimd::max(a, V(0)); else return a > V(0) ? a : V(0);
    }
    template <class V> V grad(V, V out, V dout) const {
        if constexpr (is_batch<V>) return xsimd::select(out > V(0), dout, V(0)); else return out > V(0) ? dout : V(0);
    }
};
struct sigmoid_fn {
    template <class V> V operator()(V a) const {
        if constexpr (is_batch<V>) return V(1) / (V(1) + xsimd::exp(-a)); else return V(1) / (V(1) + std::exp(-a));
    }
    template <class V> V grad(V, V out, V dout) const { return dout * out * (V(1) - out); }
};
struct tanh_fn {
    template <class V> V operator()(V a) const {
        if constexpr (is_batch<V>) return xsimd::tanh(a); else return std::tanh(a);
    }
    template <class V> V grad(V, V out, V dout) const { return dout * (V(1) - out * out); }
};
struct exp_fn {
    template <class V> V operator()(V a) const {
        if constexpr (is_batch<V>) return xsimd::exp(a); else return std::exp(a);
    }
    template <class V> V grad(V, V out, V dout) const { return dout * out; }
};
struct log_fn {
    template <class V> V operator()(V a) const {
        if constexpr (is_batch<V>) return xsimd::log(a); else return std::log(a);
    }
    template <class V> V grad(V x, V, V dout) const { return dout / x; }
};
struct sqrt_fn {
    template <class V> V operator()(V a) const {
        if constexpr (is_batch<V>) return xsimd::sqrt(a); else return std::sqrt(a);
    }
    template <class V> V grad(V, V out, V dout) const { return dout * V(0.5) / out; }
};
struct abs_fn {
    template <class V> V operator()(V a) const {
        if constexpr (is_batch<V>) return xsimd::abs(a); else return a < V(0) ? -a : a;
    }
    template <class V> V grad(V x, V, V dout) const {
        if constexpr (is_batch<V>) return xsimd::select(x > V(0), dout, xsimd::select(x < V(0), -dout, V(0)));
        else return x > V(0) ? dout : x < V(0) ? -dout : V(0);
    }
};
struct square_fn {
    template <class V> V operator()(V a) const { return a * a; }
    template <class V> V grad(V x, V, V dout) const { return dout * V(2) * x; }
};

// Same shape and dtype as X.
inline void same_as_x_infer(const InferContext& c) { c.set(0, c.dtype(0), c.shape(0)); }

// X@GRAD[i] = Fn::grad(X[i], Out[i], Out@GRAD[i]), over three streams.
template <class T, class F> inline void unary_grad_loop(std::int64_t n, const T* x, const T* y, const T* dy, T* dx, F f) {
    std::int64_t i = 0;
    if constexpr (simd_type<T>) {
        using B = xsimd::batch<T>;
        constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
        for (; i + W <= n; i += W)
            f.grad(B::load_unaligned(x + i), B::load_unaligned(y + i), B::load_unaligned(dy + i)).store_unaligned(dx + i);
    }
    for (; i < n; ++i) dx[i] = f.grad(x[i], y[i], dy[i]);
}

template <class Fn> struct elementwise_unary {
    template <class T> static void compute(cpu, const KernelContext& c) {
        unary_loop(c.in(0).numel(), c.in(0).template data<T>(), c.out(0).template data<T>(), Fn{});
    }
    template <class... Ts> static OpDef make(std::string_view type, std::string_view grad_type, std::string_view doc) {
        OpDef d{type, {{"X"}}, {{"Out"}}, {}, &same_as_x_infer};
        d.kernels = cpu_kernels<elementwise_unary, Ts...>();
        d.doc = doc;
        d.fusible = fusible_of<Fn, 1>();
        d.grad_spec = {grad_type, {"X"}, {"Out"}, {"X"}};
        return d;
    }
};

// The grad op of a unary op: X, Out, Out@GRAD -> X@GRAD.
template <class Fn> struct elementwise_unary_grad {
    enum { X = 0, Out = 1, DOut = 2 };
    static void infer(const InferContext& c) {
        c.same_dtype({X, Out, DOut});
        if (!(c.shape(Out) == c.shape(DOut)) && c.shape(Out).known() && c.shape(DOut).known())
            c.fail("dlgraph.shape.grad", "Out is " + to_string(c.shape(Out)) + " but Out@GRAD is " + to_string(c.shape(DOut)));
        c.set(0, c.dtype(X), c.shape(X));
    }
    template <class T> static void compute(cpu, const KernelContext& c) {
        unary_grad_loop(c.in(X).numel(), c.in(X).template data<T>(), c.in(Out).template data<T>(),
                        c.in(DOut).template data<T>(), c.out(0).template data<T>(), Fn{});
    }
    static OpDef make(std::string_view type) {
        OpDef d{type, {{"X"}, {"Out"}, {"Out@GRAD"}}, {{"X@GRAD"}}, {}, &infer};
        d.kernels = cpu_kernels<elementwise_unary_grad, float, double>();
        d.doc = "X@GRAD = Out@GRAD * d(Out)/d(X)";
        return d;
    }
};

inline OpDef relu_def() { return elementwise_unary<relu_fn>::make<float, double>("relu", "relu_grad", "Out = max(X, 0)"); }
inline OpDef sigmoid_def() { return elementwise_unary<sigmoid_fn>::make<float, double>("sigmoid", "sigmoid_grad", "Out = 1 / (1 + exp(-X))"); }
inline OpDef tanh_def() { return elementwise_unary<tanh_fn>::make<float, double>("tanh", "tanh_grad", "Out = tanh(X)"); }
inline OpDef exp_def() { return elementwise_unary<exp_fn>::make<float, double>("exp", "exp_grad", "Out = exp(X)"); }
inline OpDef log_def() { return elementwise_unary<log_fn>::make<float, double>("log", "log_grad", "Out = ln(X)"); }
inline OpDef sqrt_def() { return elementwise_unary<sqrt_fn>::make<float, double>("sqrt", "sqrt_grad", "Out = sqrt(X)"); }
inline OpDef abs_def() {
    return elementwise_unary<abs_fn>::make<float, double, std::int32_t, std::int64_t>("abs", "abs_grad", "Out = |X|");
}
inline OpDef square_def() {
    return elementwise_unary<square_fn>::make<float, double, std::int32_t, std::int64_t>("square", "square_grad", "Out = X * X");
}

// ---- scale and assign ----------------------------------------------------------------

struct scale_op {
    enum { scale = 0, bias = 1, bias_after_scale = 2 };
    template <class T> static void compute(cpu, const KernelContext& c) {
        const T s = static_cast<T>(c.attr(scale).f), b = static_cast<T>(c.attr(bias).f);
        if (c.attr(bias_after_scale).b)
            unary_loop(c.in(0).numel(), c.in(0).template data<T>(), c.out(0).template data<T>(),
                       [s, b](auto v) { return v * decltype(v)(s) + decltype(v)(b); });
        else
            unary_loop(c.in(0).numel(), c.in(0).template data<T>(), c.out(0).template data<T>(),
                       [s, b](auto v) { return (v + decltype(v)(b)) * decltype(v)(s); });
    }
};
inline OpDef scale_def() {
    OpDef d{"scale", {{"X"}}, {{"Out"}},
            {{"scale", Attribute::make_float("scale", 1.0)},
             {"bias", Attribute::make_float("bias", 0.0)},
             {"bias_after_scale", Attribute::make_bool("bias_after_scale", true)}},
            &same_as_x_infer};
    d.kernels = cpu_kernels<scale_op, float, double, std::int32_t, std::int64_t>();
    d.doc = "Out = scale * X + bias (or scale * (X + bias))";
    // d(scale * X + b)/dX = scale, either bias order: the gradient is a scale.
    d.grad_maker = [](const GradRequest& r) -> std::vector<OpDesc> {
        std::string dx = r.grad_name("X", 0);
        if (dx.empty()) return {};
        OpDesc g;
        g.type = "scale";
        g.set_input("X", {r.out_grad("Out", 0)}).set_output("Out", {dx});
        const Attribute* sc = r.fwd.attr("scale");
        g.set_attr(Attribute::make_float("scale", sc ? sc->f : 1.0));
        return {g};
    };
    return d;
}

struct assign_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(0);
        if (x.raw() != c.out(0).raw() && x.bytes()) std::memcpy(c.out(0).raw(), x.raw(), x.bytes());
    }
};
inline OpDef assign_def() {
    OpDef d{"assign", {{"X"}}, {{"Out"}}, {}, &same_as_x_infer};
    d.kernels = cpu_kernels<assign_op, bool, std::int16_t, std::int32_t, std::int64_t, float16, float, double>();
    d.doc = "Out = X (a copy)";
    d.grad_maker = [](const GradRequest& r) -> std::vector<OpDesc> {
        std::string dx = r.grad_name("X", 0);
        if (dx.empty()) return {};
        OpDesc g;
        g.type = "assign";
        g.set_input("X", {r.out_grad("Out", 0)}).set_output("Out", {dx});
        return {g};
    };
    return d;
}

inline OpDef relu_grad_def() { return elementwise_unary_grad<relu_fn>::make("relu_grad"); }
inline OpDef sigmoid_grad_def() { return elementwise_unary_grad<sigmoid_fn>::make("sigmoid_grad"); }
inline OpDef tanh_grad_def() { return elementwise_unary_grad<tanh_fn>::make("tanh_grad"); }
inline OpDef exp_grad_def() { return elementwise_unary_grad<exp_fn>::make("exp_grad"); }
inline OpDef log_grad_def() { return elementwise_unary_grad<log_fn>::make("log_grad"); }
inline OpDef sqrt_grad_def() { return elementwise_unary_grad<sqrt_fn>::make("sqrt_grad"); }
inline OpDef abs_grad_def() { return elementwise_unary_grad<abs_fn>::make("abs_grad"); }
inline OpDef square_grad_def() { return elementwise_unary_grad<square_fn>::make("square_grad"); }

inline OpDef elementwise_add_grad_def() { return elementwise_binary_grad<add_fn>::make("elementwise_add_grad"); }
inline OpDef elementwise_sub_grad_def() { return elementwise_binary_grad<sub_fn>::make("elementwise_sub_grad"); }
inline OpDef elementwise_mul_grad_def() { return elementwise_binary_grad<mul_fn>::make("elementwise_mul_grad"); }
inline OpDef elementwise_div_grad_def() { return elementwise_binary_grad<div_fn>::make("elementwise_div_grad"); }
inline OpDef elementwise_max_grad_def() { return elementwise_binary_grad<max_fn>::make("elementwise_max_grad"); }
inline OpDef elementwise_min_grad_def() { return elementwise_binary_grad<min_fn>::make("elementwise_min_grad"); }
inline OpDef elementwise_pow_grad_def() { return elementwise_binary_grad<pow_fn>::make("elementwise_pow_grad"); }

}  // namespace dlgraph::ops
