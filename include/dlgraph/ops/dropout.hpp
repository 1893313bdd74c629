// Dropout and the counter that seeds it, their definitions with
// PaddlePaddle's slots and attributes: dropout (downgrade_in_infer or
// upscale_in_train, is_test, a seed from the Seed input, the `seed`
// attribute with fix_seed, or a fresh one per run), dropout_grad, and
// increment (Out = X + step, a one-element counter). Paddle's Mask is
// UINT8; dlgraph has no UINT8 and writes a BOOL mask. The mask's draws are
// in kernels/dropout.hpp, the CPU kernels in cpu/dropout.hpp.
#pragma once

#include <string>
#include <vector>

#include "dlgraph/op.hpp"
#include "dlgraph/ops/op_util.hpp"

namespace dlgraph::ops {

struct dropout_op {
    enum { X = 0, Seed = 1 };
    enum { Out = 0, Mask = 1 };
    enum { dropout_prob = 0, is_test = 1, fix_seed = 2, seed = 3, dropout_implementation = 4 };

    static bool upscale(const Attribute* a) { return a[dropout_implementation].s == "upscale_in_train"; }

    static void check_attrs(const InferContext& c) {
        const double p = c.attr(dropout_prob).f;
        if (!(p >= 0 && p <= 1)) c.fail("dlgraph.shape.dropout", "dropout_prob must be in [0, 1], not " + std::to_string(p));
        const std::string& impl = c.attr(dropout_implementation).s;
        if (impl != "downgrade_in_infer" && impl != "upscale_in_train")
            c.fail("dlgraph.shape.dropout", "dropout_implementation must be downgrade_in_infer or upscale_in_train, not '" +
                                                impl + "'");
    }

    static void infer(const InferContext& c) {
        c.dtype_in(X, {DataType::FP32, DataType::FP64});
        check_attrs(c);
        if (c.in_count(Seed)) {
            c.dtype_in(Seed, {DataType::INT32, DataType::INT64});
            if (c.shape(Seed).numel() != 1)
                c.fail("dlgraph.shape.dropout", "Seed is " + to_string(c.shape(Seed)) + ": it must hold one value");
        }
        c.set(Out, c.dtype(X), c.shape(X));
        if (c.out_count(Mask)) c.set(Mask, DataType::BOOL, c.shape(X));
    }
};

inline std::vector<AttrDef> dropout_attrs() {
    return {{"dropout_prob", Attribute::make_float("dropout_prob", 0.5)},
            {"is_test", Attribute::make_bool("is_test", false)},
            {"fix_seed", Attribute::make_bool("fix_seed", false)},
            {"seed", Attribute::make_int("seed", 0)},
            {"dropout_implementation", Attribute::make_string("dropout_implementation", "downgrade_in_infer")}};
}

inline OpDef dropout_def() {
    OpDef d{"dropout", {{"X"}, {"Seed", false, true}}, {{"Out"}, {"Mask", false, true}}, dropout_attrs(),
            &dropout_op::infer};
    d.doc = "Out = X with each element zeroed with probability dropout_prob (Mask: the kept ones)";
    d.no_grad_inputs = {"Seed"};
    d.grad_maker = [](const GradRequest& r) -> std::vector<OpDesc> {
        const std::string dx = r.grad_name("X", 0);
        if (dx.empty()) return {};
        const auto* mask = r.fwd.output("Mask");
        if (!mask || mask->arguments.empty())
            throw graph_error("dlgraph.graph.grad", "dropout's gradient reads its Mask output, which this op does not have");
        OpDesc g;
        g.type = "dropout_grad";
        g.set_input("Mask", mask->arguments).set_input("Out@GRAD", {r.out_grad("Out", 0)}).set_output("X@GRAD", {dx});
        g.attrs = r.fwd.attrs;
        return {g};
    };
    return d;
}

// Mask, Out@GRAD -> X@GRAD (training only, as in Paddle).
struct dropout_grad_op {
    enum { Mask = 0, DOut = 1 };
    static void infer(const InferContext& c) {
        dropout_op::check_attrs(c);
        if (c.attr(dropout_op::is_test).b)
            c.fail("dlgraph.shape.dropout", "dropout_grad is for training: is_test must be false");
        c.dtype_in(DOut, {DataType::FP32, DataType::FP64});
        c.dtype_in(Mask, {DataType::BOOL});
        const Shape& ms = c.shape(Mask);
        const Shape& ds = c.shape(DOut);
        bool ok = ms.rank() == ds.rank();
        for (int i = 0; ok && i < ms.rank(); ++i) ok = dims_agree(ms[i], ds[i]);
        if (!ok) c.fail("dlgraph.shape.grad", "Mask is " + to_string(ms) + " but Out@GRAD is " + to_string(ds));
        c.set(0, c.dtype(DOut), ds);
    }
};

inline OpDef dropout_grad_def() {
    OpDef d{"dropout_grad", {{"Mask"}, {"Out@GRAD"}}, {{"X@GRAD"}}, dropout_attrs(), &dropout_grad_op::infer};
    d.doc = "X@GRAD = Out@GRAD * Mask (/ (1 - dropout_prob) for upscale_in_train)";
    d.kernel_slot = dropout_grad_op::DOut;
    return d;
}

// X (one element) -> Out = X + step.
struct increment_op {
    enum { X = 0 };
    enum { step = 0 };
    static void infer(const InferContext& c) {
        c.dtype_in(X, {DataType::INT32, DataType::INT64, DataType::FP32, DataType::FP64});
        if (c.shape(X).numel() != 1 && c.shape(X).known())
            c.fail("dlgraph.shape.increment", "X is " + to_string(c.shape(X)) + ": it must hold one value");
        c.set(0, c.dtype(X), c.shape(X));
    }
};

inline OpDef increment_def() {
    OpDef d{"increment", {{"X"}}, {{"Out"}}, {{"step", Attribute::make_float("step", 1.0)}}, &increment_op::infer};
    d.doc = "Out = X + step (one element: a counter)";
    d.in_place = true;  // Out = X + step, element by element
    return d;
}

}  // namespace dlgraph::ops
