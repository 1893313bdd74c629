// Ops for evaluating a classifier (PaddlePaddle's slots and conventions):
// top_k (the k largest values of each row and where they are) and accuracy
// (the share of rows whose label is among their top-k indices). Neither is
// differentiable.
#pragma once

#include <algorithm>
#include <cmath>

#include "dlgraph/ops/op_util.hpp"

namespace dlgraph::ops {

// ---- top_k ---------------------------------------------------------------------------------

// Whether element i of a row ranks before element j: a larger value first,
// NaN above everything, and equal values by lower index. A strict total
// order, so the heap and the sort below are well defined on any input.
template <class T> struct topk_before {
    const T* row;
    bool operator()(std::int64_t i, std::int64_t j) const {
        const T a = row[i], b = row[j];
        if constexpr (std::is_floating_point_v<T>) {
            const bool na = std::isnan(a), nb = std::isnan(b);
            if (na != nb) return na;
            if (na) return i < j;
        }
        if (a != b) return a > b;
        return i < j;
    }
};

struct top_k_op {
    enum { X = 0 };
    enum { Out = 0, Indices = 1 };
    enum { k = 0 };

    static void infer(const InferContext& c) {
        c.dtype_in(X, {DataType::FP32, DataType::FP64, DataType::INT32, DataType::INT64});
        const Shape& xs = c.shape(X);
        const std::int64_t kk = c.attr(k).i;
        if (xs.rank() == 0) c.fail("dlgraph.shape.top_k", "X is " + to_string(xs) + ": it needs rank >= 1");
        if (kk < 1) c.fail("dlgraph.shape.top_k", "k is " + std::to_string(kk) + ": it must be at least 1");
        const std::int64_t last = xs[xs.rank() - 1];
        if (last >= 0 && kk > last)
            c.fail("dlgraph.shape.top_k", "k is " + std::to_string(kk) + " but X is " + to_string(xs) +
                                              ": k must not exceed the last dim (" + std::to_string(last) + ")");
        Shape out = xs;
        out[out.rank() - 1] = kk;
        c.set(Out, c.dtype(X), out);
        c.set(Indices, DataType::INT64, out);
    }

    // Per row: the k best indices kept as a heap in Indices itself (worst on
    // top), then sorted best first; O(n log k) and no scratch memory.
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Shape& xs = x.shape();
        const std::int64_t n = xs[xs.rank() - 1], kk = c.attr(k).i;
        const std::int64_t rows = dim_product(xs, 0, xs.rank() - 1);
        if (kk > n)  // inference refuses this; guard the heap against a stale plan
            return c.fault->raise(fault_code::k_out_of_range, kk, n);
        const T* xp = x.data<T>();
        T* vals = c.out(Out).data<T>();
        std::int64_t* idx = c.out(Indices).data<std::int64_t>();
        for (std::int64_t r = 0; r < rows; ++r) {
            const topk_before<T> before{xp + r * n};
            std::int64_t* ir = idx + r * kk;
            for (std::int64_t j = 0; j < kk; ++j) ir[j] = j;
            std::make_heap(ir, ir + kk, before);  // ir[0] is the worst kept
            for (std::int64_t j = kk; j < n; ++j) {
                if (!before(j, ir[0])) continue;
                std::pop_heap(ir, ir + kk, before);
                ir[kk - 1] = j;
                std::push_heap(ir, ir + kk, before);
            }
            std::sort(ir, ir + kk, before);
            for (std::int64_t j = 0; j < kk; ++j) vals[r * kk + j] = before.row[ir[j]];
        }
    }
};

inline OpDef top_k_def() {
    OpDef d{"top_k", {{"X"}}, {{"Out"}, {"Indices"}}, {{"k", Attribute::make_int("k", 1)}}, &top_k_op::infer};
    d.kernels = cpu_kernels<top_k_op, float, double, std::int32_t, std::int64_t>();
    d.doc = "Out, Indices = the k largest values of each last-axis row, largest first (ties: lower index)";
    return d;
}

// ---- accuracy ------------------------------------------------------------------------------

struct accuracy_op {
    enum { Out = 0, Indices = 1, Label = 2 };
    enum { Accuracy = 0, Correct = 1, Total = 2 };

    static void infer(const InferContext& c) {
        c.dtype_in(Indices, {DataType::INT64});
        c.dtype_in(Label, {DataType::INT64});
        const Shape& os = c.shape(Out);
        const Shape& is = c.shape(Indices);
        const Shape& ls = c.shape(Label);
        if (is.rank() != 2)
            c.fail("dlgraph.shape.accuracy", "Indices is " + to_string(is) + ": it must be [N, k]");
        bool same = os.rank() == 2;
        for (int i = 0; same && i < 2; ++i) same = dims_agree(os[i], is[i]);
        if (!same)
            c.fail("dlgraph.shape.accuracy", "Out is " + to_string(os) + " but Indices is " + to_string(is) +
                                                 ": both come from one top_k and must have one shape");
        if (ls.rank() != 2 || !dims_agree(ls[0], is[0]) || !dims_agree(ls[1], 1))
            c.fail("dlgraph.shape.accuracy", "Indices is " + to_string(is) + " but Label is " + to_string(ls) +
                                                 ": Label must be [N, 1] with Indices' N");
        c.set(Accuracy, DataType::FP32, Shape{1});
        c.set(Correct, DataType::INT32, Shape{1});
        c.set(Total, DataType::INT32, Shape{1});
    }

    // Out's values are not read (its dtype selects the kernel, as in Paddle).
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& ind = c.in(Indices);
        const std::int64_t rows = ind.shape()[0], kk = ind.shape()[1];
        const std::int64_t* ip = ind.data<std::int64_t>();
        const std::int64_t* lp = c.in(Label).data<std::int64_t>();
        std::int64_t correct = 0;
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t j = 0; j < kk; ++j)
                if (ip[r * kk + j] == lp[r]) {
                    ++correct;
                    break;
                }
        *c.out(Accuracy).data<float>() = rows ? static_cast<float>(static_cast<double>(correct) / static_cast<double>(rows)) : 0.0f;
        *c.out(Correct).data<std::int32_t>() = static_cast<std::int32_t>(correct);
        *c.out(Total).data<std::int32_t>() = static_cast<std::int32_t>(rows);
    }
};

inline OpDef accuracy_def() {
    OpDef d{"accuracy", {{"Out"}, {"Indices"}, {"Label"}}, {{"Accuracy"}, {"Correct"}, {"Total"}}, {}, &accuracy_op::infer};
    d.kernels = cpu_kernels<accuracy_op, float, double, std::int32_t, std::int64_t>();
    d.doc = "Accuracy = share of rows whose Label is among their top-k Indices (Correct and Total as counts)";
    return d;
}

}  // namespace dlgraph::ops

