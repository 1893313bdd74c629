// The CPU kernels of the matrix products (ops/matmul.hpp): each product on
// the threaded GEMM (cpu/gemm.hpp), matmul's batches walked with the core's
// index math (kernels/matmul.hpp), and the packing of mul's and matmul's
// weight Y for the GEMM (OpDef::prepack).
#pragma once

#include <algorithm>
#include <cstdint>

#include "dlgraph/cpu/gemm.hpp"
#include "dlgraph/gemm.hpp"  // the public names (dlgraph::gemm, ...), which ops/matmul.hpp used to bring
#include "dlgraph/kernels/gemm.hpp"
#include "dlgraph/kernels/matmul.hpp"
#include "dlgraph/op.hpp"
#include "dlgraph/ops/matmul.hpp"

namespace dlgraph::cpu_ops {

// Packs op(Y) (K x N, row stride ldb) for gemm_prepacked into `out` (when
// set); returns its bytes, or 0 when `pays` is false or Y is not FP32/FP64.
inline std::size_t prepack_y(const Tensor& y, bool trans, std::int64_t K, std::int64_t N, std::int64_t ldb, bool pays,
                             void* out) {
    if (!pays) return 0;
    auto pack = [&]<class T>(type_tag<T>) -> std::size_t {
        if (out) kernels::gemm_pack_b<T>(trans, K, N, y.data<T>(), ldb, static_cast<T*>(out));
        return static_cast<std::size_t>(kernels::gemm_packed_b_size<T>(K, N)) * sizeof(T);
    };
    if (y.dtype() == DataType::FP32) return pack(type_tag<float>{});
    if (y.dtype() == DataType::FP64) return pack(type_tag<double>{});
    return 0;
}

// ---- mul ----------------------------------------------------------------------------

struct mul_op : ops::mul_op {
    // X and Y flattened at their num_col_dims: M x K and K x N.
    struct dims {
        std::int64_t M, K, N;
        explicit dims(const KernelContext& c) {
            const Tensor& x = c.in(X);
            const Tensor& y = c.in(Y);
            const int xi = static_cast<int>(c.attr(x_num_col_dims).i), yi = static_cast<int>(c.attr(y_num_col_dims).i);
            M = ops::dim_product(x.shape(), 0, xi);
            K = ops::dim_product(x.shape(), xi, x.rank());
            N = ops::dim_product(y.shape(), yi, y.rank());
        }
    };

    template <class T> static void compute(cpu, const KernelContext& c) {
        const dims d(c);
        if (c.packed)
            gemm_prepacked<T>(false, d.M, d.N, d.K, T(1), c.in(X).data<T>(), d.K, static_cast<const T*>(c.packed), false,
                              c.out(0).data<T>(), d.N);
        else
            gemm<T>(false, false, d.M, d.N, d.K, T(1), c.in(X).data<T>(), d.K, c.in(Y).data<T>(), d.N, false,
                    c.out(0).data<T>(), d.N);
    }

    // Y packed for gemm_prepacked (OpDef::prepack).
    static std::size_t prepack(const KernelContext& c, void* out) {
        const dims d(c);
        return prepack_y(c.in(Y), false, d.K, d.N, d.N, gemm_prepack_pays(d.M), out);
    }
};

struct mul_grad_op : ops::mul_grad_op {
    // With X as an M x K matrix, Y as K x N and Out as M x N:
    // X@GRAD = Out@GRAD * Y^T and Y@GRAD = X^T * Out@GRAD.
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Tensor& y = c.in(Y);
        const T* dout = c.in(DOut).data<T>();
        const int xi = static_cast<int>(c.attr(x_num_col_dims).i), yi = static_cast<int>(c.attr(y_num_col_dims).i);
        const std::int64_t M = ops::dim_product(x.shape(), 0, xi), K = ops::dim_product(x.shape(), xi, x.rank());
        const std::int64_t N = ops::dim_product(y.shape(), yi, y.rank());
        if (c.out_count(DX)) gemm<T>(false, true, M, K, N, T(1), dout, N, y.data<T>(), N, false, c.out(DX).data<T>(), K);
        if (c.out_count(DY)) gemm<T>(true, false, K, N, M, T(1), x.data<T>(), K, dout, N, false, c.out(DY).data<T>(), N);
    }
};

// ---- matmul --------------------------------------------------------------------------

// matmul (V2 false) and matmul_v2 (ops::matmul_flags).
template <bool V2> struct matmul_op : ops::matmul_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Tensor& y = c.in(Y);
        const Shape& xs = x.shape();
        const Shape& ys = y.shape();
        const auto f = ops::matmul_flags::of<V2>(c.attrs, xs.rank(), ys.rank());
        const kernels::matmul_view v(xs.begin(), xs.rank(), ys.begin(), ys.rank(), f.tx, f.ty);
        const T al = static_cast<T>(f.alpha);
        const std::int64_t o_mat = v.m * v.n;
        const kernels::matmul_batches bt(xs.begin(), xs.rank(), ys.begin(), ys.rank(), v.m * v.k, v.k * v.n);
        const T* xp = x.data<T>();
        const T* yp = y.data<T>();
        T* op = c.out(0).data<T>();
        if (bt.nb == 0 || o_mat == 0) return;

        // Y shared by every batch and X's rows contiguous: one tall GEMM
        // instead of many short ones.
        if (bt.one_product(v.ta)) {
            if (c.packed)
                gemm_prepacked<T>(false, bt.nb * v.m, v.n, v.k, al, xp, v.lda, static_cast<const T*>(c.packed), false,
                                  op, v.n);
            else gemm<T>(false, v.tb, bt.nb * v.m, v.n, v.k, al, xp, v.lda, yp, v.ldb, false, op, v.n);
            return;
        }
        bt.for_each([&](std::int64_t b, std::int64_t ox, std::int64_t oy, bool, bool) {
            gemm<T>(v.ta, v.tb, v.m, v.n, v.k, al, xp + ox, v.lda, yp + oy, v.ldb, false, op + b * o_mat, v.n);
        });
    }

    // Y packed for gemm_prepacked (OpDef::prepack) when the product is one
    // tall GEMM over a 2-D Y (compute's first case).
    static std::size_t prepack(const KernelContext& c, void* out) {
        const Tensor& x = c.in(X);
        const Tensor& y = c.in(Y);
        const Shape& xs = x.shape();
        const Shape& ys = y.shape();
        const auto f = ops::matmul_flags::of<V2>(c.attrs, xs.rank(), ys.rank());
        const bool ta = f.tx, tb = f.ty;
        if (ys.rank() != 2 || ta || xs.rank() < 2) return 0;
        const std::int64_t M = xs.numel() / xs[xs.rank() - 1];  // every batch's rows: X is contiguous
        const std::int64_t K = tb ? ys[1] : ys[0], N = tb ? ys[0] : ys[1];
        return prepack_y(y, tb, K, N, ys[1], gemm_prepack_pays(M), out);
    }
};

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
template <bool V2> struct matmul_grad_op : ops::matmul_grad_op {
    template <class T> static void compute(cpu, const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Tensor& y = c.in(Y);
        const Shape& xs = x.shape();
        const Shape& ys = y.shape();
        T* dx = c.out_count(DX) ? c.out(DX).data<T>() : nullptr;
        T* dy = c.out_count(DY) ? c.out(DY).data<T>() : nullptr;
        const auto f = ops::matmul_flags::of<V2>(c.attrs, xs.rank(), ys.rank());
        const kernels::matmul_view v(xs.begin(), xs.rank(), ys.begin(), ys.rank(), f.tx, f.ty);
        const T al = static_cast<T>(f.alpha);
        const std::int64_t M = v.m, N = v.n, K = v.k, ldx = v.lda, ldy = v.ldb;
        const std::int64_t o_mat = M * N;
        const kernels::matmul_batches bt(xs.begin(), xs.rank(), ys.begin(), ys.rank(), M * K, K * N);
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
        if (bt.one_product(v.ta)) {
            const std::int64_t MB = bt.nb * M;
            if (dx) gemm<T>(false, !v.tb, MB, K, N, al, dop, N, yp, ldy, false, dx, K);
            if (dy && !v.tb) gemm<T>(true, false, K, N, MB, al, xp, ldx, dop, N, false, dy, N);
            if (dy && v.tb) gemm<T>(true, false, N, K, MB, al, dop, N, xp, ldx, false, dy, K);
            return;
        }

        bt.for_each([&](std::int64_t b, std::int64_t ox, std::int64_t oy, bool acc_x, bool acc_y) {
            const T* d = dop + b * o_mat;
            if (dx && !v.ta) gemm<T>(false, !v.tb, M, K, N, al, d, N, yp + oy, ldy, acc_x, dx + ox, K);
            if (dx && v.ta) gemm<T>(v.tb, true, K, M, N, al, yp + oy, ldy, d, N, acc_x, dx + ox, M);
            if (dy && !v.tb) gemm<T>(!v.ta, false, K, N, M, al, xp + ox, ldx, d, N, acc_y, dy + oy, N);
            if (dy && v.tb) gemm<T>(true, v.ta, N, K, M, al, d, N, xp + ox, ldx, acc_y, dy + oy, K);
        });
    }
};

// ---- the kernel tables ---------------------------------------------------------------
// mul and matmul take their Y pre-packed when the session keeps it packed.

inline void mul_kernels(OpDef& d) {
    d.kernels = cpu_kernels<mul_op, float, double>();
    d.prepack_input = mul_op::Y;
    d.prepack = &mul_op::prepack;
}
template <bool V2> void matmul_family_kernels(OpDef& d) {
    d.kernels = cpu_kernels<matmul_op<V2>, float, double>();
    d.prepack_input = matmul_op<V2>::Y;
    d.prepack = &matmul_op<V2>::prepack;
}
inline void matmul_kernels(OpDef& d) { matmul_family_kernels<false>(d); }
inline void matmul_v2_kernels(OpDef& d) { matmul_family_kernels<true>(d); }
inline void mul_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<mul_grad_op, float, double>(); }
inline void matmul_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<matmul_grad_op<false>, float, double>(); }
inline void matmul_v2_grad_kernels(OpDef& d) { d.kernels = cpu_kernels<matmul_grad_op<true>, float, double>(); }

}  // namespace dlgraph::cpu_ops
