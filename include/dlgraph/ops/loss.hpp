// Losses of their own (the cross entropies with softmax are in
// ops/softmax.hpp): bce_loss, PaddlePaddle's binary cross entropy of
// probabilities, element by element.
#pragma once

#include <string>

#include "dlgraph/op.hpp"
#include "dlgraph/ops/elementwise.hpp"  // check_grad_shape
#include "dlgraph/ops/op_util.hpp"

namespace dlgraph::ops {

// X (probabilities in [0, 1]) and Label of one shape -> Out of that shape;
// the grad op reads X, Label and Out@GRAD and gives X@GRAD (Label has none).
struct bce_loss_op {
    enum { X = 0, Label = 1, DOut = 2 };
    static Shape checked(const InferContext& c) {
        c.dtype_in(X, {DataType::FP32, DataType::FP64});
        c.same_dtype({X, Label});
        const Shape &xs = c.shape(X), &ls = c.shape(Label);
        bool same = xs.rank() == ls.rank();
        for (int i = 0; same && i < xs.rank(); ++i) same = dims_agree(xs[i], ls[i]);
        if (!same)
            c.fail("dlgraph.shape.bce_loss", "X is " + to_string(xs) + " but Label is " + to_string(ls) +
                                                 ": bce_loss takes X and Label of one shape");
        Shape s = xs;
        for (int i = 0; i < s.rank(); ++i) s[i] = merge_dim(s[i], ls[i]);
        return s;
    }
    static void infer(const InferContext& c) { c.set(0, c.dtype(X), checked(c)); }
    static void infer_grad(const InferContext& c) {
        const Shape s = checked(c);
        check_grad_shape(c, s, DOut, "Out@GRAD");
        c.same_dtype({X, DOut});
        c.set(0, c.dtype(X), c.shape(X));
    }
};

inline OpDef bce_loss_def() {
    OpDef d{"bce_loss", {{"X"}, {"Label"}}, {{"Out"}}, {}, &bce_loss_op::infer};
    d.doc = "Out = -(Label * log(X) + (1 - Label) * log(1 - X)), the logs clipped at -100; X in [0, 1]";
    d.may_fail = true;  // an X outside [0, 1]
    d.no_grad_inputs = {"Label"};
    d.grad_spec = {"bce_loss_grad", {"X", "Label"}, {}, {"X"}, {"Out"}};
    return d;
}

inline OpDef bce_loss_grad_def() {
    OpDef d{"bce_loss_grad", {{"X"}, {"Label"}, {"Out@GRAD"}}, {{"X@GRAD"}}, {}, &bce_loss_op::infer_grad};
    d.doc = "X@GRAD = Out@GRAD * (X - Label) / max((1 - X) * X, 1e-12)";
    return d;
}

}  // namespace dlgraph::ops
