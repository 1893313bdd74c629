// Losses of their own (the cross entropies with softmax are in
// ops/softmax.hpp), with PaddlePaddle's slots and attributes: bce_loss (of
// probabilities) and sigmoid_cross_entropy_with_logits (of logits), element
// by element; huber_loss; smooth_l1_loss (a sum per row); kldiv_loss (with
// its reduction).
#pragma once

#include <string>

#include "dlgraph/kernels/loss.hpp"  // kl_reduction
#include "dlgraph/op.hpp"
#include "dlgraph/ops/elementwise.hpp"  // check_grad_shape
#include "dlgraph/ops/op_util.hpp"

namespace dlgraph::ops {

// X (probabilities in [0, 1]) and Label of one shape -> Out of that shape;
// the grad op reads X, Label and Out@GRAD and gives X@GRAD (Label has none).
// Two floating-point inputs of one dtype and shape (unknown dims agree):
// their merged shape; else [dlgraph.shape.loss] naming both.
inline Shape same_shape_pair(const InferContext& c, int a, int b, const std::string& an, const std::string& bn) {
    c.dtype_in(a, {DataType::FP32, DataType::FP64});
    c.same_dtype({a, b});
    const Shape &as = c.shape(a), &bs = c.shape(b);
    bool same = as.rank() == bs.rank();
    for (int i = 0; same && i < as.rank(); ++i) same = dims_agree(as[i], bs[i]);
    if (!same)
        c.fail("dlgraph.shape.loss", an + " is " + to_string(as) + " but " + bn + " is " + to_string(bs) + ": " +
                                         std::string(c.def().type) + " takes them of one shape");
    Shape s = as;
    for (int i = 0; i < s.rank(); ++i) s[i] = merge_dim(s[i], bs[i]);
    return s;
}

struct bce_loss_op {
    enum { X = 0, Label = 1, DOut = 2 };
    static Shape checked(const InferContext& c) { return same_shape_pair(c, X, Label, "X", "Label"); }
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

// ---- sigmoid_cross_entropy_with_logits ----------------------------------------------------------
//
// X (logits) and Label (probabilities) of one shape -> Out of that shape
// (kernels::sigmoid_cross_entropy_with_logits); Label gets no gradient.
struct sigmoid_ce_op {
    enum { X = 0, Label = 1, DOut = 2 };
    enum { normalize = 0, ignore_index = 1 };
    static void infer(const InferContext& c) { c.set(0, c.dtype(X), same_shape_pair(c, X, Label, "X", "Label")); }
    static void infer_grad(const InferContext& c) {
        check_grad_shape(c, same_shape_pair(c, X, Label, "X", "Label"), DOut, "Out@GRAD");
        c.same_dtype({X, DOut});
        c.set(0, c.dtype(X), c.shape(X));
    }
};
inline std::vector<AttrDef> sigmoid_ce_attrs() {
    return {{"normalize", Attribute::make_bool("normalize", false)}, {"ignore_index", Attribute::make_int("ignore_index", -100)}};
}
inline OpDef sigmoid_cross_entropy_with_logits_def() {
    OpDef d{"sigmoid_cross_entropy_with_logits", {{"X"}, {"Label"}}, {{"Out"}}, sigmoid_ce_attrs(), &sigmoid_ce_op::infer};
    d.doc = "Out = max(X, 0) - X * Label + log(1 + exp(-|X|)); 0 where Label == ignore_index; normalize: / the others' count";
    d.no_grad_inputs = {"Label"};
    d.grad_spec = {"sigmoid_cross_entropy_with_logits_grad", {"X", "Label"}, {}, {"X"}, {"Out"}};
    return d;
}
inline OpDef sigmoid_cross_entropy_with_logits_grad_def() {
    OpDef d{"sigmoid_cross_entropy_with_logits_grad", {{"X"}, {"Label"}, {"Out@GRAD"}}, {{"X@GRAD"}}, sigmoid_ce_attrs(),
            &sigmoid_ce_op::infer_grad};
    d.doc = "X@GRAD = (sigmoid(X) - Label) * Out@GRAD, with the forward op's zeros and divisor";
    return d;
}

// ---- huber_loss ------------------------------------------------------------------------------------
//
// X, Y of one shape -> Out and Residual = Y - X of that shape. The grad op
// (Paddle's) reads Residual and Out@GRAD and writes X@GRAD, Y@GRAD.
struct huber_loss_op {
    enum { X = 0, Y = 1 };
    enum { Out = 0, Residual = 1 };
    enum { delta = 0 };
    static void infer(const InferContext& c) {
        const Shape s = same_shape_pair(c, X, Y, "X", "Y");
        if (!(c.attr(delta).f >= 0))
            c.fail("dlgraph.shape.attr", "delta is " + std::to_string(c.attr(delta).f) + ": it must not be negative");
        c.set(Out, c.dtype(X), s);
        c.set(Residual, c.dtype(X), s);
    }
};
struct huber_loss_grad_op {
    enum { Residual = 0, DOut = 1 };
    enum { DX = 0, DY = 1 };
    static void infer(const InferContext& c) {
        const Shape s = same_shape_pair(c, Residual, DOut, "Residual", "Out@GRAD");
        if (c.out_count(DX)) c.set(DX, c.dtype(DOut), s);
        if (c.out_count(DY)) c.set(DY, c.dtype(DOut), s);
    }
};
inline OpDef huber_loss_def() {
    OpDef d{"huber_loss", {{"X"}, {"Y"}}, {{"Out"}, {"Residual"}}, {{"delta", Attribute::make_float("delta", 1.0)}},
            &huber_loss_op::infer};
    d.doc = "Residual = Y - X; Out = Residual^2 / 2 where |Residual| <= delta, else delta (|Residual| - delta / 2)";
    d.grad_maker = [](const GradRequest& r) -> std::vector<OpDesc> {
        const std::string dx = r.grad_name("X", 0), dy = r.grad_name("Y", 0);
        if (dx.empty() && dy.empty()) return {};
        OpDesc g;
        g.type = "huber_loss_grad";
        g.set_input("Residual", {r.fwd.output("Residual")->arguments.at(0)}).set_input("Out@GRAD", {r.out_grad("Out", 0)});
        if (!dx.empty()) g.set_output("X@GRAD", {dx});
        if (!dy.empty()) g.set_output("Y@GRAD", {dy});
        g.attrs = r.fwd.attrs;
        return {g};
    };
    return d;
}
inline OpDef huber_loss_grad_def() {
    OpDef d{"huber_loss_grad", {{"Residual"}, {"Out@GRAD"}}, {{"X@GRAD", false, true}, {"Y@GRAD", false, true}},
            {{"delta", Attribute::make_float("delta", 1.0)}}, &huber_loss_grad_op::infer};
    d.kernel_slot = huber_loss_grad_op::DOut;
    d.doc = "Y@GRAD = -X@GRAD = Out@GRAD * (Residual, clipped to [-delta, delta])";
    return d;
}

// ---- smooth_l1_loss --------------------------------------------------------------------------------
//
// X, Y [N, ...] (one shape) and the optional InsideWeight, OutsideWeight of
// that shape -> Diff = (X - Y) * InsideWeight, and Out [N, 1], each row's
// sum of the smooth L1 of Diff (sigma: the quadratic part's width is
// 1 / sigma^2) times OutsideWeight. The grad op reads the weights, Diff and
// Out@GRAD; its X@GRAD is the true gradient, InsideWeight included.
struct smooth_l1_loss_op {
    enum { X = 0, Y = 1, InsideWeight = 2, OutsideWeight = 3 };
    enum { Diff = 0, Out = 1 };
    enum { sigma = 0 };
    // Checks a weight slot, when given, against input `like` (X or Diff).
    static void check_weight(const InferContext& c, int slot, const std::string& name, int like) {
        if (c.in_count(slot)) same_shape_pair(c, like, slot, like == X ? "X" : "Diff", name);
    }
    static Shape rows_shape(const InferContext& c, const Shape& s) {
        if (s.rank() < 1) c.fail("dlgraph.shape.loss", "X is " + to_string(s) + ": it must be [N, ...]");
        if (!(c.attr(sigma).f > 0))
            c.fail("dlgraph.shape.attr", "sigma is " + std::to_string(c.attr(sigma).f) + ": it must be positive");
        return Shape{s[0], 1};
    }
    static void infer(const InferContext& c) {
        const Shape s = same_shape_pair(c, X, Y, "X", "Y");
        check_weight(c, InsideWeight, "InsideWeight", X);
        check_weight(c, OutsideWeight, "OutsideWeight", X);
        c.set(Diff, c.dtype(X), s);
        c.set(Out, c.dtype(X), rows_shape(c, s));
    }
};
struct smooth_l1_loss_grad_op {
    enum { InsideWeight = 0, OutsideWeight = 1, Diff = 2, DOut = 3 };
    enum { DX = 0, DY = 1 };
    static void infer(const InferContext& c) {
        c.dtype_in(Diff, {DataType::FP32, DataType::FP64});
        c.same_dtype({Diff, DOut});
        const Shape& s = c.shape(Diff);
        smooth_l1_loss_op::check_weight(c, InsideWeight, "InsideWeight", Diff);
        smooth_l1_loss_op::check_weight(c, OutsideWeight, "OutsideWeight", Diff);
        check_grad_shape(c, smooth_l1_loss_op::rows_shape(c, s), DOut, "Out@GRAD");
        if (c.out_count(DX)) c.set(DX, c.dtype(Diff), s);
        if (c.out_count(DY)) c.set(DY, c.dtype(Diff), s);
    }
};
inline OpDef smooth_l1_loss_def() {
    OpDef d{"smooth_l1_loss",
            {{"X"}, {"Y"}, {"InsideWeight", false, true}, {"OutsideWeight", false, true}},
            {{"Diff"}, {"Out"}},
            {{"sigma", Attribute::make_float("sigma", 1.0)}},
            &smooth_l1_loss_op::infer};
    d.doc = "Diff = (X - Y) * InsideWeight; Out[n] = sum of smooth_l1(Diff) * OutsideWeight over row n";
    d.no_grad_inputs = {"InsideWeight", "OutsideWeight"};
    d.grad_maker = [](const GradRequest& r) -> std::vector<OpDesc> {
        const std::string dx = r.grad_name("X", 0), dy = r.grad_name("Y", 0);
        if (dx.empty() && dy.empty()) return {};
        OpDesc g;
        g.type = "smooth_l1_loss_grad";
        for (const char* w : {"InsideWeight", "OutsideWeight"})
            if (const OpSlot* s = r.fwd.input(w); s && !s->arguments.empty()) g.set_input(w, s->arguments);
        g.set_input("Diff", {r.fwd.output("Diff")->arguments.at(0)}).set_input("Out@GRAD", {r.out_grad("Out", 0)});
        if (!dx.empty()) g.set_output("X@GRAD", {dx});
        if (!dy.empty()) g.set_output("Y@GRAD", {dy});
        g.attrs = r.fwd.attrs;
        return {g};
    };
    return d;
}
inline OpDef smooth_l1_loss_grad_def() {
    OpDef d{"smooth_l1_loss_grad",
            {{"InsideWeight", false, true}, {"OutsideWeight", false, true}, {"Diff"}, {"Out@GRAD"}},
            {{"X@GRAD", false, true}, {"Y@GRAD", false, true}},
            {{"sigma", Attribute::make_float("sigma", 1.0)}},
            &smooth_l1_loss_grad_op::infer};
    d.kernel_slot = smooth_l1_loss_grad_op::Diff;
    d.doc = "X@GRAD = -Y@GRAD = smooth_l1'(Diff) * OutsideWeight * InsideWeight * Out@GRAD (per row)";
    return d;
}

// ---- kldiv_loss -----------------------------------------------------------------------------------
//
// X (log-probabilities) and Target of one shape -> Loss: X's shape with
// reduction "none", else [1] ("sum", "mean" over all elements, "batchmean":
// the sum over X's first dim). Target gets no gradient.
struct kldiv_loss_op {
    enum { X = 0, Target = 1, DLoss = 2 };
    enum { reduction = 0 };
    static kernels::kl_reduction reduction_of(const InferContext* c, const std::string& r) {
        if (r == "none") return kernels::kl_reduction::none;
        if (r == "sum") return kernels::kl_reduction::sum;
        if (r == "batchmean") return kernels::kl_reduction::batchmean;
        if (c && r != "mean")
            c->fail("dlgraph.shape.attr", "reduction is '" + r + "': it must be none, sum, mean or batchmean");
        return kernels::kl_reduction::mean;
    }
    static Shape loss_shape(const InferContext& c) {
        const Shape s = same_shape_pair(c, X, Target, "X", "Target");
        if (reduction_of(&c, c.attr(reduction).s) == kernels::kl_reduction::none) return s;
        if (c.attr(reduction).s == "batchmean" && s.rank() < 1) c.fail("dlgraph.shape.loss", "batchmean needs X's first dim");
        return Shape{1};
    }
    static void infer(const InferContext& c) { c.set(0, c.dtype(X), loss_shape(c)); }
    static void infer_grad(const InferContext& c) {
        check_grad_shape(c, loss_shape(c), DLoss, "Loss@GRAD");
        c.same_dtype({X, DLoss});
        c.set(0, c.dtype(X), c.shape(X));
    }
};
inline OpDef kldiv_loss_def() {
    OpDef d{"kldiv_loss", {{"X"}, {"Target"}}, {{"Loss"}}, {{"reduction", Attribute::make_string("reduction", "mean")}},
            &kldiv_loss_op::infer};
    d.doc = "Loss = Target * (log(Target) - X) where Target > 0 (else 0), reduced: none, sum, mean or batchmean";
    d.no_grad_inputs = {"Target"};
    d.grad_spec = {"kldiv_loss_grad", {"X", "Target"}, {}, {"X"}, {"Loss"}};
    return d;
}
inline OpDef kldiv_loss_grad_def() {
    OpDef d{"kldiv_loss_grad", {{"X"}, {"Target"}, {"Loss@GRAD"}}, {{"X@GRAD"}},
            {{"reduction", Attribute::make_string("reduction", "mean")}}, &kldiv_loss_op::infer_grad};
    d.doc = "X@GRAD = -Target * Loss@GRAD where Target > 0 (with the reduction's divisor)";
    return d;
}

}  // namespace dlgraph::ops
