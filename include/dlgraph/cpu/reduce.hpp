// The CPU kernels of the reductions (ops/reduce.hpp): the kernel core's
// folds and gradient walks (kernels/reduce.hpp) on the tensors of a step,
// with reduce_mean's scaling split over the thread pool when long, and each
// op's kernel table.
#pragma once

#include "dlgraph/cpu/elementwise.hpp"
#include "dlgraph/cpu/gemm.hpp"
#include "dlgraph/kernels/reduce.hpp"
#include "dlgraph/op.hpp"
#include "dlgraph/ops/op_util.hpp"
#include "dlgraph/ops/reduce.hpp"

namespace dlgraph::cpu_ops {

// The dims a reduce op folds (its attributes were checked at inference).
inline void reduced_flags(const KernelContext& c, int r, bool* red) {
    std::int64_t bad = 0;
    bool dup = false;
    ops::reduced_dims(c.attrs, r, red, bad, dup);
}

struct mean_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(0);
        *c.out(0).data<T>() = kernels::mean_all(x.data<T>(), x.numel());
    }
};

struct mean_grad_op {
    enum { X = 0, Out = 1, DOut = 2 };
    template <class T> static void compute(cpu, const KernelContext& c) {
        Tensor& dx = c.out(0);
        kernels::mean_grad(c.in(DOut).data<T>(), dx.data<T>(), dx.numel());
    }
};

// One reduce op; Kind (below) says which.
template <class Kind> struct reduce_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(0);
        bool red[max_rank];
        reduced_flags(c, x.rank(), red);
        Kind::run(x.data<T>(), x.shape().begin(), x.rank(), red, c.out(0).data<T>(), c.out(0).numel());
    }
};

// The reductions: run(x, dims, rank, red, y, numel(y)) and the gradient
// grad(x, out, dout, dims, rank, red, dx). reduce_mean is kernels::reduce_mean
// with its scaling threaded: unary_loop cuts at whole vectors, so the bits
// are the serial loop's.
struct reduce_sum_kind {
    template <class T> static void run(const T* x, const std::int64_t* dims, int r, const bool* red, T* y, std::int64_t) {
        kernels::reduce_sum(x, dims, r, red, y);
    }
    template <class T>
    static void grad(const T*, const T*, const T* d, const std::int64_t* dims, int r, const bool* red, T* dx) {
        kernels::reduce_sum_grad(d, dims, r, red, dx);
    }
};
struct reduce_mean_kind {
    template <class T> static void run(const T* x, const std::int64_t* dims, int r, const bool* red, T* y, std::int64_t n) {
        kernels::reduce_into(x, dims, r, red, y, T(0), kernels::add_fn{});
        unary_loop(n, y, y, kernels::scale_by_fn<T>{kernels::mean_factor<T>(kernels::reduced_count(dims, r, red))});
    }
    template <class T>
    static void grad(const T*, const T*, const T* d, const std::int64_t* dims, int r, const bool* red, T* dx) {
        kernels::reduce_mean_grad(d, dims, r, red, dx);
    }
};
// max and min: the gradient goes to every position of the extreme.
template <class Fold> struct reduce_extreme_kind {
    template <class T> static void run(const T* x, const std::int64_t* dims, int r, const bool* red, T* y, std::int64_t) {
        Fold{}(x, dims, r, red, y);
    }
    template <class T>
    static void grad(const T* x, const T* out, const T* d, const std::int64_t* dims, int r, const bool* red, T* dx) {
        kernels::reduce_extreme_grad(x, out, d, dims, r, red, dx);
    }
};
struct max_fold {
    template <class T> void operator()(const T* x, const std::int64_t* dims, int r, const bool* red, T* y) const {
        kernels::reduce_max(x, dims, r, red, y);
    }
};
struct min_fold {
    template <class T> void operator()(const T* x, const std::int64_t* dims, int r, const bool* red, T* y) const {
        kernels::reduce_min(x, dims, r, red, y);
    }
};
// prod's gradient walks X twice, keeping two values per output element in
// a workspace of the running thread (grown once, then kept).
struct reduce_prod_kind {
    template <class T> static void run(const T* x, const std::int64_t* dims, int r, const bool* red, T* y, std::int64_t) {
        kernels::reduce_prod(x, dims, r, red, y);
    }
    template <class T>
    static void grad(const T* x, const T* out, const T* d, const std::int64_t* dims, int r, const bool* red, T* dx) {
        static thread_local gemm_detail::workspace<T> ws;
        kernels::reduce_prod_grad(x, out, d, dims, r, red, dx, ws.get(kernels::reduce_prod_grad_work(dims, r, red)));
    }
};
// all and any, on BOOL.
struct reduce_all_kind {
    static void run(const bool* x, const std::int64_t* dims, int r, const bool* red, bool* y, std::int64_t) {
        kernels::reduce_all(x, dims, r, red, y);
    }
};
struct reduce_any_kind {
    static void run(const bool* x, const std::int64_t* dims, int r, const bool* red, bool* y, std::int64_t) {
        kernels::reduce_any(x, dims, r, red, y);
    }
};

// X, Out, Out@GRAD -> X@GRAD.
template <class Kind> struct reduce_grad_op {
    enum { X = 0, Out = 1, DOut = 2 };
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        bool red[max_rank];
        reduced_flags(c, x.rank(), red);
        Kind::grad(x.data<T>(), c.in(Out).template data<T>(), c.in(DOut).template data<T>(), x.shape().begin(),
                   x.rank(), red, c.out(0).data<T>());
    }
};

// arg_max, arg_min: X as [outer, d, inner] around the axis (all of X, [1,
// numel, 1], when flatten), Out INT64 or INT32 as it was inferred.
template <bool Max> struct arg_extreme_op : ops::arg_extreme_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(0);
        Tensor& out = c.out(0);
        const ops::axis_split g = ops::split_or_flatten(x.shape(), c.attr(axis).i, c.attr(flatten).b);
        if (out.dtype() == DataType::INT32)
            kernels::arg_extreme<Max>(x.data<T>(), g.outer, g.d, g.inner, out.data<std::int32_t>());
        else
            kernels::arg_extreme<Max>(x.data<T>(), g.outer, g.d, g.inner, out.data<std::int64_t>());
    }
};

// cumsum and its gradient (the cumsum of Out@GRAD the other way round).
template <bool Grad> struct cumsum_op : ops::cumsum_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(Grad ? DOut : X);
        const ops::axis_split g = ops::split_or_flatten(x.shape(), c.attr(axis).i, c.attr(flatten).b);
        kernels::cumsum(x.data<T>(), c.out(0).data<T>(), g.outer, g.d, g.inner, c.attr(exclusive).b,
                        c.attr(reverse).b != Grad);
    }
};

inline void mean_kernels(OpDef& d) { d.kernels = cpu_kernels<mean_op, float, double>(); }
inline void mean_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<mean_grad_op, float, double>(); }
inline void reduce_sum_kernels(OpDef& d) {
    d.kernels = cpu_kernels<reduce_op<reduce_sum_kind>, float, double, std::int32_t, std::int64_t>();
}
inline void reduce_mean_kernels(OpDef& d) { d.kernels = cpu_kernels<reduce_op<reduce_mean_kind>, float, double>(); }
using reduce_max_kind = reduce_extreme_kind<max_fold>;
using reduce_min_kind = reduce_extreme_kind<min_fold>;
inline void reduce_max_kernels(OpDef& d) {
    d.kernels = cpu_kernels<reduce_op<reduce_max_kind>, float, double, std::int32_t, std::int64_t>();
}
inline void reduce_min_kernels(OpDef& d) {
    d.kernels = cpu_kernels<reduce_op<reduce_min_kind>, float, double, std::int32_t, std::int64_t>();
}
inline void reduce_prod_kernels(OpDef& d) {
    d.kernels = cpu_kernels<reduce_op<reduce_prod_kind>, float, double, std::int32_t, std::int64_t>();
}
inline void reduce_all_kernels(OpDef& d) { d.kernels = cpu_kernels<reduce_op<reduce_all_kind>, bool>(); }
inline void reduce_any_kernels(OpDef& d) { d.kernels = cpu_kernels<reduce_op<reduce_any_kind>, bool>(); }
inline void reduce_sum_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<reduce_grad_op<reduce_sum_kind>, float, double>(); }
inline void reduce_mean_grad_kernels(OpDef& d) {
    d.kernels = cpu_kernels<reduce_grad_op<reduce_mean_kind>, float, double>();
}
inline void reduce_max_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<reduce_grad_op<reduce_max_kind>, float, double>(); }
inline void reduce_min_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<reduce_grad_op<reduce_min_kind>, float, double>(); }
inline void reduce_prod_grad_kernels(OpDef& d) {
    d.kernels = cpu_kernels<reduce_grad_op<reduce_prod_kind>, float, double>();
}

inline void arg_max_kernels(OpDef& d) {
    d.kernels = cpu_kernels<arg_extreme_op<true>, float, double, std::int32_t, std::int64_t>();
}
inline void arg_min_kernels(OpDef& d) {
    d.kernels = cpu_kernels<arg_extreme_op<false>, float, double, std::int32_t, std::int64_t>();
}
inline void cumsum_kernels(OpDef& d) { d.kernels = cpu_kernels<cumsum_op<false>, float, double, std::int32_t, std::int64_t>(); }
inline void cumsum_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<cumsum_op<true>, float, double>(); }

}  // namespace dlgraph::cpu_ops
