// Softmax and the classification losses built on it: softmax,
// cross_entropy (on probabilities) and softmax_with_cross_entropy (on
// logits, via log-sum-exp so large logits neither overflow nor lose digits).
#pragma once

#include <cmath>
#include <limits>

#include "dlgraph/ops/op_util.hpp"
#include "dlgraph/kernels/vec.hpp"

namespace dlgraph::ops {

template <class V> inline V exp_any(V v) {
    if constexpr (is_batch<V>) return xsimd::exp(v); else return std::exp(v);
}

// y = softmax(x) over a contiguous row of n > 0; returns log(sum(exp(x))).
// Reads x[i] before writing y[i] at every i, so y may alias x.
template <class T> inline T softmax_row(const T* x, T* y, std::int64_t n) {
    const T m = fold_row(x, n, -std::numeric_limits<T>::infinity(), max_fn{});
    // All -inf (or +inf) rows: exp(x - m) would be NaN; keep IEEE results
    // consistent with the scalar formula by shifting by 0 instead.
    const T shift = std::isfinite(m) ? m : T(0);
    T s = 0;
    std::int64_t i = 0;
    if constexpr (simd_type<T>) {
        using B = xsimd::batch<T>;
        constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
        B acc(T(0));
        const B mb(shift);
        for (; i + W <= n; i += W) {
            const B e = xsimd::exp(B::load_unaligned(x + i) - mb);
            e.store_unaligned(y + i);
            acc += e;
        }
        s = xsimd::hadd(acc);
    }
    for (; i < n; ++i) {
        const T e = std::exp(x[i] - shift);
        y[i] = e;
        s += e;
    }
    const T inv = T(1) / s;
    unary_loop(n, y, y, [inv](auto v) { return v * decltype(v)(inv); });
    return shift + std::log(s);
}

// Softmax over the middle dim of a [d, inner] block (inner > 1), vectorised
// across `inner` so every load is contiguous.
template <class T> inline void softmax_strided(const T* x, T* y, std::int64_t d, std::int64_t inner) {
    std::int64_t j = 0;
    auto column = [&](auto zero, std::int64_t jj) {
        using V = decltype(zero);
        auto ld = [](const T* p) {
            if constexpr (is_batch<V>) return V::load_unaligned(p); else return *p;
        };
        auto st = [](V v, T* p) {
            if constexpr (is_batch<V>) v.store_unaligned(p); else *p = v;
        };
        V m = ld(x + jj);
        for (std::int64_t k = 1; k < d; ++k) m = max_fn{}(m, ld(x + k * inner + jj));
        V s = zero;
        for (std::int64_t k = 0; k < d; ++k) {
            const V e = exp_any(ld(x + k * inner + jj) - m);
            st(e, y + k * inner + jj);
            s = s + e;
        }
        const V inv = V(T(1)) / s;
        for (std::int64_t k = 0; k < d; ++k) st(ld(y + k * inner + jj) * inv, y + k * inner + jj);
    };
    if constexpr (simd_type<T>) {
        using B = xsimd::batch<T>;
        constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
        for (; j + W <= inner; j += W) column(B(T(0)), j);
    }
    for (; j < inner; ++j) column(T(0), j);
}

// ---- softmax ---------------------------------------------------------------------------

struct softmax_op {
    enum { X = 0 };
    enum { axis = 0 };
    static void infer(const InferContext& c) {
        c.dtype_in(X, {DataType::FP32, DataType::FP64});
        infer_axis(c, c.attr(axis).i, c.shape(X), "X");
        c.set(0, c.dtype(X), c.shape(X));
    }
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        Tensor& out = c.out(0);
        if (x.numel() == 0) return;
        const Shape& s = x.shape();
        const int a = static_cast<int>(c.attr(axis).i < 0 ? c.attr(axis).i + s.rank() : c.attr(axis).i);
        const std::int64_t outer = dim_product(s, 0, a), d = s[a], inner = dim_product(s, a + 1, s.rank());
        const T* xp = x.data<T>();
        T* yp = out.data<T>();
        for (std::int64_t o = 0; o < outer; ++o) {
            if (inner == 1) softmax_row(xp + o * d, yp + o * d, d);
            else softmax_strided(xp + o * d * inner, yp + o * d * inner, d, inner);
        }
    }
};

inline OpDef softmax_def() {
    OpDef d{"softmax", {{"X"}}, {{"Out"}}, {{"axis", Attribute::make_int("axis", -1)}}, &softmax_op::infer};
    d.kernels = cpu_kernels<softmax_op, float, double>();
    d.doc = "Out = exp(X) / sum(exp(X)) along axis";
    d.grad_spec = {"softmax_grad", {}, {"Out"}, {"X"}};
    return d;
}

// dX = Out * (dOut - sum(dOut * Out)) along the axis, for a contiguous row.
template <class T> inline void softmax_grad_row(const T* y, const T* dy, T* dx, std::int64_t n) {
    T dot = 0;
    std::int64_t i = 0;
    if constexpr (simd_type<T>) {
        using B = xsimd::batch<T>;
        constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
        B acc(T(0));
        for (; i + W <= n; i += W) acc = xsimd::fma(B::load_unaligned(y + i), B::load_unaligned(dy + i), acc);
        dot = xsimd::hadd(acc);
    }
    for (; i < n; ++i) dot += y[i] * dy[i];
    binary_loop(n, y, 1, dy, 1, dx, [dot](auto a, auto b) { return a * (b - decltype(a)(dot)); });
}

// The same over the middle dim of a [d, inner] block, vectorised across inner.
template <class T> inline void softmax_grad_strided(const T* y, const T* dy, T* dx, std::int64_t d, std::int64_t inner) {
    auto column = [&](auto zero, std::int64_t j) {
        using V = decltype(zero);
        auto ld = [](const T* p) {
            if constexpr (is_batch<V>) return V::load_unaligned(p); else return *p;
        };
        V dot = zero;
        for (std::int64_t k = 0; k < d; ++k) dot = dot + ld(y + k * inner + j) * ld(dy + k * inner + j);
        for (std::int64_t k = 0; k < d; ++k) {
            const V r = ld(y + k * inner + j) * (ld(dy + k * inner + j) - dot);
            if constexpr (is_batch<V>) r.store_unaligned(dx + k * inner + j); else dx[k * inner + j] = r;
        }
    };
    std::int64_t j = 0;
    if constexpr (simd_type<T>) {
        using B = xsimd::batch<T>;
        constexpr std::int64_t W = static_cast<std::int64_t>(B::size);
        for (; j + W <= inner; j += W) column(B(T(0)), j);
    }
    for (; j < inner; ++j) column(T(0), j);
}

// Out, Out@GRAD -> X@GRAD.
struct softmax_grad_op {
    enum { Out = 0, DOut = 1 };
    enum { axis = 0 };
    static void infer(const InferContext& c) {
        c.dtype_in(Out, {DataType::FP32, DataType::FP64});
        c.same_dtype({Out, DOut});
        infer_axis(c, c.attr(axis).i, c.shape(Out), "Out");
        const Shape& ys = c.shape(Out);
        const Shape& ds = c.shape(DOut);
        bool ok = ys.rank() == ds.rank();
        for (int i = 0; ok && i < ys.rank(); ++i) ok = dims_agree(ys[i], ds[i]);
        if (!ok) c.fail("dlgraph.shape.grad", "Out is " + to_string(ys) + " but Out@GRAD is " + to_string(ds));
        c.set(0, c.dtype(Out), ys);
    }
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& out = c.in(Out);
        if (out.numel() == 0) return;
        const Shape& s = out.shape();
        const int a = static_cast<int>(c.attr(axis).i < 0 ? c.attr(axis).i + s.rank() : c.attr(axis).i);
        const std::int64_t outer = dim_product(s, 0, a), d = s[a], inner = dim_product(s, a + 1, s.rank());
        const T* yp = out.data<T>();
        const T* dyp = c.in(DOut).data<T>();
        T* dxp = c.out(0).data<T>();
        for (std::int64_t o = 0; o < outer; ++o) {
            const std::int64_t off = o * d * inner;
            if (inner == 1) softmax_grad_row(yp + off, dyp + off, dxp + off, d);
            else softmax_grad_strided(yp + off, dyp + off, dxp + off, d, inner);
        }
    }
};

inline OpDef softmax_grad_def() {
    OpDef d{"softmax_grad", {{"Out"}, {"Out@GRAD"}}, {{"X@GRAD"}}, {{"axis", Attribute::make_int("axis", -1)}},
            &softmax_grad_op::infer};
    d.kernels = cpu_kernels<softmax_grad_op, float, double>();
    d.doc = "X@GRAD = Out * (Out@GRAD - sum(Out@GRAD * Out)) along axis";
    return d;
}

// ---- losses -----------------------------------------------------------------------------

// Shared checks of (X or Logits, Label): X is [..., D]; a hard Label is
// INT64 [..., 1], a soft one has X's dtype and shape. Returns [..., 1].
inline Shape loss_infer(const InferContext& c, int x, int label, bool soft) {
    const std::string xn = c.slot_name(x);
    c.dtype_in(x, {DataType::FP32, DataType::FP64});
    if (soft) c.same_dtype({x, label});
    else c.dtype_in(label, {DataType::INT64});
    const Shape& xs = c.shape(x);
    const Shape& ls = c.shape(label);
    const std::string both = xn + " is " + to_string(xs) + " but Label is " + to_string(ls);
    if (xs.rank() == 0) c.fail("dlgraph.shape.loss", xn + " is " + to_string(xs) + ": it needs rank >= 1 ([..., classes])");
    if (ls.rank() != xs.rank())
        c.fail("dlgraph.shape.loss", both + ": Label must have " + xn + "'s rank (" + std::to_string(xs.rank()) + ")");
    const int r = xs.rank();
    Shape out;
    for (int i = 0; i + 1 < r; ++i) {
        if (!dims_agree(xs[i], ls[i]))
            c.fail("dlgraph.shape.loss", both + ": dim " + std::to_string(i) + " differs (" + std::to_string(xs[i]) +
                                             " vs " + std::to_string(ls[i]) + ")");
        out.push_back(merge_dim(xs[i], ls[i]));
    }
    if (soft && !dims_agree(xs[r - 1], ls[r - 1]))
        c.fail("dlgraph.shape.loss", both + ": a soft Label needs " + xn + "'s last dim (" + std::to_string(xs[r - 1]) +
                                         "), not " + std::to_string(ls[r - 1]));
    if (!soft && !dims_agree(ls[r - 1], 1))
        c.fail("dlgraph.shape.loss", both + ": a hard Label holds one class index per row, so its last dim must be 1");
    out.push_back(1);
    return out;
}

// A hard label outside [0, d) stops the kernel: the session reports it
// (fault_code::label_out_of_range) after the step.
inline void bad_label(const KernelContext& c, std::int64_t label, std::int64_t row, std::int64_t d) {
    c.fault->raise(fault_code::label_out_of_range, label, row, d);
}

struct cross_entropy_op {
    enum { X = 0, Label = 1 };
    enum { soft_label = 0 };
    static void infer(const InferContext& c) {
        c.set(0, c.dtype(X), loss_infer(c, X, Label, c.attr(soft_label).b));
    }
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Tensor& label = c.in(Label);
        const Shape& s = x.shape();
        const std::int64_t d = s[s.rank() - 1], rows = dim_product(s, 0, s.rank() - 1);
        const T* xp = x.data<T>();
        T* y = c.out(0).data<T>();
        if (c.attr(soft_label).b) {
            const T* lp = label.data<T>();
            for (std::int64_t r = 0; r < rows; ++r) {
                T acc = 0;
                for (std::int64_t k = 0; k < d; ++k) acc += lp[r * d + k] * std::log(xp[r * d + k]);
                y[r] = -acc;
            }
            return;
        }
        const std::int64_t* lp = label.data<std::int64_t>();
        for (std::int64_t r = 0; r < rows; ++r) {
            if (lp[r] < 0 || lp[r] >= d) return bad_label(c, lp[r], r, d);
            y[r] = -std::log(xp[r * d + lp[r]]);
        }
    }
};

inline OpDef cross_entropy_def() {
    OpDef d{"cross_entropy", {{"X"}, {"Label"}}, {{"Y"}}, {{"soft_label", Attribute::make_bool("soft_label", false)}},
            &cross_entropy_op::infer};
    d.kernels = cpu_kernels<cross_entropy_op, float, double>();
    d.doc = "Y = -log(X[label]) per row (soft: -sum(label * log(X)))";
    d.no_grad_inputs = {"Label"};
    d.grad_maker = [](const GradRequest& r) -> std::vector<OpDesc> {
        const std::string dx = r.grad_name("X", 0);
        if (dx.empty()) return {};
        OpDesc g;
        g.type = "cross_entropy_grad";
        g.set_input("X", r.fwd.input("X")->arguments)
            .set_input("Label", r.fwd.input("Label")->arguments)
            .set_input("Y@GRAD", {r.out_grad("Y", 0)})
            .set_output("X@GRAD", {dx});
        g.attrs = r.fwd.attrs;
        return {g};
    };
    return d;
}

// The shape Out@GRAD-like input `dslot` must have: X's with a last dim of 1.
inline void loss_grad_check(const InferContext& c, int x, int dslot, const std::string& dname) {
    Shape want = c.shape(x);
    want[want.rank() - 1] = 1;
    const Shape& ds = c.shape(dslot);
    bool ok = ds.rank() == want.rank();
    for (int i = 0; ok && i < ds.rank(); ++i) ok = dims_agree(ds[i], want[i]);
    if (!ok)
        c.fail("dlgraph.shape.grad", dname + " is " + to_string(ds) + " but the loss is " + to_string(want));
}

// X, Label, Y@GRAD -> X@GRAD: -dY / X at the label (hard), -dY * label / X (soft).
struct cross_entropy_grad_op {
    enum { X = 0, Label = 1, DY = 2 };
    enum { soft_label = 0 };
    static void infer(const InferContext& c) {
        loss_infer(c, X, Label, c.attr(soft_label).b);
        c.same_dtype({X, DY});
        loss_grad_check(c, X, DY, "Y@GRAD");
        c.set(0, c.dtype(X), c.shape(X));
    }
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Shape& s = x.shape();
        const std::int64_t d = s[s.rank() - 1], rows = dim_product(s, 0, s.rank() - 1);
        const T* xp = x.data<T>();
        const T* dy = c.in(DY).data<T>();
        T* dx = c.out(0).data<T>();
        if (c.attr(soft_label).b) {
            const T* lp = c.in(Label).data<T>();
            for (std::int64_t r = 0; r < rows; ++r) {
                const T g = -dy[r];
                for (std::int64_t k = 0; k < d; ++k) dx[r * d + k] = g * lp[r * d + k] / xp[r * d + k];
            }
            return;
        }
        const std::int64_t* lp = c.in(Label).data<std::int64_t>();
        for (std::int64_t r = 0; r < rows; ++r) {
            if (lp[r] < 0 || lp[r] >= d) return bad_label(c, lp[r], r, d);
            std::fill(dx + r * d, dx + (r + 1) * d, T(0));
            dx[r * d + lp[r]] = -dy[r] / xp[r * d + lp[r]];
        }
    }
};

inline OpDef cross_entropy_grad_def() {
    OpDef d{"cross_entropy_grad", {{"X"}, {"Label"}, {"Y@GRAD"}}, {{"X@GRAD"}},
            {{"soft_label", Attribute::make_bool("soft_label", false)}}, &cross_entropy_grad_op::infer};
    d.kernels = cpu_kernels<cross_entropy_grad_op, float, double>();
    d.doc = "X@GRAD = -Y@GRAD / X at the label (soft: -Y@GRAD * Label / X)";
    return d;
}

struct softmax_with_cross_entropy_op {
    enum { Logits = 0, Label = 1 };
    enum { Softmax = 0, Loss = 1 };
    enum { soft_label = 0 };
    static void infer(const InferContext& c) {
        Shape loss = loss_infer(c, Logits, Label, c.attr(soft_label).b);
        c.set(Softmax, c.dtype(Logits), c.shape(Logits));
        c.set(Loss, c.dtype(Logits), loss);
    }
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(Logits);
        const Tensor& label = c.in(Label);
        const Shape& s = x.shape();
        const std::int64_t d = s[s.rank() - 1], rows = dim_product(s, 0, s.rank() - 1);
        const T* xp = x.data<T>();
        T* sm = c.out(Softmax).data<T>();
        T* loss = c.out(Loss).data<T>();
        const bool soft = c.attr(soft_label).b;
        const T* soft_p = soft ? label.data<T>() : nullptr;
        const std::int64_t* hard_p = soft ? nullptr : label.data<std::int64_t>();
        for (std::int64_t r = 0; r < rows; ++r) {
            const T* xr = xp + r * d;
            if (soft) {
                if (d == 0) {
                    loss[r] = 0;
                    continue;
                }
                // -sum(l * log softmax) = sum(l) * lse - sum(l * x): no log of a
                // rounded probability.
                const T lse = softmax_row(xr, sm + r * d, d);
                const T* lr = soft_p + r * d;
                T acc = 0;
                for (std::int64_t k = 0; k < d; ++k) acc += lr[k] * (lse - xr[k]);
                loss[r] = acc;
            } else {
                const std::int64_t l = hard_p[r];
                if (l < 0 || l >= d) return bad_label(c, l, r, d);
                const T lse = softmax_row(xr, sm + r * d, d);
                loss[r] = lse - xr[l];
            }
        }
    }
};

inline OpDef softmax_with_cross_entropy_def() {
    OpDef d{"softmax_with_cross_entropy", {{"Logits"}, {"Label"}}, {{"Softmax"}, {"Loss"}},
            {{"soft_label", Attribute::make_bool("soft_label", false)}}, &softmax_with_cross_entropy_op::infer};
    d.kernels = cpu_kernels<softmax_with_cross_entropy_op, float, double>();
    d.doc = "Softmax = softmax(Logits); Loss = cross entropy of Softmax and Label, computed stably";
    // As in Paddle, only Loss is differentiated: the gradient reads the saved
    // Softmax, never the logits, and a gradient reaching the Softmax output
    // from other ops is not propagated to Logits.
    d.no_grad_inputs = {"Label"};
    d.grad_maker = [](const GradRequest& r) -> std::vector<OpDesc> {
        const std::string dx = r.grad_name("Logits", 0);
        if (dx.empty()) return {};
        OpDesc g;
        g.type = "softmax_with_cross_entropy_grad";
        g.set_input("Label", r.fwd.input("Label")->arguments)
            .set_input("Softmax", r.fwd.output("Softmax")->arguments)
            .set_input("Loss@GRAD", {r.out_grad("Loss", 0)})
            .set_output("Logits@GRAD", {dx});
        g.attrs = r.fwd.attrs;
        return {g};
    };
    return d;
}

// Label, Softmax, Loss@GRAD -> Logits@GRAD = (Softmax - onehot(Label)) * dLoss
// (soft labels: (Softmax * sum(Label) - Label) * dLoss, which is
// (Softmax - Label) * dLoss for labels that sum to 1 per row).
struct softmax_with_cross_entropy_grad_op {
    enum { Label = 0, Softmax = 1, DLoss = 2 };
    enum { soft_label = 0 };
    static void infer(const InferContext& c) {
        loss_infer(c, Softmax, Label, c.attr(soft_label).b);
        c.same_dtype({Softmax, DLoss});
        loss_grad_check(c, Softmax, DLoss, "Loss@GRAD");
        c.set(0, c.dtype(Softmax), c.shape(Softmax));
    }
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& sm = c.in(Softmax);
        const Shape& s = sm.shape();
        const std::int64_t d = s[s.rank() - 1], rows = dim_product(s, 0, s.rank() - 1);
        const T* p = sm.data<T>();
        const T* dl = c.in(DLoss).data<T>();
        T* dx = c.out(0).data<T>();
        if (c.attr(soft_label).b) {
            const T* lp = c.in(Label).data<T>();
            for (std::int64_t r = 0; r < rows; ++r) {
                const T* lr = lp + r * d;
                T lsum = 0;
                for (std::int64_t k = 0; k < d; ++k) lsum += lr[k];
                const T g = dl[r];
                for (std::int64_t k = 0; k < d; ++k) dx[r * d + k] = (p[r * d + k] * lsum - lr[k]) * g;
            }
            return;
        }
        const std::int64_t* lp = c.in(Label).data<std::int64_t>();
        for (std::int64_t r = 0; r < rows; ++r) {
            if (lp[r] < 0 || lp[r] >= d) return bad_label(c, lp[r], r, d);
            const T g = dl[r];
            binary_loop(d, p + r * d, 1, &g, 0, dx + r * d, mul_fn{});
            dx[r * d + lp[r]] -= g;
        }
    }
};

inline OpDef softmax_with_cross_entropy_grad_def() {
    OpDef d{"softmax_with_cross_entropy_grad", {{"Label"}, {"Softmax"}, {"Loss@GRAD"}}, {{"Logits@GRAD"}},
            {{"soft_label", Attribute::make_bool("soft_label", false)}}, &softmax_with_cross_entropy_grad_op::infer};
    d.kernels = cpu_kernels<softmax_with_cross_entropy_grad_op, float, double>();
    d.kernel_slot = 1;  // Softmax: Label may be INT64
    d.doc = "Logits@GRAD = (Softmax - onehot(Label)) * Loss@GRAD (soft: Softmax * sum(Label) - Label)";
    return d;
}

}  // namespace dlgraph::ops

