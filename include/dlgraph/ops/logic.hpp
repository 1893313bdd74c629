// Comparisons, logical ops and where, their definitions with PaddlePaddle's
// slots and attributes: less_than, less_equal, greater_than, greater_equal,
// equal, not_equal (X, Y broadcast as the binary element-wise ops, axis and
// force_cpu; Out BOOL), logical_and / or / xor (X, Y broadcast) and
// logical_not (X), which read any dtype as a truth, and where (Condition, X,
// Y of one shape) with its gradient. Comparisons and logical ops have no
// gradient. The math is in kernels/logic.hpp, the CPU kernels in
// cpu/logic.hpp.
#pragma once

#include <string>
#include <vector>

#include "dlgraph/op.hpp"
#include "dlgraph/ops/elementwise.hpp"  // broadcast_infer
#include "dlgraph/ops/op_util.hpp"

namespace dlgraph::ops {

// The dtypes comparisons and logical ops take.
inline void logic_dtype_in(const InferContext& c, int slot) {
    c.dtype_in(slot, {DataType::BOOL, DataType::INT32, DataType::INT64, DataType::FP32, DataType::FP64});
}

// X op Y, broadcast; Out BOOL. Comparisons carry Paddle's axis and
// force_cpu (accepted, no effect: every op's output lives where its kernel
// runs); logical ops have neither, and take Paddle's broadcast (axis -1).
struct compare_op {
    enum { X = 0, Y = 1 };
    enum { axis = 0 };
    static void infer(const InferContext& c) {
        logic_dtype_in(c, X);
        c.same_dtype({X, Y});
        const std::int64_t a = c.def().attrs.empty() ? -1 : c.attr(axis).i;
        c.set(0, DataType::BOOL, broadcast_infer(c, c.shape(X), c.shape(Y), a));
    }
    static OpDef make(std::string_view type, std::string_view doc, bool with_attrs) {
        std::vector<AttrDef> attrs;
        if (with_attrs)
            attrs = {{"axis", Attribute::make_int("axis", -1)}, {"force_cpu", Attribute::make_bool("force_cpu", false)}};
        OpDef d{type, {{"X"}, {"Y"}}, {{"Out"}}, std::move(attrs), &infer};
        d.doc = doc;
        return d;
    }
};

inline OpDef less_than_def() { return compare_op::make("less_than", "Out = X < Y (BOOL)", true); }
inline OpDef less_equal_def() { return compare_op::make("less_equal", "Out = X <= Y (BOOL)", true); }
inline OpDef greater_than_def() { return compare_op::make("greater_than", "Out = X > Y (BOOL)", true); }
inline OpDef greater_equal_def() { return compare_op::make("greater_equal", "Out = X >= Y (BOOL)", true); }
inline OpDef equal_def() { return compare_op::make("equal", "Out = X == Y (BOOL)", true); }
inline OpDef not_equal_def() { return compare_op::make("not_equal", "Out = X != Y (BOOL)", true); }
inline OpDef logical_and_def() { return compare_op::make("logical_and", "Out = X && Y, nonzero as true (BOOL)", false); }
inline OpDef logical_or_def() { return compare_op::make("logical_or", "Out = X || Y, nonzero as true (BOOL)", false); }
inline OpDef logical_xor_def() { return compare_op::make("logical_xor", "Out = X != Y as truths (BOOL)", false); }

inline OpDef logical_not_def() {
    OpDef d{"logical_not", {{"X"}}, {{"Out"}}, {}, [](const InferContext& c) {
                logic_dtype_in(c, 0);
                c.set(0, DataType::BOOL, c.shape(0));
            }};
    d.doc = "Out = !X, nonzero as true (BOOL)";
    return d;
}

// Condition (BOOL), X, Y of one shape -> Out = Condition ? X : Y; the grad
// op reads Condition and Out@GRAD (and X, Y for their shapes, as Paddle's).
struct where_op {
    enum { Condition = 0, X = 1, Y = 2, DOut = 3 };
    enum { DX = 0, DY = 1 };
    static void check(const InferContext& c) {
        c.dtype_in(Condition, {DataType::BOOL});
        c.dtype_in(X, {DataType::FP32, DataType::FP64, DataType::INT32, DataType::INT64});
        c.same_dtype({X, Y});
        const Shape &cs = c.shape(Condition), &xs = c.shape(X), &ys = c.shape(Y);
        auto same = [](const Shape& a, const Shape& b) {
            bool ok = a.rank() == b.rank();
            for (int i = 0; ok && i < a.rank(); ++i) ok = dims_agree(a[i], b[i]);
            return ok;
        };
        if (!same(xs, ys) || !same(cs, xs))
            c.fail("dlgraph.shape.where", "Condition is " + to_string(cs) + ", X " + to_string(xs) + " and Y " +
                                              to_string(ys) + ": where takes three tensors of one shape (broadcast "
                                                              "them first, e.g. with expand or an elementwise op)");
    }
    static Shape merged(const InferContext& c) {
        Shape s = c.shape(X);
        for (int i = 0; i < s.rank(); ++i) s[i] = merge_dim(merge_dim(s[i], c.shape(Y)[i]), c.shape(Condition)[i]);
        return s;
    }
    static void infer(const InferContext& c) {
        check(c);
        c.set(0, c.dtype(X), merged(c));
    }
    static void infer_grad(const InferContext& c) {
        check(c);
        check_grad_shape(c, merged(c), DOut, "Out@GRAD");
        c.same_dtype({X, DOut});
        if (c.out_count(DX)) c.set(DX, c.dtype(X), c.shape(X));
        if (c.out_count(DY)) c.set(DY, c.dtype(Y), c.shape(Y));
    }
};

inline OpDef where_def() {
    OpDef d{"where", {{"Condition"}, {"X"}, {"Y"}}, {{"Out"}}, {}, &where_op::infer};
    d.kernel_slot = where_op::X;
    d.doc = "Out = Condition ? X : Y";
    d.no_grad_inputs = {"Condition"};
    d.grad_spec = {"where_grad", {"Condition", "X", "Y"}, {}, {"X", "Y"}, {"Out"}};
    return d;
}

inline OpDef where_grad_def() {
    OpDef d{"where_grad",
            {{"Condition"}, {"X"}, {"Y"}, {"Out@GRAD"}},
            {{"X@GRAD", false, true}, {"Y@GRAD", false, true}},
            {},
            &where_op::infer_grad};
    d.kernel_slot = where_op::X;
    d.doc = "X@GRAD = Condition ? Out@GRAD : 0, Y@GRAD = Condition ? 0 : Out@GRAD";
    return d;
}

}  // namespace dlgraph::ops
