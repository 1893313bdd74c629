// Softmax and the classification losses built on it, their definitions:
// softmax, cross_entropy (on probabilities) and softmax_with_cross_entropy (on
// logits, via log-sum-exp so large logits neither overflow nor lose digits),
// and their gradients. The math is in kernels/softmax.hpp (the kernel core),
// the CPU kernels in cpu/softmax.hpp.
#pragma once

#include <string>
#include <vector>

#include "dlgraph/kernels/softmax.hpp"  // default_ignore_index
#include "dlgraph/op.hpp"
#include "dlgraph/ops/op_util.hpp"

namespace dlgraph::ops {

// ---- softmax ---------------------------------------------------------------------------

struct softmax_op {
    enum { X = 0 };
    enum { axis = 0 };
    static void infer(const InferContext& c) {
        c.dtype_in(X, {DataType::FP32, DataType::FP64});
        infer_axis(c, c.attr(axis).i, c.shape(X), "X");
        c.set(0, c.dtype(X), c.shape(X));
    }
};

inline OpDef softmax_def() {
    OpDef d{"softmax", {{"X"}}, {{"Out"}}, {{"axis", Attribute::make_int("axis", -1)}}, &softmax_op::infer};
    d.doc = "Out = exp(X) / sum(exp(X)) along axis";
    d.grad_spec = {"softmax_grad", {}, {"Out"}, {"X"}};
    return d;
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
};

inline OpDef softmax_grad_def() {
    OpDef d{"softmax_grad", {{"Out"}, {"Out@GRAD"}}, {{"X@GRAD"}}, {{"axis", Attribute::make_int("axis", -1)}},
            &softmax_grad_op::infer};
    d.doc = "X@GRAD = Out * (Out@GRAD - sum(Out@GRAD * Out)) along axis";
    return d;
}

// ---- log_softmax -----------------------------------------------------------------------
//
// Paddle's log_softmax: X -> Out, axis (-1). Its slots, attribute and checks
// are softmax's, and so are its gradient's (Out, Out@GRAD -> X@GRAD).

inline OpDef log_softmax_def() {
    OpDef d{"log_softmax", {{"X"}}, {{"Out"}}, {{"axis", Attribute::make_int("axis", -1)}}, &softmax_op::infer};
    d.doc = "Out = X - log(sum(exp(X))) along axis";
    d.grad_spec = {"log_softmax_grad", {}, {"Out"}, {"X"}};
    return d;
}

inline OpDef log_softmax_grad_def() {
    OpDef d{"log_softmax_grad", {{"Out"}, {"Out@GRAD"}}, {{"X@GRAD"}}, {{"axis", Attribute::make_int("axis", -1)}},
            &softmax_grad_op::infer};
    d.doc = "X@GRAD = Out@GRAD - exp(Out) * sum(Out@GRAD) along axis";
    return d;
}

// ---- losses -----------------------------------------------------------------------------

// Shared checks of (X or Logits, Label): X is [..., D]; a hard Label is
// INT64 [..., 1], a soft one has X's dtype and shape. Returns [..., 1].
// With `lower_rank` (cross_entropy, as Paddle's), a hard Label may also be
// [...] (X's rank less one), and the loss then has Label's shape.
inline Shape loss_infer(const InferContext& c, int x, int label, bool soft, bool lower_rank = false) {
    const std::string xn = c.slot_name(x);
    c.dtype_in(x, {DataType::FP32, DataType::FP64});
    if (soft) c.same_dtype({x, label});
    else c.dtype_in(label, {DataType::INT64});
    const Shape& xs = c.shape(x);
    const Shape& ls = c.shape(label);
    const std::string both = xn + " is " + to_string(xs) + " but Label is " + to_string(ls);
    if (xs.rank() == 0) c.fail("dlgraph.shape.loss", xn + " is " + to_string(xs) + ": it needs rank >= 1 ([..., classes])");
    const bool dropped = lower_rank && !soft && xs.rank() > 1 && ls.rank() == xs.rank() - 1;
    if (ls.rank() != xs.rank() && !dropped)
        c.fail("dlgraph.shape.loss", both + ": Label must have " + xn + "'s rank (" + std::to_string(xs.rank()) + ")" +
                                         (lower_rank && !soft ? " or one less" : ""));
    const int r = xs.rank();
    Shape out;
    for (int i = 0; i + 1 < r; ++i) {
        if (!dims_agree(xs[i], ls[i]))
            c.fail("dlgraph.shape.loss", both + ": dim " + std::to_string(i) + " differs (" + std::to_string(xs[i]) +
                                             " vs " + std::to_string(ls[i]) + ")");
        out.push_back(merge_dim(xs[i], ls[i]));
    }
    if (dropped) return out;
    if (soft && !dims_agree(xs[r - 1], ls[r - 1]))
        c.fail("dlgraph.shape.loss", both + ": a soft Label needs " + xn + "'s last dim (" + std::to_string(xs[r - 1]) +
                                         "), not " + std::to_string(ls[r - 1]));
    if (!soft && !dims_agree(ls[r - 1], 1))
        c.fail("dlgraph.shape.loss", both + ": a hard Label holds one class index per row, so its last dim must be 1");
    out.push_back(1);
    return out;
}

struct cross_entropy_op {
    enum { X = 0, Label = 1 };
    enum { soft_label = 0, ignore_index = 1 };
    static void infer(const InferContext& c) {
        c.set(0, c.dtype(X), loss_infer(c, X, Label, c.attr(soft_label).b, true));
    }
};

inline OpDef cross_entropy_def() {
    OpDef d{"cross_entropy", {{"X"}, {"Label"}}, {{"Y"}}, {{"soft_label", Attribute::make_bool("soft_label", false)},
             {"ignore_index", Attribute::make_int("ignore_index", kernels::default_ignore_index)}},
            &cross_entropy_op::infer};
    d.may_fail = true;  // a label out of range
    d.doc = "Y = -log(X[label]) per row (soft: -sum(label * log(X))); 0 where label == ignore_index";
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

// Out@GRAD-like input `dslot` must have the loss's shape `want`.
inline void loss_grad_check(const InferContext& c, const Shape& want, int dslot, const std::string& dname) {
    const Shape& ds = c.shape(dslot);
    bool ok = ds.rank() == want.rank();
    for (int i = 0; ok && i < ds.rank(); ++i) ok = dims_agree(ds[i], want[i]);
    if (!ok)
        c.fail("dlgraph.shape.grad", dname + " is " + to_string(ds) + " but the loss is " + to_string(want));
}

// X, Label, Y@GRAD -> X@GRAD: -dY / X at the label (hard), -dY * label / X (soft).
struct cross_entropy_grad_op {
    enum { X = 0, Label = 1, DY = 2 };
    enum { soft_label = 0, ignore_index = 1 };
    static void infer(const InferContext& c) {
        const Shape loss = loss_infer(c, X, Label, c.attr(soft_label).b, true);
        c.same_dtype({X, DY});
        loss_grad_check(c, loss, DY, "Y@GRAD");
        c.set(0, c.dtype(X), c.shape(X));
    }
};

inline OpDef cross_entropy_grad_def() {
    OpDef d{"cross_entropy_grad", {{"X"}, {"Label"}, {"Y@GRAD"}}, {{"X@GRAD"}},
            {{"soft_label", Attribute::make_bool("soft_label", false)},
             {"ignore_index", Attribute::make_int("ignore_index", kernels::default_ignore_index)}}, &cross_entropy_grad_op::infer};
    d.may_fail = true;  // a label out of range
    d.doc = "X@GRAD = -Y@GRAD / X at the label (soft: -Y@GRAD * Label / X)";
    return d;
}

// Paddle's attributes of softmax_with_cross_entropy (and its grad op):
// numeric_stable_mode is accepted either way (dlgraph always computes the
// stable form, which Paddle's mode true chooses); axis must be the last
// one and use_softmax true, else the op is refused (not yet supported).
inline std::vector<AttrDef> swce_attrs() {
    return {{"soft_label", Attribute::make_bool("soft_label", false)},
            {"ignore_index", Attribute::make_int("ignore_index", kernels::default_ignore_index)},
            {"numeric_stable_mode", Attribute::make_bool("numeric_stable_mode", true)},
            {"axis", Attribute::make_int("axis", -1)},
            {"use_softmax", Attribute::make_bool("use_softmax", true)}};
}
// loss_infer for (Logits or Softmax, Label), after the attributes' checks.
inline Shape swce_infer(const InferContext& c, int x, int label) {
    enum { soft_label = 0, axis = 3, use_softmax = 4 };
    const std::int64_t a = c.attr(axis).i, r = c.shape(x).rank();
    if (a != -1 && a != r - 1)
        c.fail("dlgraph.shape.attr", "axis " + std::to_string(a) + ": only the last axis (-1) is supported yet; transpose " +
                                         c.slot_name(x) + " " + to_string(c.shape(x)) + " to put the classes last");
    if (!c.attr(use_softmax).b)
        c.fail("dlgraph.shape.attr", "use_softmax false (Logits already probabilities) is not supported; use cross_entropy");
    return loss_infer(c, x, label, c.attr(soft_label).b);
}

struct softmax_with_cross_entropy_op {
    enum { Logits = 0, Label = 1 };
    enum { Softmax = 0, Loss = 1 };
    enum { soft_label = 0, ignore_index = 1 };
    static void infer(const InferContext& c) {
        Shape loss = swce_infer(c, Logits, Label);
        c.set(Softmax, c.dtype(Logits), c.shape(Logits));
        c.set(Loss, c.dtype(Logits), loss);
    }
};

inline OpDef softmax_with_cross_entropy_def() {
    OpDef d{"softmax_with_cross_entropy", {{"Logits"}, {"Label"}}, {{"Softmax"}, {"Loss"}}, swce_attrs(),
            &softmax_with_cross_entropy_op::infer};
    d.may_fail = true;  // a label out of range
    d.doc = "Softmax = softmax(Logits); Loss = cross entropy of Softmax and Label, computed stably; 0 where "
            "label == ignore_index";
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
    enum { soft_label = 0, ignore_index = 1 };
    static void infer(const InferContext& c) {
        const Shape loss = swce_infer(c, Softmax, Label);
        c.same_dtype({Softmax, DLoss});
        loss_grad_check(c, loss, DLoss, "Loss@GRAD");
        c.set(0, c.dtype(Softmax), c.shape(Softmax));
    }
};

inline OpDef softmax_with_cross_entropy_grad_def() {
    OpDef d{"softmax_with_cross_entropy_grad", {{"Label"}, {"Softmax"}, {"Loss@GRAD"}}, {{"Logits@GRAD"}}, swce_attrs(),
            &softmax_with_cross_entropy_grad_op::infer};
    d.kernel_slot = 1;  // Softmax: Label may be INT64
    d.may_fail = true;  // a label out of range
    d.doc = "Logits@GRAD = (Softmax - onehot(Label)) * Loss@GRAD (soft: Softmax * sum(Label) - Label)";
    return d;
}

}  // namespace dlgraph::ops

