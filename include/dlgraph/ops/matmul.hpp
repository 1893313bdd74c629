// Matrix products, their definitions: `mul` (Paddle's fc-style product of
// flattened operands) and `matmul` (batched, with transposes, alpha and NumPy
// broadcasting of batch dims), and their gradients. The GEMM and matmul's
// index math are in kernels/gemm.hpp and kernels/matmul.hpp (the kernel
// core), the CPU kernels and weight packing in cpu/matmul.hpp.
#pragma once

#include <algorithm>
#include <string>

#include "dlgraph/kernels/matmul.hpp"
#include "dlgraph/op.hpp"
#include "dlgraph/ops/op_util.hpp"

namespace dlgraph::ops {

// ---- gradients of the matrix products ------------------------------------------------

// The grad op of mul and matmul: X, Y, Out@GRAD -> X@GRAD, Y@GRAD (each
// only when wanted). Out itself is not read, so the forward result need not
// stay alive until the backward pass.
inline std::vector<OpDesc> xy_grad_ops(const GradRequest& r, const char* type) {
    const std::string dx = r.grad_name("X", 0), dy = r.grad_name("Y", 0);
    if (dx.empty() && dy.empty()) return {};
    OpDesc g;
    g.type = type;
    g.set_input("X", {r.fwd.input("X")->arguments.at(0)})
        .set_input("Y", {r.fwd.input("Y")->arguments.at(0)})
        .set_input("Out@GRAD", {r.out_grad("Out", 0)});
    if (!dx.empty()) g.set_output("X@GRAD", {dx});
    if (!dy.empty()) g.set_output("Y@GRAD", {dy});
    g.attrs = r.fwd.attrs;
    return {g};
}

// Checks that Out@GRAD (input `dout`) has the shape the forward op gave Out,
// and sets X@GRAD / Y@GRAD (when present) to X's / Y's meta.
inline void xy_grad_infer(const InferContext& c, int x, int y, int dout, const Shape& out) {
    c.dtype_in(x, {DataType::FP32, DataType::FP64});
    c.same_dtype({x, y, dout});
    const Shape& ds = c.shape(dout);
    bool ok = ds.rank() == out.rank();
    for (int i = 0; ok && i < ds.rank(); ++i) ok = dims_agree(ds[i], out[i]);
    if (!ok)
        c.fail("dlgraph.shape.grad", "Out@GRAD is " + to_string(ds) + " but the forward Out is " + to_string(out));
    if (c.out_count(0)) c.set(0, c.dtype(x), c.shape(x));
    if (c.out_count(1)) c.set(1, c.dtype(y), c.shape(y));
}

// ---- mul ----------------------------------------------------------------------------

struct mul_op {
    enum { X = 0, Y = 1 };
    enum { x_num_col_dims = 0, y_num_col_dims = 1 };

    static void infer(const InferContext& c) {
        c.dtype_in(X, {DataType::FP32, DataType::FP64});
        c.same_dtype({X, Y});
        const Shape& xs = c.shape(X);
        const Shape& ys = c.shape(Y);
        const std::int64_t xn = c.attr(x_num_col_dims).i, yn = c.attr(y_num_col_dims).i;
        if (xn < 1 || xn >= xs.rank())
            c.fail("dlgraph.shape.mul", "x_num_col_dims " + std::to_string(xn) + " must be in [1, " +
                                            std::to_string(xs.rank()) + ") for X of shape " + to_string(xs));
        if (yn < 1 || yn >= ys.rank())
            c.fail("dlgraph.shape.mul", "y_num_col_dims " + std::to_string(yn) + " must be in [1, " +
                                            std::to_string(ys.rank()) + ") for Y of shape " + to_string(ys));
        const int xi = static_cast<int>(xn), yi = static_cast<int>(yn);
        const std::int64_t xw = dim_product(xs, xi, xs.rank()), yh = dim_product(ys, 0, yi);
        if (xw >= 0 && yh >= 0 && xw != yh) {
            const Shape xf{dim_product(xs, 0, xi), xw}, yf{yh, dim_product(ys, yi, ys.rank())};
            c.fail("dlgraph.shape.mul", "X is " + to_string(xs) + " (as matrix " + to_string(xf) +
                                            " by x_num_col_dims " + std::to_string(xn) + ") but Y is " + to_string(ys) +
                                            " (as matrix " + to_string(yf) + " by y_num_col_dims " +
                                            std::to_string(yn) + "): X's width (" + std::to_string(xw) +
                                            ") must equal Y's height (" + std::to_string(yh) + ")");
        }
        Shape out;
        for (int i = 0; i < xi; ++i) out.push_back(xs[i]);
        for (int i = yi; i < ys.rank(); ++i) out.push_back(ys[i]);
        c.set(0, c.dtype(X), out);
    }
};

inline OpDef mul_def() {
    OpDef d{"mul", {{"X"}, {"Y"}}, {{"Out"}},
            {{"x_num_col_dims", Attribute::make_int("x_num_col_dims", 1)},
             {"y_num_col_dims", Attribute::make_int("y_num_col_dims", 1)}},
            &mul_op::infer};
    d.doc = "Out = X * Y, each flattened to a matrix at its num_col_dims";
    d.grad_maker = [](const GradRequest& r) { return xy_grad_ops(r, "mul_grad"); };
    return d;
}

struct mul_grad_op {
    enum { X = 0, Y = 1, DOut = 2 };
    enum { DX = 0, DY = 1 };
    enum { x_num_col_dims = 0, y_num_col_dims = 1 };

    static void infer(const InferContext& c) {
        const Shape& xs = c.shape(X);
        const Shape& ys = c.shape(Y);
        const std::int64_t xn = c.attr(x_num_col_dims).i, yn = c.attr(y_num_col_dims).i;
        if (xn < 1 || xn >= xs.rank() || yn < 1 || yn >= ys.rank())
            c.fail("dlgraph.shape.mul", "x_num_col_dims " + std::to_string(xn) + " / y_num_col_dims " +
                                            std::to_string(yn) + " do not fit X " + to_string(xs) + " and Y " +
                                            to_string(ys));
        Shape out;
        for (int i = 0; i < static_cast<int>(xn); ++i) out.push_back(xs[i]);
        for (int i = static_cast<int>(yn); i < ys.rank(); ++i) out.push_back(ys[i]);
        xy_grad_infer(c, X, Y, DOut, out);
    }
};

inline OpDef mul_grad_def() {
    OpDef d{"mul_grad", {{"X"}, {"Y"}, {"Out@GRAD"}}, {{"X@GRAD", false, true}, {"Y@GRAD", false, true}},
            {{"x_num_col_dims", Attribute::make_int("x_num_col_dims", 1)},
             {"y_num_col_dims", Attribute::make_int("y_num_col_dims", 1)}},
            &mul_grad_op::infer};
    d.doc = "X@GRAD = Out@GRAD * Y^T, Y@GRAD = X^T * Out@GRAD (flattened as mul flattens them)";
    return d;
}

// ---- matmul, matmul_v2 ----------------------------------------------------------------

// The transposes and scale the kernels apply: matmul's attributes
// (transpose_X, transpose_Y, alpha), or matmul_v2's (trans_x, trans_y, at
// the same positions; no alpha, and as Paddle's matmul_v2 a 1-D operand is
// never transposed: X is a row, Y a column, whatever the flag).
struct matmul_flags {
    bool tx = false, ty = false;
    double alpha = 1.0;
    template <bool V2> static matmul_flags of(const Attribute* a, int x_rank, int y_rank) {
        if constexpr (V2) return {a[0].b && x_rank > 1, a[1].b && y_rank > 1, 1.0};
        else return {a[0].b, a[1].b, a[2].f};
    }
};

struct matmul_op {
    enum { X = 0, Y = 1 };
    enum { transpose_X = 0, transpose_Y = 1, alpha = 2 };

    template <bool V2> static void infer(const InferContext& c) {
        c.dtype_in(X, {DataType::FP32, DataType::FP64});
        c.same_dtype({X, Y});
        const auto f = matmul_flags::of<V2>(&c.attr(0), c.shape(X).rank(), c.shape(Y).rank());
        c.set(0, c.dtype(X), out_shape(c, X, Y, f.tx, f.ty));
    }

    // Out's shape for inputs `x`, `y` of an inference context (shared with
    // matmul_grad, which checks Out@GRAD against it).
    static Shape out_shape(const InferContext& c, int x, int y, bool tx, bool ty) {
        const Shape& xs = c.shape(x);
        const Shape& ys = c.shape(y);
        auto both = [&] {
            return "X is " + to_string(xs) + (tx ? " (transpose_X)" : "") + " but Y is " + to_string(ys) +
                   (ty ? " (transpose_Y)" : "");
        };
        if (xs.rank() == 0 || ys.rank() == 0) c.fail("dlgraph.shape.matmul", both() + ": operands must have rank >= 1");
        const kernels::matmul_view v(xs.begin(), xs.rank(), ys.begin(), ys.rank(), tx, ty);
        auto k_of = [](const char* name, int dim, std::int64_t k) {
            if (dim < 0) return std::string(name) + " (a transposed vector, so K is 1)";
            return std::string(name) + "'s dim " + std::to_string(dim) + " (" + std::to_string(k) + ")";
        };
        if (!dims_agree(v.k, v.yk))
            c.fail("dlgraph.shape.matmul",
                   both() + ": " + k_of("X", v.xk_dim, v.k) + " must equal " + k_of("Y", v.yk_dim, v.yk));
        // Batch dims broadcast as in NumPy, aligned at the right.
        const int xb = std::max(xs.rank() - 2, 0), yb = std::max(ys.rank() - 2, 0);
        const int rb = std::max(xb, yb);
        Shape out;
        for (int i = 0; i < rb; ++i) {
            const int ix = i - (rb - xb), iy = i - (rb - yb);
            const std::int64_t a = ix >= 0 ? xs[ix] : 1, b = iy >= 0 ? ys[iy] : 1;
            std::int64_t d;
            // An unknown dim facing a known d != 1 must be 1 or d: either way Out has d.
            if (a == b || b == 1) d = a;
            else if (a == 1) d = b;
            else if (a < 0) d = b;
            else if (b < 0) d = a;
            else {
                c.fail("dlgraph.shape.matmul", both() + ": batch dims do not broadcast: X's dim " + std::to_string(ix) +
                                                   " (" + std::to_string(a) + ") vs Y's dim " + std::to_string(iy) +
                                                   " (" + std::to_string(b) + ")");
            }
            out.push_back(d);
        }
        if (kernels::matmul_out_keeps_m(xs.rank(), v.m)) out.push_back(v.m);
        if (kernels::matmul_out_keeps_n(ys.rank(), v.n)) out.push_back(v.n);
        if (out.empty()) out.push_back(1);
        return out;
    }
};

inline OpDef matmul_def() {
    OpDef d{"matmul", {{"X"}, {"Y"}}, {{"Out"}},
            {{"transpose_X", Attribute::make_bool("transpose_X", false)},
             {"transpose_Y", Attribute::make_bool("transpose_Y", false)},
             {"alpha", Attribute::make_float("alpha", 1.0)}},
            &matmul_op::infer<false>};
    d.doc = "Out = alpha * op(X) * op(Y), batched with broadcasting";
    d.grad_maker = [](const GradRequest& r) { return xy_grad_ops(r, "matmul_grad"); };
    return d;
}

inline std::vector<AttrDef> matmul_v2_attrs() {
    return {{"trans_x", Attribute::make_bool("trans_x", false)}, {"trans_y", Attribute::make_bool("trans_y", false)}};
}
inline OpDef matmul_v2_def() {
    OpDef d{"matmul_v2", {{"X"}, {"Y"}}, {{"Out"}}, matmul_v2_attrs(), &matmul_op::infer<true>};
    d.doc = "Out = op(X) * op(Y), batched with broadcasting (paddle.matmul; a 1-D operand is not transposed)";
    d.grad_maker = [](const GradRequest& r) { return xy_grad_ops(r, "matmul_v2_grad"); };
    return d;
}

// The gradients of matmul (their math: cpu/matmul.hpp).
struct matmul_grad_op {
    enum { X = 0, Y = 1, DOut = 2 };
    enum { DX = 0, DY = 1 };
    enum { transpose_X = 0, transpose_Y = 1, alpha = 2 };

    template <bool V2> static void infer(const InferContext& c) {
        const auto f = matmul_flags::of<V2>(&c.attr(0), c.shape(X).rank(), c.shape(Y).rank());
        xy_grad_infer(c, X, Y, DOut, matmul_op::out_shape(c, X, Y, f.tx, f.ty));
    }
};

inline OpDef matmul_grad_def() {
    OpDef d{"matmul_grad", {{"X"}, {"Y"}, {"Out@GRAD"}}, {{"X@GRAD", false, true}, {"Y@GRAD", false, true}},
            {{"transpose_X", Attribute::make_bool("transpose_X", false)},
             {"transpose_Y", Attribute::make_bool("transpose_Y", false)},
             {"alpha", Attribute::make_float("alpha", 1.0)}},
            &matmul_grad_op::infer<false>};
    d.doc = "X@GRAD, Y@GRAD of matmul (broadcast batch dims summed)";
    return d;
}
inline OpDef matmul_v2_grad_def() {
    OpDef d{"matmul_v2_grad", {{"X"}, {"Y"}, {"Out@GRAD"}}, {{"X@GRAD", false, true}, {"Y@GRAD", false, true}},
            matmul_v2_attrs(), &matmul_grad_op::infer<true>};
    d.doc = "X@GRAD, Y@GRAD of matmul_v2 (broadcast batch dims summed)";
    return d;
}

}  // namespace dlgraph::ops

