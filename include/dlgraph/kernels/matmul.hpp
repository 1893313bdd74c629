// matmul's index math, part of the kernel core: the matrix view of its
// operands (shared with shape inference in ops/matmul.hpp) and the walk over
// broadcast batch dims that every device's kernel does around its GEMM.
// Integers only: no vectors, no heap.
#pragma once

#include <cstdint>

#include "dlgraph/kernels/config.hpp"
#include "dlgraph/kernels/elementwise.hpp"  // max_rank, the core's bound on ranks

namespace dlgraph::kernels {

// The matrix view of matmul's operands, of dims xs (rank xr >= 1) and ys
// (yr >= 1), as Paddle's matmul reads them: a rank-1 X of size K is a row
// [1, K], transposed a column [K, 1]; a rank-1 Y is a column [K, 1],
// transposed a row [1, K]. Both are stored as K contiguous elements, so
// such a view is an untransposed matrix with no flag set. Out drops the
// unit dim a rank-1 operand brings (matmul_out_keeps_m/n). Dims may be
// unknown (-1) when inferring.
struct matmul_view {
    std::int64_t m = 0, k = 0, n = 0, yk = 0;  // op(X) is m x k, op(Y) is yk x n
    bool ta = false, tb = false;
    int xk_dim = 0, yk_dim = 0;    // which dim of X / Y holds K, for messages; -1: a transposed vector's K of 1
    std::int64_t lda = 0, ldb = 0;  // row strides of X's and Y's matrices as stored

    matmul_view(const std::int64_t* xs, int xr, const std::int64_t* ys, int yr, bool tx, bool ty) noexcept {
        if (xr == 1) {
            m = tx ? xs[0] : 1;
            k = tx ? 1 : xs[0];
            lda = k;
            xk_dim = tx ? -1 : 0;
        } else {
            ta = tx;
            m = tx ? xs[xr - 1] : xs[xr - 2];
            k = tx ? xs[xr - 2] : xs[xr - 1];
            xk_dim = tx ? xr - 2 : xr - 1;
            lda = xs[xr - 1];
        }
        if (yr == 1) {
            yk = ty ? 1 : ys[0];
            n = ty ? ys[0] : 1;
            ldb = n;
            yk_dim = ty ? -1 : 0;
        } else {
            tb = ty;
            yk = ty ? ys[yr - 1] : ys[yr - 2];
            n = ty ? ys[yr - 2] : ys[yr - 1];
            yk_dim = ty ? yr - 1 : yr - 2;
            ldb = ys[yr - 1];
        }
    }
};

// Whether Out has op(X)'s rows (m) and op(Y)'s columns (n) as dims. As in
// Paddle, a rank-1 operand's unit dim is dropped: an untransposed vector's
// always, a transposed one's only when its size is 1 (X [1] transposed
// times Y [1, 4] gives [4]; an unknown size keeps the dim).
inline bool matmul_out_keeps_m(int xr, std::int64_t m) noexcept { return xr > 1 || m != 1; }
inline bool matmul_out_keeps_n(int yr, std::int64_t n) noexcept { return yr > 1 || n != 1; }

// Batch dims of both operands padded to Out's batch rank (rb): Out's dims,
// and each operand's element stride per dim (0 where it is broadcast).
// x_mat, y_mat: the elements of one matrix of X and of Y.
struct matmul_batches {
    int rb = 0;
    std::int64_t nb = 1;  // number of batches (matrices of Out)
    std::int64_t dims[max_rank] = {}, xst[max_rank] = {}, yst[max_rank] = {};

    matmul_batches(const std::int64_t* xs, int xr, const std::int64_t* ys, int yr, std::int64_t x_mat,
                   std::int64_t y_mat) noexcept {
        const int xb = xr - 2 > 0 ? xr - 2 : 0, yb = yr - 2 > 0 ? yr - 2 : 0;
        rb = xb > yb ? xb : yb;
        std::int64_t sx = x_mat, sy = y_mat;
        for (int i = rb - 1; i >= 0; --i) {
            const int ix = i - (rb - xb), iy = i - (rb - yb);
            const std::int64_t a = ix >= 0 ? xs[ix] : 1, b = iy >= 0 ? ys[iy] : 1;
            dims[i] = a > b ? a : b;
            if (a == 0 || b == 0) dims[i] = 0;
            xst[i] = a == 1 ? 0 : sx;
            yst[i] = b == 1 ? 0 : sy;
            sx *= a;
            sy *= b;
            nb *= dims[i];
        }
    }

    // Y shared by every batch and X's batches all distinct and contiguous:
    // with an untransposed X, the batches are one tall (nb*m) x k product.
    bool one_product(bool ta) const noexcept {
        bool y_shared = true, x_full = true;
        for (int i = 0; i < rb; ++i) {
            y_shared = y_shared && yst[i] == 0;
            x_full = x_full && (xst[i] != 0 || dims[i] == 1);
        }
        return !ta && y_shared && x_full;
    }

    // Calls f(b, x_offset, y_offset, acc_x, acc_y) for every batch b in
    // row-major order: the element offsets of its X and Y matrices, and
    // whether an earlier batch already reached that X (acc_x) or Y (acc_y)
    // matrix, so a gradient into a broadcast operand adds instead of writing.
    template <class F>
    void for_each(F f) const noexcept(noexcept(f(std::int64_t(0), std::int64_t(0), std::int64_t(0), false, false))) {
        std::int64_t idx[max_rank] = {};
        for (std::int64_t b = 0; b < nb; ++b) {
            std::int64_t ox = 0, oy = 0;
            bool acc_x = false, acc_y = false;
            for (int i = 0; i < rb; ++i) {
                ox += idx[i] * xst[i];
                oy += idx[i] * yst[i];
                acc_x = acc_x || (idx[i] != 0 && xst[i] == 0);
                acc_y = acc_y || (idx[i] != 0 && yst[i] == 0);
            }
            f(b, ox, oy, acc_x, acc_y);
            for (int i = rb - 1; i >= 0; --i) {  // odometer
                if (++idx[i] < dims[i]) break;
                idx[i] = 0;
            }
        }
    }
};

}  // namespace dlgraph::kernels
