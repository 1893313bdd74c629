// Ops for evaluating a classifier (PaddlePaddle's slots and conventions),
// their definitions: top_k (the k largest values of each row and where they
// are) and accuracy (the share of rows whose label is among their top-k
// indices). Neither is differentiable. The math is in kernels/eval.hpp, the
// CPU kernels in cpu/eval_ops.hpp.
#pragma once

#include <string>

#include "dlgraph/op.hpp"
#include "dlgraph/ops/op_util.hpp"

namespace dlgraph::ops {

// ---- top_k ---------------------------------------------------------------------------------

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
};

inline OpDef top_k_def() {
    OpDef d{"top_k", {{"X"}}, {{"Out"}, {"Indices"}}, {{"k", Attribute::make_int("k", 1)}}, &top_k_op::infer};
    d.may_fail = true;  // k beyond the row
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
};

inline OpDef accuracy_def() {
    OpDef d{"accuracy", {{"Out"}, {"Indices"}, {"Label"}}, {{"Accuracy"}, {"Correct"}, {"Total"}}, {}, &accuracy_op::infer};
    d.doc = "Accuracy = share of rows whose Label is among their top-k Indices (Correct and Total as counts)";
    return d;
}

}  // namespace dlgraph::ops

