// The CPU kernels of the shape ops (ops/shape_ops.hpp): each reads its
// tensors' shapes and attributes and calls the kernel core's copy loops
// (kernels/shape.hpp); sum splits its additions over the thread pool.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "dlgraph/cpu/elementwise.hpp"
#include "dlgraph/kernels/shape.hpp"
#include "dlgraph/op.hpp"
#include "dlgraph/ops/shape_ops.hpp"

namespace dlgraph::cpu_ops {

// Kernel tables of the ops that only move elements: every stored dtype,
// FP16 included (its bytes are moved as they are).
template <class Op> KernelTable copy_kernels() {
    return cpu_kernels<Op, bool, std::int16_t, std::int32_t, std::int64_t, float16, float, double>();
}

// Parts (concat's inputs, split's outputs, sum's inputs) per call of the
// core: their pointers and dims sit in arrays on the stack, so any number of
// parts is handled a run at a time and a kernel allocates nothing.
inline constexpr int parts_per_call = 32;

// `axis` of a tensor of rank r, negative counting from the end (inference
// has checked its range).
inline int normal_axis(std::int64_t axis, int r) { return static_cast<int>(axis < 0 ? axis + r : axis); }

struct reshape_op : ops::reshape_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        kernels::copy_elements(c.in(X).data<T>(), c.in(X).numel(), c.out(0).data<T>());
    }
};

struct reshape_grad_op : ops::reshape_grad_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        kernels::copy_elements(c.in(DOut).data<T>(), c.in(DOut).numel(), c.out(0).data<T>());
    }
};

// squeeze2 and unsqueeze2 copy X (XShape holds no elements); their grads
// copy Out@GRAD.
struct squeeze2_op : ops::squeeze2_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        kernels::copy_elements(c.in(X).data<T>(), c.in(X).numel(), c.out(Out).data<T>());
    }
};
struct squeeze2_grad_op : ops::squeeze2_grad_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        kernels::copy_elements(c.in(DOut).data<T>(), c.in(DOut).numel(), c.out(0).data<T>());
    }
};

struct flip_op : ops::flip_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        bool f[max_rank];
        flipped(nullptr, c.attr(axis).ints, x.shape(), f);
        kernels::flip(x.data<T>(), x.shape().begin(), x.rank(), f, c.out(0).data<T>());
    }
};

// slice copies the box; slice_grad zeroes Input@GRAD and copies Out@GRAD
// into the box (kernels::slice_box).
struct slice_op : ops::slice_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(Input);
        std::int64_t start[max_rank], sub[max_rank];
        box(nullptr, c.attrs, x.shape(), start, sub);
        kernels::slice_box<false, T>(x.data<T>(), x.shape().begin(), x.rank(), start, sub, c.out(0).data<T>());
    }
};
struct slice_grad_op : ops::slice_grad_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(Input);
        Tensor& dx = c.out(0);
        std::int64_t start[max_rank], sub[max_rank];
        ops::slice_op::box(nullptr, c.attrs, x.shape(), start, sub);
        std::fill(dx.data<T>(), dx.data<T>() + dx.numel(), T{});
        kernels::slice_box<true, T>(dx.data<T>(), x.shape().begin(), x.rank(), start, sub, c.in(DOut).data<T>());
    }
};

struct transpose_op : ops::transpose_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        kernels::transpose(x.data<T>(), x.shape().begin(), x.rank(), c.attr(axis).ints.data(), c.out(0).data<T>());
    }
};

// Joins the inputs `x(k)` (k < n) along dim a into `y` of shape ys, a run
// of parts_per_call inputs per call of the core; `stacked`: each input is
// one index of that dim (stack), without the dim itself.
template <class T, class X> void concat_parts(int n, X x, int a, const Shape& ys, T* y, bool stacked = false) {
    if (ys.numel() == 0) return;
    const std::int64_t outer = ops::dim_product(ys, 0, a), inner = ops::dim_product(ys, a + 1, ys.rank());
    const T* xs[parts_per_call];
    std::int64_t dims[parts_per_call];
    std::int64_t at = 0;  // where along dim a the run starts
    for (int k0 = 0; k0 < n; k0 += parts_per_call) {
        const int m = std::min(n - k0, parts_per_call);
        std::int64_t width = 0;
        for (int j = 0; j < m; ++j) {
            const Tensor& t = x(k0 + j);
            xs[j] = t.data<T>();
            dims[j] = stacked ? 1 : t.shape()[a];
            width += dims[j];
        }
        kernels::concat(outer, inner, m, xs, dims, y + at * inner, ys[a] * inner);
        at += width;
    }
}

// Cuts `x` of shape xs along dim a into the outputs `y(k)` (k < n);
// `stacked`: each output is one index of that dim (unstack).
template <class T, class Y> void split_parts(const T* x, int a, const Shape& xs, int n, Y y, bool stacked = false) {
    if (xs.numel() == 0) return;
    const std::int64_t outer = ops::dim_product(xs, 0, a), inner = ops::dim_product(xs, a + 1, xs.rank());
    T* ys[parts_per_call];
    std::int64_t dims[parts_per_call];
    std::int64_t at = 0;
    for (int k0 = 0; k0 < n; k0 += parts_per_call) {
        const int m = std::min(n - k0, parts_per_call);
        std::int64_t width = 0;
        for (int j = 0; j < m; ++j) {
            Tensor& t = y(k0 + j);
            ys[j] = t.data<T>();
            dims[j] = stacked ? 1 : t.shape()[a];
            width += dims[j];
        }
        kernels::split(outer, inner, m, x + at * inner, xs[a] * inner, ys, dims);
        at += width;
    }
}

struct concat_op : ops::concat_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        Tensor& out = c.out(0);
        concat_parts<T>(c.in_count(X), [&](int k) -> const Tensor& { return c.in(X, k); },
                        normal_axis(c.attr(axis).i, out.rank()), out.shape(), out.data<T>());
    }
};

struct concat_grad_op : ops::concat_grad_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& dout = c.in(DOut);
        split_parts<T>(dout.data<T>(), normal_axis(c.attr(axis).i, dout.rank()), dout.shape(), c.out_count(0),
                       [&](int k) -> Tensor& { return c.out(0, k); });
    }
};

struct split_op : ops::split_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        split_parts<T>(x.data<T>(), normal_axis(c.attr(axis).i, x.rank()), x.shape(), c.out_count(0),
                       [&](int k) -> Tensor& { return c.out(0, k); });
    }
};

// stack and unstack_grad join input 0's parts along a new dim; unstack and
// stack_grad cut input 0 along a dim into the outputs.
struct stack_op : ops::stack_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        Tensor& out = c.out(0);
        concat_parts<T>(c.in_count(0), [&](int k) -> const Tensor& { return c.in(0, k); },
                        normal_axis(c.attr(axis).i, out.rank()), out.shape(), out.data<T>(), true);
    }
};
struct unstack_op : ops::unstack_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(0);
        split_parts<T>(x.data<T>(), normal_axis(c.attr(axis).i, x.rank()), x.shape(), c.out_count(0),
                       [&](int k) -> Tensor& { return c.out(0, k); }, true);
    }
};

// tile, expand, expand_v2 and their gradients: the repeats of each dim from
// the op's geometry, then the core's tile or tile_grad.
template <ops::tile_kind K> struct tile_op : ops::tile_op<K> {
    using base = ops::tile_op<K>;
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(base::X);
        std::int64_t xd[max_rank], reps[max_rank], out[max_rank];
        const int r = base::geometry(nullptr, x.shape(), c.attr(0).ints, xd, reps, out);
        kernels::tile(x.data<T>(), xd, reps, r, c.out(0).data<T>());
    }
};
template <ops::tile_kind K> struct tile_grad_op : ops::tile_op<K> {
    using base = ops::tile_op<K>;
    template <class T> static void compute(cpu, const KernelContext& c) {
        std::int64_t xd[max_rank], reps[max_rank], out[max_rank];
        const int r = base::geometry(nullptr, c.in(base::X).shape(), c.attr(0).ints, xd, reps, out);
        kernels::tile_grad(c.in(base::DOut).template data<T>(), xd, reps, r, c.out(0).data<T>());
    }
};

struct pad_op : ops::pad_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        Tensor& out = c.out(0);
        std::int64_t before[max_rank], after[max_rank];
        split(nullptr, c.attr(paddings).ints, x.rank(), before, after);
        kernels::pad(x.data<T>(), x.shape().begin(), x.rank(), before, out.shape().begin(),
                     kernels::convert<T>(c.attr(pad_value).f), out.data<T>());
    }
};
struct pad_grad_op : ops::pad_grad_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& d = c.in(DOut);
        Tensor& dx = c.out(0);
        std::int64_t before[max_rank], after[max_rank];
        ops::pad_op::split(nullptr, c.attr(ops::pad_op::paddings).ints, d.rank(), before, after);
        kernels::slice_box<false, T>(d.data<T>(), d.shape().begin(), d.rank(), before, dx.shape().begin(), dx.data<T>());
    }
};

struct cast_op : ops::cast_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        Tensor& out = c.out(0);
        visit_dtype(out.dtype(), [&]<class U>(type_tag<U>) {
            // FP16 has no conversions: inference refuses a cast to it, so
            // no FP16 output reaches a kernel.
            if constexpr (!std::is_same_v<U, float16>) kernels::cast(x.data<T>(), x.numel(), out.data<U>());
        });
    }
};

struct sum_op : ops::sum_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        Tensor& out = c.out(0);
        T* y = out.data<T>();
        const std::int64_t n = out.numel();
        const int count = c.in_count(X);
        // Paddle programs accumulate gradients in place (Out is one of the
        // X): then that input is already in Out and only the others add.
        int alias = -1;
        for (int k = 0; k < count; ++k)
            if (c.in(X, k).raw() == out.raw()) alias = k;
        if (alias < 0 && count == 1) return kernels::copy_elements(c.in(X, 0).data<T>(), n, y);
        if (alias >= 0 && count == 1) return;
        // One split of [0, n) as binary_loop makes it (pieces start on whole
        // vectors), each piece taking every addition in input order: the
        // bits of one elementwise_add per input.
        split_loop<T>(n, [&](std::int64_t b, std::int64_t e) {
            const T* xs[parts_per_call];
            bool accumulate = alias >= 0;
            int m = 0;
            for (int k = 0; k < count; ++k) {
                if (k == alias) continue;
                xs[m++] = static_cast<const T*>(c.in(X, k).raw()) + b;
                if (m == parts_per_call) {
                    kernels::sum(e - b, m, xs, y + b, accumulate);
                    accumulate = true;
                    m = 0;
                }
            }
            if (m > 0) kernels::sum(e - b, m, xs, y + b, accumulate);
        });
    }
};

inline void reshape_kernels(OpDef& d) { d.kernels = copy_kernels<reshape_op>(); }
inline void reshape_grad_kernels(OpDef& d) { d.kernels = copy_kernels<reshape_grad_op>(); }
inline void transpose_kernels(OpDef& d) { d.kernels = copy_kernels<transpose_op>(); }
inline void squeeze2_kernels(OpDef& d) { d.kernels = copy_kernels<squeeze2_op>(); }
inline void unsqueeze2_kernels(OpDef& d) { d.kernels = copy_kernels<squeeze2_op>(); }  // the same copy
inline void squeeze2_grad_kernels(OpDef& d) { d.kernels = copy_kernels<squeeze2_grad_op>(); }
inline void unsqueeze2_grad_kernels(OpDef& d) { d.kernels = copy_kernels<squeeze2_grad_op>(); }
inline void flip_kernels(OpDef& d) { d.kernels = copy_kernels<flip_op>(); }
inline void slice_kernels(OpDef& d) { d.kernels = copy_kernels<slice_op>(); }
inline void slice_grad_kernels(OpDef& d) { d.kernels = copy_kernels<slice_grad_op>(); }
inline void concat_kernels(OpDef& d) { d.kernels = copy_kernels<concat_op>(); }
inline void concat_grad_kernels(OpDef& d) { d.kernels = copy_kernels<concat_grad_op>(); }
inline void split_kernels(OpDef& d) { d.kernels = copy_kernels<split_op>(); }
inline void stack_kernels(OpDef& d) { d.kernels = copy_kernels<stack_op>(); }
inline void stack_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<unstack_op, float, double>(); }
inline void unstack_kernels(OpDef& d) { d.kernels = copy_kernels<unstack_op>(); }
inline void unstack_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<stack_op, float, double>(); }
template <ops::tile_kind K> void tile_family_kernels(OpDef& d) {
    d.kernels = cpu_kernels<tile_op<K>, bool, std::int32_t, std::int64_t, float, double>();
}
template <ops::tile_kind K> void tile_family_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<tile_grad_op<K>, float, double>(); }
inline void tile_kernels(OpDef& d) { tile_family_kernels<ops::tile_kind::tile>(d); }
inline void tile_grad_kernels(OpDef& d) { tile_family_grad_kernels<ops::tile_kind::tile>(d); }
inline void expand_kernels(OpDef& d) { tile_family_kernels<ops::tile_kind::expand>(d); }
inline void expand_grad_kernels(OpDef& d) { tile_family_grad_kernels<ops::tile_kind::expand>(d); }
inline void expand_v2_kernels(OpDef& d) { tile_family_kernels<ops::tile_kind::expand_v2>(d); }
inline void expand_v2_grad_kernels(OpDef& d) { tile_family_grad_kernels<ops::tile_kind::expand_v2>(d); }
inline void pad_kernels(OpDef& d) { d.kernels = cpu_kernels<pad_op, float, double, std::int32_t, std::int64_t>(); }
inline void pad_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<pad_grad_op, float, double>(); }
inline void cast_kernels(OpDef& d) {
    d.kernels = cpu_kernels<cast_op, bool, std::int16_t, std::int32_t, std::int64_t, float, double>();
}
inline void sum_kernels(OpDef& d) { d.kernels = cpu_kernels<sum_op, float, double, std::int32_t, std::int64_t>(); }

}  // namespace dlgraph::cpu_ops
