// Reductions: mean (of everything, Out [1] as in Paddle) and reduce_sum /
// reduce_mean / reduce_max over a set of dims. One strided kernel serves
// every dim set, so adding a reduction is one functor and one def.
#pragma once

#include <limits>

#include "dlgraph/ops/op_util.hpp"

namespace dlgraph::ops {

// Which dims of a rank-r input a reduce op folds, from its attributes.
// Returns false (with `bad` set to the offending entry of `dim`) on a dim
// out of range; `dup` tells a repeated dim from an out-of-range one.
inline bool reduced_dims(const Attribute* attrs, int r, bool* red, std::int64_t& bad, bool& dup) {
    enum { dim = 0, keep_dim = 1, reduce_all = 2 };
    for (int i = 0; i < r; ++i) red[i] = attrs[reduce_all].b;
    if (attrs[reduce_all].b) return true;
    for (auto d : attrs[dim].ints) {
        const std::int64_t a = d < 0 ? d + r : d;
        if (a < 0 || a >= r || red[a]) {
            bad = d;
            dup = a >= 0 && a < r;
            return false;
        }
        red[a] = true;
    }
    return true;
}

// Folds `x` into `out` along the dims flagged in `red`, with f (a functor on
// scalars and batches) and its identity `init`. Dims of one kind that sit
// next to each other are merged, so the work is one of two inner loops,
// driven by an odometer over the rest:
//  * trailing dims reduced: a contiguous fold of each row (fold_row:
//    pairwise, 8 batches in flight) into one output element;
//  * trailing dims kept: the block [reduced dim, kept dim] is folded over
//    its rows into a vector of outputs (fold_rows_into: 8 rows at a time).
template <class T, class F> void reduce_into(const Tensor& x, const bool* red, Tensor& out, T init, F f) {
    T* y = out.data<T>();
    const T* xp = x.data<T>();
    std::fill(y, y + out.numel(), init);
    if (x.numel() == 0) return;
    const Shape& s = x.shape();
    std::int64_t md[max_rank];
    bool mr[max_rank];
    int n = 0;
    for (int i = 0; i < s.rank(); ++i) {
        if (s[i] == 1) continue;  // a unit dim is both kept and reduced
        if (n > 0 && mr[n - 1] == red[i]) md[n - 1] *= s[i];
        else {
            md[n] = s[i];
            mr[n] = red[i];
            ++n;
        }
    }
    if (n == 0) {
        md[0] = 1;
        mr[0] = false;
        n = 1;
    }
    // Out strides of the outer (merged) dims; reduced dims stride 0.
    std::int64_t ost[max_rank];
    std::int64_t st = mr[n - 1] ? 1 : md[n - 1];
    for (int i = n - 2; i >= 0; --i) {
        ost[i] = mr[i] ? 0 : st;
        if (!mr[i]) st *= md[i];
    }
    const std::int64_t len = md[n - 1];
    // Kept trailing dims: the reduced dim before them (merged dims alternate)
    // belongs to the inner loop; with none, each row is copied (folded once).
    const bool contiguous = mr[n - 1];
    const int outer = contiguous || n == 1 ? n - 1 : n - 2;
    const std::int64_t rows = contiguous || n == 1 ? 1 : md[n - 2];
    std::int64_t idx[max_rank] = {};
    std::int64_t in_off = 0;
    do {
        std::int64_t o = 0;
        for (int i = 0; i < outer; ++i) o += idx[i] * ost[i];
        if (contiguous) y[o] = f(y[o], fold_row(xp + in_off, len, init, f));
        else fold_rows_into(xp + in_off, rows, len, y + o, f);
        in_off += rows * len;
    } while (next_index(idx, md, outer));
}

inline std::int64_t reduced_count(const Shape& s, const bool* red) {
    std::int64_t n = 1;
    for (int i = 0; i < s.rank(); ++i)
        if (red[i]) n *= s[i];
    return n;
}

// ---- mean --------------------------------------------------------------------------------

struct mean_op {
    static void infer(const InferContext& c) {
        c.dtype_in(0, {DataType::FP32, DataType::FP64});
        c.set(0, c.dtype(0), Shape{1});
    }
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(0);
        const T sum = fold_row(x.data<T>(), x.numel(), T(0), add_fn{});
        // An empty X gives 0/0 = NaN, as NumPy's mean does.
        *c.out(0).data<T>() = sum / static_cast<T>(x.numel());
    }
};

inline OpDef mean_def() {
    OpDef d{"mean", {{"X"}}, {{"Out"}}, {}, &mean_op::infer};
    d.kernels = cpu_kernels<mean_op, float, double>();
    d.doc = "Out = the mean of all elements of X, shape [1]";
    d.grad_spec = {"mean_grad", {"X"}, {"Out"}, {"X"}};
    return d;
}

// X, Out, Out@GRAD -> X@GRAD = Out@GRAD / numel(X) everywhere.
struct mean_grad_op {
    enum { X = 0, Out = 1, DOut = 2 };
    static void infer(const InferContext& c) {
        c.same_dtype({X, DOut});
        c.set(0, c.dtype(X), c.shape(X));
    }
    template <class T> static void compute(cpu, const KernelContext& c) {
        Tensor& dx = c.out(0);
        const T g = *c.in(DOut).template data<T>() / static_cast<T>(std::max<std::int64_t>(dx.numel(), 1));
        std::fill(dx.data<T>(), dx.data<T>() + dx.numel(), g);
    }
};
inline OpDef mean_grad_def() {
    OpDef d{"mean_grad", {{"X"}, {"Out"}, {"Out@GRAD"}}, {{"X@GRAD"}}, {}, &mean_grad_op::infer};
    d.kernels = cpu_kernels<mean_grad_op, float, double>();
    d.doc = "X@GRAD = Out@GRAD / numel(X)";
    return d;
}

// ---- reduce_* ------------------------------------------------------------------------------

template <class Kind> struct reduce_op {
    enum { dim = 0, keep_dim = 1, reduce_all = 2 };
    static void infer(const InferContext& c) {
        Kind::check_dtype(c);
        const Shape& s = c.shape(0);
        bool red[max_rank];
        std::int64_t bad = 0;
        bool dup = false;
        if (!reduced_dims(&c.attr(0), s.rank(), red, bad, dup))
            c.fail("dlgraph.shape.axis", "dim " + std::to_string(bad) +
                                             (dup ? " is listed twice" : " is out of range") + " for X of shape " +
                                             to_string(s) + " (dim is " + to_string(Shape(c.attr(dim).ints)) + ")");
        Shape out;
        for (int i = 0; i < s.rank(); ++i) {
            if (!red[i]) out.push_back(s[i]);
            else if (c.attr(keep_dim).b) out.push_back(1);
        }
        // Paddle keeps a rank-1 result when everything is folded.
        if (out.empty()) out.push_back(1);
        c.set(0, c.dtype(0), out);
    }
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(0);
        bool red[max_rank];
        std::int64_t bad = 0;
        bool dup = false;
        reduced_dims(c.attrs, x.rank(), red, bad, dup);
        Kind::template run<T>(x, red, c.out(0));
    }
};

struct reduce_sum_kind {
    static constexpr bool grad_scale = false, only_max = false;
    static void check_dtype(const InferContext& c) {
        c.dtype_in(0, {DataType::FP32, DataType::FP64, DataType::INT32, DataType::INT64});
    }
    template <class T> static void run(const Tensor& x, const bool* red, Tensor& out) {
        reduce_into<T>(x, red, out, T(0), add_fn{});
    }
};
struct reduce_mean_kind {
    static constexpr bool grad_scale = true, only_max = false;
    static void check_dtype(const InferContext& c) { c.dtype_in(0, {DataType::FP32, DataType::FP64}); }
    template <class T> static void run(const Tensor& x, const bool* red, Tensor& out) {
        reduce_into<T>(x, red, out, T(0), add_fn{});
        const T inv = T(1) / static_cast<T>(reduced_count(x.shape(), red));
        T* y = out.data<T>();
        unary_loop(out.numel(), y, y, [inv](auto v) { return v * decltype(v)(inv); });
    }
};
struct reduce_max_kind {
    static constexpr bool grad_scale = false, only_max = true;
    static void check_dtype(const InferContext& c) {
        c.dtype_in(0, {DataType::FP32, DataType::FP64, DataType::INT32, DataType::INT64});
    }
    template <class T> static void run(const Tensor& x, const bool* red, Tensor& out) {
        // The max of nothing is the identity: -inf (or the lowest integer).
        const T init = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                            : std::numeric_limits<T>::lowest();
        reduce_into<T>(x, red, out, init, max_fn{});
    }
};

template <class Kind, class... Ts> OpDef reduce_def(std::string_view type, std::string_view grad_type, std::string_view doc) {
    OpDef d{type, {{"X"}}, {{"Out"}},
            {{"dim", Attribute::make_ints("dim", {0})},
             {"keep_dim", Attribute::make_bool("keep_dim", false)},
             {"reduce_all", Attribute::make_bool("reduce_all", false)}},
            &reduce_op<Kind>::infer};
    d.kernels = cpu_kernels<reduce_op<Kind>, Ts...>();
    d.doc = doc;
    d.grad_spec = {grad_type, {"X"}, {"Out"}, {"X"}};
    return d;
}

// X, Out, Out@GRAD -> X@GRAD for reduce_sum / reduce_mean / reduce_max:
// each element of X takes the gradient of the output element it folded
// into (scaled by 1/count for mean; only where X equals the max for max,
// every tied position included).
template <class Kind> struct reduce_grad_op {
    enum { X = 0, Out = 1, DOut = 2 };
    static void infer(const InferContext& c) {
        c.same_dtype({X, Out, DOut});
        c.set(0, c.dtype(X), c.shape(X));
    }
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        const T* xp = x.template data<T>();
        const T* out = c.in(Out).template data<T>();
        const T* d = c.in(DOut).template data<T>();
        T* dx = c.out(0).template data<T>();
        const Shape& s = x.shape();
        const int r = s.rank();
        bool red[max_rank];
        std::int64_t bad = 0;
        bool dup = false;
        reduced_dims(c.attrs, r, red, bad, dup);
        // Strides into Out (kept dims contiguous, reduced dims 0).
        std::int64_t ost[max_rank], idx[max_rank] = {};
        std::int64_t st = 1;
        for (int i = r - 1; i >= 0; --i) {
            ost[i] = red[i] ? 0 : st;
            if (!red[i]) st *= s[i];
        }
        const T scale = Kind::grad_scale ? T(1) / static_cast<T>(std::max<std::int64_t>(reduced_count(s, red), 1)) : T(1);
        std::int64_t o = 0;
        const std::int64_t n = x.numel();
        for (std::int64_t i = 0; i < n; ++i) {
            dx[i] = Kind::only_max ? (xp[i] == out[o] ? d[o] : T(0)) : d[o] * scale;
            for (int k = r - 1; k >= 0; --k) {
                o += ost[k];
                if (++idx[k] < s[k]) break;
                o -= ost[k] * s[k];
                idx[k] = 0;
            }
        }
    }
};
template <class Kind> OpDef reduce_grad_def(std::string_view type) {
    OpDef d{type, {{"X"}, {"Out"}, {"Out@GRAD"}}, {{"X@GRAD"}},
            {{"dim", Attribute::make_ints("dim", {0})},
             {"keep_dim", Attribute::make_bool("keep_dim", false)},
             {"reduce_all", Attribute::make_bool("reduce_all", false)}},
            &reduce_grad_op<Kind>::infer};
    d.kernels = cpu_kernels<reduce_grad_op<Kind>, float, double>();
    d.doc = "X@GRAD of a reduction";
    return d;
}

inline OpDef reduce_sum_def() {
    return reduce_def<reduce_sum_kind, float, double, std::int32_t, std::int64_t>("reduce_sum", "reduce_sum_grad", "Out = sum of X over dim");
}
inline OpDef reduce_mean_def() {
    return reduce_def<reduce_mean_kind, float, double>("reduce_mean", "reduce_mean_grad", "Out = mean of X over dim");
}
inline OpDef reduce_max_def() {
    return reduce_def<reduce_max_kind, float, double, std::int32_t, std::int64_t>("reduce_max", "reduce_max_grad", "Out = max of X over dim");
}

inline OpDef reduce_sum_grad_def() { return reduce_grad_def<reduce_sum_kind>("reduce_sum_grad"); }
inline OpDef reduce_mean_grad_def() { return reduce_grad_def<reduce_mean_kind>("reduce_mean_grad"); }
inline OpDef reduce_max_grad_def() { return reduce_grad_def<reduce_max_kind>("reduce_max_grad"); }

}  // namespace dlgraph::ops

