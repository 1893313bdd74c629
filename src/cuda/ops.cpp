// The CUDA kernels of dlgraph's ops: for each op, the glue that reads a
// step's tensors (device pointers), shapes and attributes and queues the
// device code of src/cuda/kernels.cu, or cuBLAS for the matrix products, on
// the context's stream; and the table the planner asks (cuda_kernel).
//
// The ops with no CUDA kernel yet run on the host, with copies around
// them: top_k, accuracy, uniform_random and gaussian_random (whose host
// kernels give the CPU's exact random numbers), and the host-only feed,
// fetch, save, load, save_combine, load_combine.
#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>

#include "context.hpp"
#include "dlgraph/kernels/elementwise.hpp"
#include "dlgraph/kernels/matmul.hpp"
#include "dlgraph/ops/elementwise.hpp"
#include "dlgraph/ops/fill.hpp"
#include "dlgraph/ops/matmul.hpp"
#include "dlgraph/ops/op_table.hpp"
#include "dlgraph/ops/optimizers.hpp"
#include "dlgraph/ops/reduce.hpp"
#include "dlgraph/ops/shape_ops.hpp"
#include "dlgraph/ops/index.hpp"
#include "dlgraph/ops/softmax.hpp"

namespace dlgraph::cuda_detail {
namespace {

namespace ck = cuda_kernels;
using i64 = std::int64_t;

// The step's stream, with the context's GPU made current for its launches.
cudaStream_t stream_of(const KernelContext& c) {
    cuda_context& ctx = context_of(c);
    ++ctx.kernel_steps;
    ctx.make_current();
    return ctx.stream();
}
ck::device_fault* fault_of(const KernelContext& c) { return context_of(c).fault_slot(c.fault); }

void copy_bytes(void* dst, const void* src, std::size_t bytes, cudaStream_t s) {
    if (bytes && dst != src) check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
}

template <class Op, class... Ts> KernelTable table_of() {
    KernelTable t{};
    ((t[static_cast<std::size_t>(dtype_of<Ts>)] = [](const KernelContext& c) { Op::template compute<Ts>(c); }), ...);
    return t;
}

// ---- element-wise ------------------------------------------------------------------------------

ck::broadcast_strides strides_of(const Shape& xs, const Shape& ys, i64 axis, const Shape& zs) {
    const kernels::broadcast_geometry g =
        kernels::broadcast_walk_of(xs.begin(), xs.rank(), ys.begin(), ys.rank(), axis, zs.begin(), zs.rank());
    ck::broadcast_strides b;
    b.rank = g.rank;
    for (int d = 0; d < g.rank; ++d) {
        b.zs[d] = g.zs[d];
        b.xst[d] = g.xst[d];
        b.yst[d] = g.yst[d];
    }
    return b;
}

template <ck::binop Op> struct binary_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(0);
        const Tensor& y = c.in(1);
        Tensor& z = c.out(0);
        ck::binary<T>(Op, z.numel(), x.data<T>(), y.data<T>(), z.data<T>(),
                      strides_of(x.shape(), y.shape(), c.attr(0).i, z.shape()), fault_of(c), stream_of(c));
    }
};

template <ck::binop Op> struct binary_grad_op {
    enum { X = 0, Y = 1, Out = 2, DOut = 3 };
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Tensor& y = c.in(Y);
        const Tensor& d = c.in(DOut);
        // Out is absent where the gradient does not read it: Out@GRAD stands in.
        const T* out = c.in_count(Out) ? c.in(Out).template data<T>() : d.template data<T>();
        ck::binary_grad<T>(Op, d.numel(), x.numel(), y.numel(), x.data<T>(), y.data<T>(), out,
                           d.data<T>(), c.out_count(0) ? c.out(0).data<T>() : nullptr,
                           c.out_count(1) ? c.out(1).data<T>() : nullptr,
                           strides_of(x.shape(), y.shape(), c.attr(0).i, d.shape()), context_of(c).scratch(),
                           context_of(c).scratch_bytes(), stream_of(c));
    }
};

// The op's first `Params` attributes, all FLOAT (leaky_relu's alpha, ...).
template <int Params> ck::unary_params unary_params_of(const KernelContext& c) {
    ck::unary_params p;
    for (int k = 0; k < Params; ++k) p.p[k] = c.attr(k).f;
    return p;
}
// gelu's functor: exact, or the tanh form (its attribute `approximate`).
ck::unop gelu_unop(const KernelContext& c) { return c.attr(0).b ? ck::unop::gelu_tanh : ck::unop::gelu; }

template <ck::unop Op, int Params = 0> struct unary_op {
    template <class T> static void compute(const KernelContext& c) {
        const ck::unop op = Op == ck::unop::gelu ? gelu_unop(c) : Op;
        ck::unary<T>(op, unary_params_of<Params>(c), c.in(0).numel(), c.in(0).data<T>(), c.out(0).data<T>(),
                     stream_of(c));
    }
};

template <ck::unop Op, int Params = 0> struct unary_grad_op {
    template <class T> static void compute(const KernelContext& c) {
        // X (slot 0) is absent where the gradient reads only Out.
        const Tensor& x = c.in_count(0) ? c.in(0) : c.in(1);
        const ck::unop op = Op == ck::unop::gelu ? gelu_unop(c) : Op;
        ck::unary_grad<T>(op, unary_params_of<Params>(c), c.in(2).numel(), x.data<T>(), c.in(1).data<T>(),
                          c.in(2).data<T>(), c.out(0).data<T>(), stream_of(c));
    }
};

struct scale_op {
    template <class T> static void compute(const KernelContext& c) {
        ck::scale<T>(c.in(0).numel(), c.in(0).data<T>(), c.out(0).data<T>(), kernels::convert<T>(c.attr(0).f),
                     kernels::convert<T>(c.attr(1).f), c.attr(2).b, stream_of(c));
    }
};

// Ops that move bytes: assign, reshape, squeeze2, unsqueeze2 and their grads (Out holds input In's elements).
template <int In> struct copy_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(In);
        copy_bytes(c.out(0).raw(), x.raw(), x.bytes(), stream_of(c));
    }
};

struct fill_constant_op {
    template <class T> static void compute(const KernelContext& c) {
        Tensor& out = c.out(0);
        ck::fill<T>(out.numel(), out.data<T>(), kernels::convert<T>(c.attr(ops::fill_constant_op::value).f),
                    stream_of(c));
    }
};

struct fill_any_like_op {
    template <class T> static void compute(const KernelContext& c) {
        Tensor& out = c.out(0);
        const double v = c.attr(ops::fill_any_like_op::value).f;
        visit_dtype(out.dtype(), [&]<class U>(type_tag<U>) {
            if constexpr (!std::is_same_v<U, float16>) ck::fill<U>(out.numel(), out.data<U>(), kernels::convert<U>(v), stream_of(c));
        });
    }
};

struct cast_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(0);
        Tensor& out = c.out(0);
        visit_dtype(out.dtype(), [&]<class U>(type_tag<U>) {
            if constexpr (!std::is_same_v<U, float16>) ck::cast<T, U>(x.numel(), x.data<T>(), out.data<U>(), stream_of(c));
        });
    }
};

// Out = X[0] + X[1] + ... in input order; an X that is Out (gradients
// accumulated in place) is already there.
struct sum_op {
    template <class T> static void compute(const KernelContext& c) {
        Tensor& out = c.out(0);
        const i64 n = out.numel();
        const int count = c.in_count(0);
        const cudaStream_t s = stream_of(c);
        int alias = -1;
        for (int k = 0; k < count; ++k)
            if (c.in(0, k).raw() == out.raw()) alias = k;
        int first = 0;
        if (alias < 0) {
            if (count == 0) return ck::fill<T>(n, out.data<T>(), T(0), s);
            copy_bytes(out.raw(), c.in(0, 0).raw(), out.bytes(), s);
            first = 1;
        }
        for (int k = first; k < count; ++k)
            if (k != alias) ck::add_into<T>(n, c.in(0, k).data<T>(), out.data<T>(), s);
    }
};

// ---- reductions ---------------------------------------------------------------------------------

// Out's strides per X dim: kept dims contiguous, reduced dims 0.
ck::reduce_grad_walk reduce_grad_walk_of(const Shape& xs, const bool* red) {
    ck::reduce_grad_walk w;
    w.rank = xs.rank();
    w.n = xs.numel();
    i64 st = 1;
    for (int d = xs.rank() - 1; d >= 0; --d) {
        w.dims[d] = xs[d];
        w.ost[d] = red[d] ? 0 : st;
        if (!red[d]) st *= xs[d];
    }
    return w;
}

void reduced_flags(const KernelContext& c, int r, bool* red) {
    i64 bad = 0;
    bool dup = false;
    ops::reduced_dims(c.attrs, r, red, bad, dup);
}

// Out = X folded over the dims flagged in `red`.
template <class T> void reduce_on(const KernelContext& c, ck::redop op, const Tensor& x, const bool* red) {
    cuda_context& ctx = context_of(c);
    ck::reduce<T>(op, ck::reduce_walk_of(x.rank(), x.shape().begin(), red), x.data<T>(), c.out(0).data<T>(), ctx.scratch(),
                  ctx.scratch_bytes(), stream_of(c));
}

struct mean_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(0);
        bool red[max_rank];
        std::fill(red, red + max_rank, true);
        reduce_on<T>(c, ck::redop::mean_all, x, red);
    }
};

struct mean_grad_op {
    enum { X = 0, Out = 1, DOut = 2 };
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        bool red[max_rank];
        std::fill(red, red + max_rank, true);
        const T n = static_cast<T>(std::max<i64>(x.numel(), 1));  // dx = dout / n, as on the CPU
        ck::reduce_grad<T>(ck::redop::mean_all, reduce_grad_walk_of(x.shape(), red), nullptr, nullptr,
                           c.in(DOut).data<T>(), c.out(0).data<T>(), n, stream_of(c));
    }
};

template <ck::redop Op> struct reduce_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(0);
        bool red[max_rank];
        reduced_flags(c, x.rank(), red);
        reduce_on<T>(c, Op, x, red);
    }
};

template <ck::redop Op> struct reduce_grad_op {
    enum { X = 0, Out = 1, DOut = 2 };
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        bool red[max_rank];
        reduced_flags(c, x.rank(), red);
        const ck::reduce_grad_walk w = reduce_grad_walk_of(x.shape(), red);
        i64 count = 1;
        for (int d = 0; d < x.rank(); ++d)
            if (red[d]) count *= x.shape()[d];
        const T scale = T(1) / static_cast<T>(std::max<i64>(count, 1));
        ck::reduce_grad<T>(Op, w, x.data<T>(), c.in(Out).template data<T>(), c.in(DOut).template data<T>(), c.out(0).data<T>(), scale,
                           stream_of(c));
    }
};

// ---- lookup_table ---------------------------------------------------------------------------------

template <bool V2> struct lookup_table_op : ops::lookup_table_op<V2> {
    using base = ops::lookup_table_op<V2>;
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& w = c.in(base::W);
        const Tensor& ids = c.in(base::Ids);
        ck::lookup_table<T>(w.shape()[0], w.shape()[1], w.data<T>(), ids.raw(), ids.dtype() == DataType::INT32,
                            ids.numel(), c.attr(base::padding_idx).i, c.out(0).data<T>(), fault_of(c), stream_of(c));
    }
};
template <bool V2> struct lookup_table_grad_op : ops::lookup_table_op<V2> {
    using base = ops::lookup_table_op<V2>;
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& w = c.in(base::W);
        const Tensor& ids = c.in(base::Ids);
        ck::lookup_table_grad<T>(w.shape()[0], w.shape()[1], ids.raw(), ids.dtype() == DataType::INT32, ids.numel(),
                                 c.attr(base::padding_idx).i, c.in(base::DOut).template data<T>(), c.out(0).data<T>(),
                                 fault_of(c), stream_of(c));
    }
};

// ---- softmax and losses ---------------------------------------------------------------------------

// Rows and classes of a loss's [..., d] input.
struct loss_rows {
    i64 rows, d;
};
loss_rows rows_of(const Shape& s) { return {ops::dim_product(s, 0, s.rank() - 1), s[s.rank() - 1]}; }

struct softmax_op : ops::softmax_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        if (x.numel() == 0) return;
        const auto g = ops::split_at_axis(x.shape(), c.attr(axis).i);
        ck::softmax<T>(g.outer, g.d, g.inner, x.data<T>(), c.out(0).data<T>(), stream_of(c));
    }
};

struct log_softmax_op : ops::softmax_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        if (x.numel() == 0) return;
        const auto g = ops::split_at_axis(x.shape(), c.attr(axis).i);
        ck::log_softmax<T>(g.outer, g.d, g.inner, x.data<T>(), c.out(0).data<T>(), stream_of(c));
    }
};

struct log_softmax_grad_op : ops::softmax_grad_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& out = c.in(Out);
        if (out.numel() == 0) return;
        const auto g = ops::split_at_axis(out.shape(), c.attr(axis).i);
        ck::log_softmax_grad<T>(g.outer, g.d, g.inner, out.data<T>(), c.in(DOut).data<T>(), c.out(0).data<T>(),
                                stream_of(c));
    }
};

struct softmax_grad_op : ops::softmax_grad_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& out = c.in(Out);
        if (out.numel() == 0) return;
        const auto g = ops::split_at_axis(out.shape(), c.attr(axis).i);
        ck::softmax_grad<T>(g.outer, g.d, g.inner, out.data<T>(), c.in(DOut).data<T>(), c.out(0).data<T>(),
                            stream_of(c));
    }
};

struct cross_entropy_op : ops::cross_entropy_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        const auto g = rows_of(x.shape());
        ck::cross_entropy<T>(c.attr(soft_label).b, g.rows, g.d, x.data<T>(), c.in(Label).raw(), c.attr(ignore_index).i,
                             c.out(0).data<T>(), fault_of(c), stream_of(c));
    }
};

struct cross_entropy_grad_op : ops::cross_entropy_grad_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        const auto g = rows_of(x.shape());
        ck::cross_entropy_grad<T>(c.attr(soft_label).b, g.rows, g.d, x.data<T>(), c.in(Label).raw(),
                                  c.attr(ignore_index).i, c.in(DY).data<T>(), c.out(0).data<T>(), fault_of(c),
                                  stream_of(c));
    }
};

struct softmax_with_cross_entropy_op : ops::softmax_with_cross_entropy_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(Logits);
        const auto g = rows_of(x.shape());
        ck::softmax_with_cross_entropy<T>(c.attr(soft_label).b, g.rows, g.d, x.data<T>(), c.in(Label).raw(),
                                          c.attr(ignore_index).i, c.out(Softmax).data<T>(), c.out(Loss).data<T>(),
                                          fault_of(c), stream_of(c));
    }
};

struct softmax_with_cross_entropy_grad_op : ops::softmax_with_cross_entropy_grad_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& sm = c.in(Softmax);
        const auto g = rows_of(sm.shape());
        ck::softmax_with_cross_entropy_grad<T>(c.attr(soft_label).b, g.rows, g.d, c.in(Label).raw(),
                                               c.attr(ignore_index).i, sm.data<T>(), c.in(DLoss).data<T>(),
                                               c.out(0).data<T>(), fault_of(c), stream_of(c));
    }
};

// ---- optimizers -----------------------------------------------------------------------------------

struct sgd_op : ops::sgd_op {
    template <class T> static void compute(const KernelContext& c) {
        ck::sgd<T>(c.in(Param).numel(), c.in(Param).data<T>(), c.in(Grad).data<T>(), c.in(LearningRate).data<T>(),
                   c.out(0).data<T>(), stream_of(c));
    }
};

struct momentum_op : ops::momentum_op {
    template <class T> static void compute(const KernelContext& c) {
        ck::momentum<T>(c.in(Param).numel(), c.in(Param).data<T>(), c.in(Grad).data<T>(), c.in(Velocity).data<T>(),
                        c.in(LearningRate).data<T>(), static_cast<T>(c.attr(mu).f), c.attr(use_nesterov).b,
                        c.out(ParamOut).data<T>(), c.out(VelocityOut).data<T>(), stream_of(c));
    }
};

// adam, and adamw (W): its decay where with_decay is set, at LearningRate times lr_ratio.
template <bool W> struct adam_op : ops::adam_op {
    template <class T> static void compute(const KernelContext& c) {
        T coeff = 0, ratio = 1;
        if constexpr (W) {
            if (c.attr(ops::adamw_op::with_decay).b) coeff = static_cast<T>(c.attr(ops::adamw_op::coeff).f);
            ratio = static_cast<T>(c.attr(ops::adamw_op::lr_ratio).f);
        }
        ck::adam<T>(c.in(Param).numel(), c.in(Param).data<T>(), c.in(Grad).data<T>(), c.in(Moment1).data<T>(),
                    c.in(Moment2).data<T>(), c.in(LearningRate).data<T>(), static_cast<T>(c.attr(beta1).f),
                    static_cast<T>(c.attr(beta2).f), static_cast<T>(c.attr(epsilon).f), c.in(Beta1Pow).data<T>(),
                    c.in(Beta2Pow).data<T>(), coeff, ratio, c.out(ParamOut).data<T>(), c.out(Moment1Out).data<T>(),
                    c.out(Moment2Out).data<T>(), c.out(Beta1PowOut).data<T>(), c.out(Beta2PowOut).data<T>(),
                    stream_of(c));
    }
};

// ---- matrix products (cuBLAS) ------------------------------------------------------------------------

// Row-major C (M x N, row stride ldc) = alpha * op(A) * op(B) (+ C when
// acc), as dlgraph's CPU gemm: cuBLAS is column-major, so it computes
// C^T = op(B)^T * op(A)^T, whose operands are B and A as they are stored.
template <class T>
void gemm(const KernelContext& c, bool ta, bool tb, i64 M, i64 N, i64 K, T alpha, const T* A, i64 lda, const T* B,
          i64 ldb, bool acc, T* C, i64 ldc) {
    if (M == 0 || N == 0) return;
    if (K == 0) {  // C = 0 (or unchanged), without relying on cuBLAS for k = 0
        if (!acc)
            check(cudaMemset2DAsync(C, static_cast<std::size_t>(std::max<i64>(ldc, 1)) * sizeof(T), 0,
                                    static_cast<std::size_t>(N) * sizeof(T), static_cast<std::size_t>(M),
                                    context_of(c).stream()),
                  "cudaMemset2DAsync");
        return;
    }
    cuda_context& ctx = context_of(c);
    const T beta = acc ? T(1) : T(0);
    const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    lda = std::max<i64>(lda, 1);
    ldb = std::max<i64>(ldb, 1);
    ldc = std::max<i64>(ldc, 1);
    if constexpr (std::is_same_v<T, float>)
        check(cublasSgemm_64(ctx.blas(), opb, opa, N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc), "cublasSgemm");
    else
        check(cublasDgemm_64(ctx.blas(), opb, opa, N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc), "cublasDgemm");
}

struct mul_op : ops::mul_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Tensor& y = c.in(Y);
        const int xi = static_cast<int>(c.attr(x_num_col_dims).i), yi = static_cast<int>(c.attr(y_num_col_dims).i);
        const i64 M = ops::dim_product(x.shape(), 0, xi), K = ops::dim_product(x.shape(), xi, x.rank());
        const i64 N = ops::dim_product(y.shape(), yi, y.rank());
        stream_of(c);
        gemm<T>(c, false, false, M, N, K, T(1), x.data<T>(), K, y.data<T>(), N, false, c.out(0).data<T>(), N);
    }
};

struct mul_grad_op : ops::mul_grad_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Tensor& y = c.in(Y);
        const T* dout = c.in(DOut).data<T>();
        const int xi = static_cast<int>(c.attr(x_num_col_dims).i), yi = static_cast<int>(c.attr(y_num_col_dims).i);
        const i64 M = ops::dim_product(x.shape(), 0, xi), K = ops::dim_product(x.shape(), xi, x.rank());
        const i64 N = ops::dim_product(y.shape(), yi, y.rank());
        stream_of(c);
        if (c.out_count(DX)) gemm<T>(c, false, true, M, K, N, T(1), dout, N, y.data<T>(), N, false, c.out(DX).data<T>(), K);
        if (c.out_count(DY)) gemm<T>(c, true, false, K, N, M, T(1), x.data<T>(), K, dout, N, false, c.out(DY).data<T>(), N);
    }
};

// matmul and its gradient as on the CPU (cpu/matmul.hpp), product by product.
struct matmul_op : ops::matmul_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Tensor& y = c.in(Y);
        const Shape& xs = x.shape();
        const Shape& ys = y.shape();
        const kernels::matmul_view v(xs.begin(), xs.rank(), ys.begin(), ys.rank(), c.attr(transpose_X).b,
                                     c.attr(transpose_Y).b);
        const T al = static_cast<T>(c.attr(alpha).f);
        const i64 o_mat = v.m * v.n;
        const kernels::matmul_batches bt(xs.begin(), xs.rank(), ys.begin(), ys.rank(), v.m * v.k, v.k * v.n);
        const T* xp = x.data<T>();
        const T* yp = y.data<T>();
        T* op = c.out(0).data<T>();
        stream_of(c);
        if (bt.nb == 0 || o_mat == 0) return;
        if (bt.one_product(v.ta)) return gemm<T>(c, false, v.tb, bt.nb * v.m, v.n, v.k, al, xp, v.lda, yp, v.ldb, false, op, v.n);
        bt.for_each([&](i64 b, i64 ox, i64 oy, bool, bool) {
            gemm<T>(c, v.ta, v.tb, v.m, v.n, v.k, al, xp + ox, v.lda, yp + oy, v.ldb, false, op + b * o_mat, v.n);
        });
    }
};

struct matmul_grad_op : ops::matmul_grad_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Tensor& y = c.in(Y);
        const Shape& xs = x.shape();
        const Shape& ys = y.shape();
        T* dx = c.out_count(DX) ? c.out(DX).data<T>() : nullptr;
        T* dy = c.out_count(DY) ? c.out(DY).data<T>() : nullptr;
        const kernels::matmul_view v(xs.begin(), xs.rank(), ys.begin(), ys.rank(), c.attr(transpose_X).b,
                                     c.attr(transpose_Y).b);
        const T al = static_cast<T>(c.attr(alpha).f);
        const i64 M = v.m, N = v.n, K = v.k, ldx = v.lda, ldy = v.ldb;
        const kernels::matmul_batches bt(xs.begin(), xs.rank(), ys.begin(), ys.rank(), M * K, K * N);
        const T* xp = x.data<T>();
        const T* yp = y.data<T>();
        const T* dop = c.in(DOut).data<T>();
        const cudaStream_t s = stream_of(c);
        if (bt.nb == 0) {
            if (dx && x.bytes()) check(cudaMemsetAsync(dx, 0, x.bytes(), s), "cudaMemsetAsync");
            if (dy && y.bytes()) check(cudaMemsetAsync(dy, 0, y.bytes(), s), "cudaMemsetAsync");
            return;
        }
        if (bt.one_product(v.ta)) {
            const i64 MB = bt.nb * M;
            if (dx) gemm<T>(c, false, !v.tb, MB, K, N, al, dop, N, yp, ldy, false, dx, K);
            if (dy && !v.tb) gemm<T>(c, true, false, K, N, MB, al, xp, ldx, dop, N, false, dy, N);
            if (dy && v.tb) gemm<T>(c, true, false, N, K, MB, al, dop, N, xp, ldx, false, dy, K);
            return;
        }
        const i64 o_mat = M * N;
        bt.for_each([&](i64 b, i64 ox, i64 oy, bool acc_x, bool acc_y) {
            const T* d = dop + b * o_mat;
            if (dx && !v.ta) gemm<T>(c, false, !v.tb, M, K, N, al, d, N, yp + oy, ldy, acc_x, dx + ox, K);
            if (dx && v.ta) gemm<T>(c, v.tb, true, K, M, N, al, yp + oy, ldy, d, N, acc_x, dx + ox, M);
            if (dy && !v.tb) gemm<T>(c, !v.ta, false, K, N, M, al, xp + ox, ldx, d, N, acc_y, dy + oy, N);
            if (dy && v.tb) gemm<T>(c, true, v.ta, N, K, M, al, d, N, xp + ox, ldx, acc_y, dy + oy, K);
        });
    }
};

// ---- shape ops ----------------------------------------------------------------------------------------

template <std::size_t Bytes> using word_of =
    std::conditional_t<Bytes == 1, std::uint8_t,
                       std::conditional_t<Bytes == 2, std::uint16_t, std::conditional_t<Bytes == 4, std::uint32_t, std::uint64_t>>>;

struct transpose_op : ops::transpose_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        Tensor& y = c.out(0);
        const auto& perm = c.attr(axis).ints;
        ck::permute_walk w;
        w.rank = x.rank();
        i64 xst[max_rank];
        i64 st = 1;
        for (int d = x.rank() - 1; d >= 0; --d) {
            xst[d] = st;
            st *= x.shape()[d];
        }
        for (int d = 0; d < x.rank(); ++d) {
            const int a = static_cast<int>(perm[static_cast<std::size_t>(d)] < 0 ? perm[static_cast<std::size_t>(d)] + x.rank()
                                                                                 : perm[static_cast<std::size_t>(d)]);
            w.out_dims[d] = x.shape()[a];
            w.in_st[d] = xst[a];
        }
        using W = word_of<sizeof(T)>;
        ck::permute<W>(y.numel(), w, static_cast<const W*>(x.raw()), static_cast<W*>(y.raw()), stream_of(c));
    }
};

int normal_axis(i64 axis, int r) { return static_cast<int>(axis < 0 ? axis + r : axis); }

// Joins parts along dim a of `whole` (concat: into it; split: out of it)
// with one 2-D copy per part: `outer` rows of the part's width.
template <class Part>
void copy_parts(void* whole, const Shape& ws, int a, std::size_t esize, int n, Part part, bool into_whole, cudaStream_t s) {
    if (ws.numel() == 0) return;
    const i64 outer = ops::dim_product(ws, 0, a), inner = ops::dim_product(ws, a + 1, ws.rank());
    const std::size_t pitch = static_cast<std::size_t>(ws[a] * inner) * esize;
    std::size_t at = 0;
    for (int k = 0; k < n; ++k) {
        auto [ptr, dim] = part(k);
        const std::size_t width = static_cast<std::size_t>(dim * inner) * esize;
        char* w = static_cast<char*>(whole) + at;
        if (width && outer && (outer == 1 || width == pitch)) {  // one contiguous run
            const std::size_t bytes = width * static_cast<std::size_t>(outer);
            if (into_whole) check(cudaMemcpyAsync(w, ptr, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
            else check(cudaMemcpyAsync(ptr, w, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
        } else if (width && outer) {
            if (into_whole) check(cudaMemcpy2DAsync(w, pitch, ptr, width, width, static_cast<std::size_t>(outer),
                                                    cudaMemcpyDeviceToDevice, s), "cudaMemcpy2DAsync");
            else check(cudaMemcpy2DAsync(ptr, width, w, pitch, width, static_cast<std::size_t>(outer),
                                         cudaMemcpyDeviceToDevice, s), "cudaMemcpy2DAsync");
        }
        at += width;
    }
}

struct concat_op : ops::concat_op {
    template <class T> static void compute(const KernelContext& c) {
        Tensor& out = c.out(0);
        const int a = normal_axis(c.attr(axis).i, out.rank());
        copy_parts(out.raw(), out.shape(), a, sizeof(T), c.in_count(X),
                   [&](int k) { return std::pair{const_cast<void*>(c.in(X, k).raw()), c.in(X, k).shape()[a]}; }, true,
                   stream_of(c));
    }
};

// split and concat_grad: the outputs are the parts of input In (X or
// Out@GRAD), cut along the dim of attribute Axis.
template <int In, int Axis> struct split_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(In);
        const int a = normal_axis(c.attr(Axis).i, x.rank());
        copy_parts(const_cast<void*>(x.raw()), x.shape(), a, sizeof(T), c.out_count(0),
                   [&](int k) { return std::pair{c.out(0, k).raw(), c.out(0, k).shape()[a]}; }, false, stream_of(c));
    }
};

// ---- the table ------------------------------------------------------------------------------------------

template <class Op> KernelTable arith() { return table_of<Op, float, double, std::int32_t, std::int64_t>(); }
template <class Op> KernelTable floats() { return table_of<Op, float, double>(); }
template <class Op> KernelTable stored() {
    return table_of<Op, bool, std::int16_t, std::int32_t, std::int64_t, float16, float, double>();
}
template <class Op> KernelTable numbers() { return table_of<Op, bool, std::int16_t, std::int32_t, std::int64_t, float, double>(); }

std::array<KernelTable, op_count> make_table() {
    std::array<KernelTable, op_count> t{};
    auto set = [&](op_id id, KernelTable k) { t[static_cast<std::size_t>(id)] = k; };
    using ck::binop;
    using ck::unop;
    set(op_id::elementwise_add, arith<binary_op<binop::add>>());
    set(op_id::elementwise_sub, arith<binary_op<binop::sub>>());
    set(op_id::elementwise_mul, arith<binary_op<binop::mul>>());
    set(op_id::elementwise_div, arith<binary_op<binop::div>>());
    set(op_id::elementwise_max, arith<binary_op<binop::max>>());
    set(op_id::elementwise_min, arith<binary_op<binop::min>>());
    set(op_id::elementwise_pow, arith<binary_op<binop::pow>>());
    set(op_id::elementwise_add_grad, floats<binary_grad_op<binop::add>>());
    set(op_id::elementwise_sub_grad, floats<binary_grad_op<binop::sub>>());
    set(op_id::elementwise_mul_grad, floats<binary_grad_op<binop::mul>>());
    set(op_id::elementwise_div_grad, floats<binary_grad_op<binop::div>>());
    set(op_id::elementwise_max_grad, floats<binary_grad_op<binop::max>>());
    set(op_id::elementwise_min_grad, floats<binary_grad_op<binop::min>>());
    set(op_id::elementwise_pow_grad, floats<binary_grad_op<binop::pow>>());
    set(op_id::relu, floats<unary_op<unop::relu>>());
    set(op_id::sigmoid, floats<unary_op<unop::sigmoid>>());
    set(op_id::tanh, floats<unary_op<unop::tanh>>());
    set(op_id::exp, floats<unary_op<unop::exp>>());
    set(op_id::log, floats<unary_op<unop::log>>());
    set(op_id::sqrt, floats<unary_op<unop::sqrt>>());
    set(op_id::abs, arith<unary_op<unop::abs>>());
    set(op_id::square, arith<unary_op<unop::square>>());
    set(op_id::relu_grad, floats<unary_grad_op<unop::relu>>());
    set(op_id::sigmoid_grad, floats<unary_grad_op<unop::sigmoid>>());
    set(op_id::tanh_grad, floats<unary_grad_op<unop::tanh>>());
    set(op_id::exp_grad, floats<unary_grad_op<unop::exp>>());
    set(op_id::log_grad, floats<unary_grad_op<unop::log>>());
    set(op_id::sqrt_grad, floats<unary_grad_op<unop::sqrt>>());
    set(op_id::abs_grad, floats<unary_grad_op<unop::abs>>());
    set(op_id::square_grad, floats<unary_grad_op<unop::square>>());
    set(op_id::softsign, floats<unary_op<unop::softsign>>());
    set(op_id::sin, floats<unary_op<unop::sin>>());
    set(op_id::cos, floats<unary_op<unop::cos>>());
    set(op_id::reciprocal, floats<unary_op<unop::reciprocal>>());
    set(op_id::rsqrt, floats<unary_op<unop::rsqrt>>());
    set(op_id::floor, floats<unary_op<unop::floor>>());
    set(op_id::ceil, floats<unary_op<unop::ceil>>());
    set(op_id::round, floats<unary_op<unop::round>>());
    set(op_id::sign, floats<unary_op<unop::sign>>());
    set(op_id::gelu, floats<unary_op<unop::gelu>>());
    set(op_id::leaky_relu, floats<unary_op<unop::leaky_relu, 1>>());
    set(op_id::elu, floats<unary_op<unop::elu, 1>>());
    set(op_id::relu6, floats<unary_op<unop::relu6, 1>>());
    set(op_id::hard_sigmoid, floats<unary_op<unop::hard_sigmoid, 2>>());
    set(op_id::hard_swish, floats<unary_op<unop::hard_swish, 3>>());
    set(op_id::softplus, floats<unary_op<unop::softplus, 2>>());
    set(op_id::swish, floats<unary_op<unop::swish, 1>>());
    set(op_id::clip, floats<unary_op<unop::clip, 2>>());
    set(op_id::pow, floats<unary_op<unop::pow, 1>>());
    set(op_id::softsign_grad, floats<unary_grad_op<unop::softsign>>());
    set(op_id::sin_grad, floats<unary_grad_op<unop::sin>>());
    set(op_id::cos_grad, floats<unary_grad_op<unop::cos>>());
    set(op_id::reciprocal_grad, floats<unary_grad_op<unop::reciprocal>>());
    set(op_id::rsqrt_grad, floats<unary_grad_op<unop::rsqrt>>());
    set(op_id::floor_grad, floats<unary_grad_op<unop::floor>>());
    set(op_id::ceil_grad, floats<unary_grad_op<unop::ceil>>());
    set(op_id::round_grad, floats<unary_grad_op<unop::round>>());
    set(op_id::sign_grad, floats<unary_grad_op<unop::sign>>());
    set(op_id::gelu_grad, floats<unary_grad_op<unop::gelu>>());
    set(op_id::leaky_relu_grad, floats<unary_grad_op<unop::leaky_relu, 1>>());
    set(op_id::elu_grad, floats<unary_grad_op<unop::elu, 1>>());
    set(op_id::relu6_grad, floats<unary_grad_op<unop::relu6, 1>>());
    set(op_id::hard_sigmoid_grad, floats<unary_grad_op<unop::hard_sigmoid, 2>>());
    set(op_id::hard_swish_grad, floats<unary_grad_op<unop::hard_swish, 3>>());
    set(op_id::softplus_grad, floats<unary_grad_op<unop::softplus, 2>>());
    set(op_id::swish_grad, floats<unary_grad_op<unop::swish, 1>>());
    set(op_id::clip_grad, floats<unary_grad_op<unop::clip, 2>>());
    set(op_id::pow_grad, floats<unary_grad_op<unop::pow, 1>>());
    set(op_id::scale, arith<scale_op>());
    set(op_id::assign, stored<copy_op<0>>());
    set(op_id::reshape, stored<copy_op<ops::reshape_op::X>>());
    set(op_id::reshape_grad, stored<copy_op<ops::reshape_grad_op::DOut>>());
    set(op_id::squeeze2, stored<copy_op<ops::squeeze2_op::X>>());  // XShape holds no elements
    set(op_id::unsqueeze2, stored<copy_op<ops::unsqueeze2_op::X>>());
    set(op_id::squeeze2_grad, stored<copy_op<ops::squeeze2_grad_op::DOut>>());
    set(op_id::unsqueeze2_grad, stored<copy_op<ops::squeeze2_grad_op::DOut>>());
    set(op_id::fill_constant, numbers<fill_constant_op>());
    set(op_id::fill_any_like, numbers<fill_any_like_op>());
    set(op_id::cast, numbers<cast_op>());
    set(op_id::sum, arith<sum_op>());
    set(op_id::mean, floats<mean_op>());
    set(op_id::mean_grad, floats<mean_grad_op>());
    set(op_id::reduce_sum, arith<reduce_op<ck::redop::sum>>());
    set(op_id::reduce_mean, floats<reduce_op<ck::redop::mean>>());
    set(op_id::reduce_max, arith<reduce_op<ck::redop::max>>());
    set(op_id::reduce_sum_grad, floats<reduce_grad_op<ck::redop::sum>>());
    set(op_id::reduce_mean_grad, floats<reduce_grad_op<ck::redop::mean>>());
    set(op_id::reduce_max_grad, floats<reduce_grad_op<ck::redop::max>>());
    set(op_id::reduce_min, arith<reduce_op<ck::redop::min>>());
    set(op_id::reduce_prod, arith<reduce_op<ck::redop::prod>>());
    set(op_id::reduce_min_grad, floats<reduce_grad_op<ck::redop::min>>());
    set(op_id::softmax, floats<softmax_op>());
    set(op_id::softmax_grad, floats<softmax_grad_op>());
    set(op_id::log_softmax, floats<log_softmax_op>());
    set(op_id::log_softmax_grad, floats<log_softmax_grad_op>());
    set(op_id::lookup_table, floats<lookup_table_op<false>>());
    set(op_id::lookup_table_grad, floats<lookup_table_grad_op<false>>());
    set(op_id::lookup_table_v2, floats<lookup_table_op<true>>());
    set(op_id::lookup_table_v2_grad, floats<lookup_table_grad_op<true>>());
    set(op_id::cross_entropy, floats<cross_entropy_op>());
    set(op_id::cross_entropy_grad, floats<cross_entropy_grad_op>());
    set(op_id::softmax_with_cross_entropy, floats<softmax_with_cross_entropy_op>());
    set(op_id::softmax_with_cross_entropy_grad, floats<softmax_with_cross_entropy_grad_op>());
    set(op_id::sgd, floats<sgd_op>());
    set(op_id::momentum, floats<momentum_op>());
    set(op_id::adam, floats<adam_op<false>>());
    set(op_id::adamw, floats<adam_op<true>>());
    set(op_id::mul, floats<mul_op>());
    set(op_id::mul_grad, floats<mul_grad_op>());
    set(op_id::matmul, floats<matmul_op>());
    set(op_id::matmul_grad, floats<matmul_grad_op>());
    set(op_id::transpose, stored<transpose_op>());
    set(op_id::concat, stored<concat_op>());
    set(op_id::concat_grad, stored<split_op<ops::concat_grad_op::DOut, ops::concat_grad_op::axis>>());
    set(op_id::split, stored<split_op<ops::split_op::X, ops::split_op::axis>>());
    return t;
}

}  // namespace

KernelFn cuda_kernel(const OpDef& def, DataType t) noexcept {
    static const std::array<KernelTable, op_count> table = make_table();
    const OpDef* d = detail::find_builtin_op(def.type);
    if (!d) return def.device_kernel("cuda", t);  // a registered op brings its own, or runs on the host
    const auto i = static_cast<std::size_t>(d - op_table().data());
    // Only where the CPU has a kernel too: the op is valid at that dtype.
    if (!def.supports(t)) return nullptr;
    return table[i][static_cast<std::size_t>(t)];
}

}  // namespace dlgraph::cuda_detail
