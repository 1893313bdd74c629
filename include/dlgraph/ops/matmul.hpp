// Matrix products: the ops built on the shared GEMM (dlgraph/gemm.hpp), `mul`
// (Paddle's fc-style product of flattened operands) and `matmul` (batched,
// with transposes, alpha and NumPy broadcasting of batch dims).
#pragma once

#include <algorithm>

#include "dlgraph/gemm.hpp"
#include "dlgraph/ops/op_util.hpp"

namespace dlgraph::ops {

// The shared matrix product (packed, cache-blocked, threaded): dlgraph/gemm.hpp.
using dlgraph::gemm;

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

// Packs op(Y) (K x N, row stride ldb) for gemm_prepacked into `out` (when
// set); returns its bytes, or 0 when `pays` is false or Y is not FP32/FP64.
inline std::size_t prepack_y(const Tensor& y, bool trans, std::int64_t K, std::int64_t N, std::int64_t ldb, bool pays,
                             void* out) {
    if (!pays) return 0;
    auto pack = [&]<class T>(type_tag<T>) -> std::size_t {
        if (out) gemm_pack_b<T>(trans, K, N, y.data<T>(), ldb, static_cast<T*>(out));
        return static_cast<std::size_t>(gemm_packed_b_size<T>(K, N)) * sizeof(T);
    };
    if (y.dtype() == DataType::FP32) return pack(type_tag<float>{});
    if (y.dtype() == DataType::FP64) return pack(type_tag<double>{});
    return 0;
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

    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Tensor& y = c.in(Y);
        const int xi = static_cast<int>(c.attr(x_num_col_dims).i), yi = static_cast<int>(c.attr(y_num_col_dims).i);
        const std::int64_t M = dim_product(x.shape(), 0, xi), K = dim_product(x.shape(), xi, x.rank());
        const std::int64_t N = dim_product(y.shape(), yi, y.rank());
        if (c.packed)
            gemm_prepacked<T>(false, M, N, K, T(1), x.data<T>(), K, static_cast<const T*>(c.packed), false,
                              c.out(0).data<T>(), N);
        else gemm<T>(false, false, M, N, K, T(1), x.data<T>(), K, y.data<T>(), N, false, c.out(0).data<T>(), N);
    }

    // Y packed for gemm_prepacked (OpDef::prepack).
    static std::size_t prepack(const KernelContext& c, void* out) {
        const Tensor& x = c.in(X);
        const Tensor& y = c.in(Y);
        const int xi = static_cast<int>(c.attr(x_num_col_dims).i), yi = static_cast<int>(c.attr(y_num_col_dims).i);
        const std::int64_t M = dim_product(x.shape(), 0, xi), K = dim_product(x.shape(), xi, x.rank());
        const std::int64_t N = dim_product(y.shape(), yi, y.rank());
        return prepack_y(y, false, K, N, N, gemm_prepack_pays(M), out);
    }
};

inline OpDef mul_def() {
    OpDef d{"mul", {{"X"}, {"Y"}}, {{"Out"}},
            {{"x_num_col_dims", Attribute::make_int("x_num_col_dims", 1)},
             {"y_num_col_dims", Attribute::make_int("y_num_col_dims", 1)}},
            &mul_op::infer};
    d.kernels = cpu_kernels<mul_op, float, double>();
    d.doc = "Out = X * Y, each flattened to a matrix at its num_col_dims";
    d.prepack_input = mul_op::Y;
    d.prepack = &mul_op::prepack;
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

    // With X as an M x K matrix, Y as K x N and Out as M x N:
    // X@GRAD = Out@GRAD * Y^T and Y@GRAD = X^T * Out@GRAD.
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Tensor& y = c.in(Y);
        const T* dout = c.in(DOut).data<T>();
        const int xi = static_cast<int>(c.attr(x_num_col_dims).i), yi = static_cast<int>(c.attr(y_num_col_dims).i);
        const std::int64_t M = dim_product(x.shape(), 0, xi), K = dim_product(x.shape(), xi, x.rank());
        const std::int64_t N = dim_product(y.shape(), yi, y.rank());
        if (c.out_count(DX)) gemm<T>(false, true, M, K, N, T(1), dout, N, y.data<T>(), N, false, c.out(DX).data<T>(), K);
        if (c.out_count(DY)) gemm<T>(true, false, K, N, M, T(1), x.data<T>(), K, dout, N, false, c.out(DY).data<T>(), N);
    }
};

inline OpDef mul_grad_def() {
    OpDef d{"mul_grad", {{"X"}, {"Y"}, {"Out@GRAD"}}, {{"X@GRAD", false, true}, {"Y@GRAD", false, true}},
            {{"x_num_col_dims", Attribute::make_int("x_num_col_dims", 1)},
             {"y_num_col_dims", Attribute::make_int("y_num_col_dims", 1)}},
            &mul_grad_op::infer};
    d.kernels = cpu_kernels<mul_grad_op, float, double>();
    d.doc = "X@GRAD = Out@GRAD * Y^T, Y@GRAD = X^T * Out@GRAD (flattened as mul flattens them)";
    return d;
}

// ---- matmul --------------------------------------------------------------------------

// The matrix view of matmul's operands. A rank-1 X is a row [1, K] and a
// rank-1 Y a column [K, 1] whose unit dim is dropped from Out; transposing
// such a vector is ignored (there is only one sensible product), which
// avoids Paddle's mismatch between Out's dims and its element count there.
struct matmul_view {
    std::int64_t m = 0, k = 0, n = 0, yk = 0;
    bool ta = false, tb = false;
    int xk_dim = 0, yk_dim = 0;  // which dim of X / Y holds K, for messages

    matmul_view(const Shape& xs, const Shape& ys, bool tx, bool ty) {
        const int xr = xs.rank(), yr = ys.rank();
        if (xr == 1) {
            m = 1;
            k = xs[0];
        } else {
            ta = tx;
            m = tx ? xs[xr - 1] : xs[xr - 2];
            k = tx ? xs[xr - 2] : xs[xr - 1];
            xk_dim = tx ? xr - 2 : xr - 1;
        }
        if (yr == 1) {
            yk = ys[0];
            n = 1;
        } else {
            tb = ty;
            yk = ty ? ys[yr - 1] : ys[yr - 2];
            n = ty ? ys[yr - 2] : ys[yr - 1];
            yk_dim = ty ? yr - 1 : yr - 2;
        }
    }
};

// Batch dims of both operands padded to Out's batch rank (rb): Out's dims,
// and each operand's element stride per dim (0 where it is broadcast).
struct matmul_batches {
    int rb = 0;
    std::int64_t nb = 1;  // number of batches (matrices of Out)
    std::int64_t dims[max_rank] = {}, xst[max_rank] = {}, yst[max_rank] = {};

    matmul_batches(const Shape& xs, const Shape& ys, std::int64_t x_mat, std::int64_t y_mat) {
        const int xb = std::max(xs.rank() - 2, 0), yb = std::max(ys.rank() - 2, 0);
        rb = std::max(xb, yb);
        std::int64_t sx = x_mat, sy = y_mat;
        for (int i = rb - 1; i >= 0; --i) {
            const int ix = i - (rb - xb), iy = i - (rb - yb);
            const std::int64_t a = ix >= 0 ? xs[ix] : 1, b = iy >= 0 ? ys[iy] : 1;
            dims[i] = std::max(a, b);
            if (a == 0 || b == 0) dims[i] = 0;
            xst[i] = a == 1 ? 0 : sx;
            yst[i] = b == 1 ? 0 : sy;
            sx *= a;
            sy *= b;
            nb *= dims[i];
        }
    }
};

struct matmul_op {
    enum { X = 0, Y = 1 };
    enum { transpose_X = 0, transpose_Y = 1, alpha = 2 };

    static void infer(const InferContext& c) {
        c.dtype_in(X, {DataType::FP32, DataType::FP64});
        c.same_dtype({X, Y});
        c.set(0, c.dtype(X), out_shape(c, X, Y, c.attr(transpose_X).b, c.attr(transpose_Y).b));
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
        const matmul_view v(xs, ys, tx, ty);
        if (!dims_agree(v.k, v.yk))
            c.fail("dlgraph.shape.matmul", both() + ": X's dim " + std::to_string(v.xk_dim) + " (" +
                                               std::to_string(v.k) + ") must equal Y's dim " +
                                               std::to_string(v.yk_dim) + " (" + std::to_string(v.yk) + ")");
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
        if (xs.rank() > 1) out.push_back(v.m);
        if (ys.rank() > 1) out.push_back(v.n);
        if (out.empty()) out.push_back(1);
        return out;
    }

    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Tensor& y = c.in(Y);
        Tensor& out = c.out(0);
        const Shape& xs = x.shape();
        const Shape& ys = y.shape();
        const matmul_view v(xs, ys, c.attr(transpose_X).b, c.attr(transpose_Y).b);
        const T al = static_cast<T>(c.attr(alpha).f);
        const std::int64_t lda = xs.rank() == 1 ? v.k : xs[xs.rank() - 1];
        const std::int64_t ldb = ys.rank() == 1 ? 1 : ys[ys.rank() - 1];
        const std::int64_t x_mat = v.m * v.k, y_mat = v.k * v.n, o_mat = v.m * v.n;

        const matmul_batches bt(xs, ys, x_mat, y_mat);
        const int rb = bt.rb;
        const std::int64_t nb = bt.nb;
        const std::int64_t* dims = bt.dims;
        const std::int64_t* xst = bt.xst;
        const std::int64_t* yst = bt.yst;
        const T* xp = x.data<T>();
        const T* yp = y.data<T>();
        T* op = out.data<T>();
        if (nb == 0 || o_mat == 0) return;

        // Y shared by every batch and X's rows contiguous: one tall GEMM
        // instead of many short ones.
        bool y_shared = true, x_full = true;
        for (int i = 0; i < rb; ++i) {
            y_shared = y_shared && yst[i] == 0;
            x_full = x_full && (xst[i] != 0 || dims[i] == 1);
        }
        if (!v.ta && y_shared && x_full) {
            if (c.packed)
                gemm_prepacked<T>(false, nb * v.m, v.n, v.k, al, xp, lda, static_cast<const T*>(c.packed), false, op,
                                  v.n);
            else gemm<T>(false, v.tb, nb * v.m, v.n, v.k, al, xp, lda, yp, ldb, false, op, v.n);
            return;
        }
        std::int64_t idx[max_rank] = {};
        for (std::int64_t b = 0; b < nb; ++b) {
            std::int64_t ox = 0, oy = 0;
            for (int i = 0; i < rb; ++i) {
                ox += idx[i] * xst[i];
                oy += idx[i] * yst[i];
            }
            gemm<T>(v.ta, v.tb, v.m, v.n, v.k, al, xp + ox, lda, yp + oy, ldb, false, op + b * o_mat, v.n);
            next_index(idx, dims, rb);
        }
    }
};

// Y packed for gemm_prepacked (OpDef::prepack) when the product is one tall
// GEMM over a 2-D Y (compute's first case).
inline std::size_t matmul_prepack(const KernelContext& c, void* out) {
    const Tensor& x = c.in(matmul_op::X);
    const Tensor& y = c.in(matmul_op::Y);
    const Shape& xs = x.shape();
    const Shape& ys = y.shape();
    const bool ta = c.attr(matmul_op::transpose_X).b, tb = c.attr(matmul_op::transpose_Y).b;
    if (ys.rank() != 2 || ta || xs.rank() < 2) return 0;
    const std::int64_t M = xs.numel() / xs[xs.rank() - 1];  // every batch's rows: X is contiguous
    const std::int64_t K = tb ? ys[1] : ys[0], N = tb ? ys[0] : ys[1];
    return prepack_y(y, tb, K, N, ys[1], gemm_prepack_pays(M), out);
}

inline OpDef matmul_def() {
    OpDef d{"matmul", {{"X"}, {"Y"}}, {{"Out"}},
            {{"transpose_X", Attribute::make_bool("transpose_X", false)},
             {"transpose_Y", Attribute::make_bool("transpose_Y", false)},
             {"alpha", Attribute::make_float("alpha", 1.0)}},
            &matmul_op::infer};
    d.kernels = cpu_kernels<matmul_op, float, double>();
    d.doc = "Out = alpha * op(X) * op(Y), batched with broadcasting";
    d.prepack_input = matmul_op::Y;
    d.prepack = &matmul_prepack;
    d.grad_maker = [](const GradRequest& r) { return xy_grad_ops(r, "matmul_grad"); };
    return d;
}

// With dO = Out@GRAD of one batch (M x N), op(X) M x K and op(Y) K x N:
//   d op(X) = alpha * dO * op(Y)^T,  d op(Y) = alpha * op(X)^T * dO,
// and a transposed operand's gradient is the transpose of that, which gemm
// produces directly by swapping the factors:
//   X@GRAD = alpha * dO * op(Y)^T      (K x M stored: alpha * op(Y) * dO^T)
//   Y@GRAD = alpha * op(X)^T * dO      (N x K stored: alpha * dO^T * op(X))
// A rank-1 operand is a row (X) or column (Y) whose gradient has the same
// elements. An operand broadcast over batch dims receives the sum over those
// batches: the first batch that reaches its block writes, the rest add
// (gemm's accumulate), so no scratch memory is needed.
struct matmul_grad_op {
    enum { X = 0, Y = 1, DOut = 2 };
    enum { DX = 0, DY = 1 };
    enum { transpose_X = 0, transpose_Y = 1, alpha = 2 };

    static void infer(const InferContext& c) {
        const bool tx = c.attr(transpose_X).b, ty = c.attr(transpose_Y).b;
        xy_grad_infer(c, X, Y, DOut, matmul_op::out_shape(c, X, Y, tx, ty));
    }

    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Tensor& y = c.in(Y);
        const Shape& xs = x.shape();
        const Shape& ys = y.shape();
        T* dx = c.out_count(DX) ? c.out(DX).data<T>() : nullptr;
        T* dy = c.out_count(DY) ? c.out(DY).data<T>() : nullptr;
        const matmul_view v(xs, ys, c.attr(transpose_X).b, c.attr(transpose_Y).b);
        const T al = static_cast<T>(c.attr(alpha).f);
        const std::int64_t M = v.m, N = v.n, K = v.k;
        const std::int64_t ldx = xs.rank() == 1 ? K : xs[xs.rank() - 1];
        const std::int64_t ldy = ys.rank() == 1 ? 1 : ys[ys.rank() - 1];
        const std::int64_t o_mat = M * N;
        const matmul_batches bt(xs, ys, M * K, K * N);
        const T* xp = x.data<T>();
        const T* yp = y.data<T>();
        const T* dop = c.in(DOut).data<T>();
        if (bt.nb == 0) {  // no batch reaches the operands: their gradients are zero
            if (dx) std::fill(dx, dx + x.numel(), T(0));
            if (dy) std::fill(dy, dy + y.numel(), T(0));
            return;
        }

        // Y shared by every batch and X's batches all distinct and contiguous
        // (X is a tall (nb*M) x K matrix): one GEMM per gradient.
        bool y_shared = true, x_full = true;
        for (int i = 0; i < bt.rb; ++i) {
            y_shared = y_shared && bt.yst[i] == 0;
            x_full = x_full && (bt.xst[i] != 0 || bt.dims[i] == 1);
        }
        if (!v.ta && y_shared && x_full) {
            const std::int64_t MB = bt.nb * M;
            if (dx) gemm<T>(false, !v.tb, MB, K, N, al, dop, N, yp, ldy, false, dx, K);
            if (dy && !v.tb) gemm<T>(true, false, K, N, MB, al, xp, ldx, dop, N, false, dy, N);
            if (dy && v.tb) gemm<T>(true, false, N, K, MB, al, dop, N, xp, ldx, false, dy, K);
            return;
        }

        std::int64_t idx[max_rank] = {};
        for (std::int64_t b = 0; b < bt.nb; ++b) {
            std::int64_t ox = 0, oy = 0;
            bool acc_x = false, acc_y = false;  // this operand's block was written by an earlier batch
            for (int i = 0; i < bt.rb; ++i) {
                ox += idx[i] * bt.xst[i];
                oy += idx[i] * bt.yst[i];
                acc_x = acc_x || (idx[i] != 0 && bt.xst[i] == 0);
                acc_y = acc_y || (idx[i] != 0 && bt.yst[i] == 0);
            }
            const T* d = dop + b * o_mat;
            if (dx && !v.ta) gemm<T>(false, !v.tb, M, K, N, al, d, N, yp + oy, ldy, acc_x, dx + ox, K);
            if (dx && v.ta) gemm<T>(v.tb, true, K, M, N, al, yp + oy, ldy, d, N, acc_x, dx + ox, M);
            if (dy && !v.tb) gemm<T>(!v.ta, false, K, N, M, al, xp + ox, ldx, d, N, acc_y, dy + oy, N);
            if (dy && v.tb) gemm<T>(true, v.ta, N, K, M, al, d, N, xp + ox, ldx, acc_y, dy + oy, K);
            next_index(idx, bt.dims, bt.rb);
        }
    }
};

inline OpDef matmul_grad_def() {
    OpDef d{"matmul_grad", {{"X"}, {"Y"}, {"Out@GRAD"}}, {{"X@GRAD", false, true}, {"Y@GRAD", false, true}},
            {{"transpose_X", Attribute::make_bool("transpose_X", false)},
             {"transpose_Y", Attribute::make_bool("transpose_Y", false)},
             {"alpha", Attribute::make_float("alpha", 1.0)}},
            &matmul_grad_op::infer};
    d.kernels = cpu_kernels<matmul_grad_op, float, double>();
    d.doc = "X@GRAD, Y@GRAD of matmul (broadcast batch dims summed)";
    return d;
}

}  // namespace dlgraph::ops

