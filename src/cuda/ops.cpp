// The CUDA kernels of dlgraph's ops: for each op, the glue that reads a
// step's tensors (device pointers), shapes and attributes and queues the
// device code of src/cuda/kernels.cu, or cuBLAS for the matrix products, on
// the context's stream; the table the planner asks (cuda_kernel), which
// also gives each op's code inside a fused chain (cuda_fused_code); and
// the glue of fused chains (run_chain).
//
// The ops with no CUDA kernel run on the host, with copies around them:
// uniform_random and gaussian_random (whose host kernels give the CPU's
// exact random numbers), the host-only feed, fetch, save, load,
// save_combine, load_combine, the collectives of a ring whose communicator
// moves host memory (MPI's; NCCL's run here), and the ops the list in
// tests/cuda/test_cuda.cpp (`host_only`) names as not done yet.
#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>

#include "context.hpp"
#include "dlgraph/kernels/elementwise.hpp"
#include "dlgraph/fusion.hpp"
#include "dlgraph/kernels/matmul.hpp"
#include "dlgraph/ops/collective.hpp"
#include "dlgraph/ops/conv.hpp"
#include "dlgraph/ops/dropout.hpp"
#include "dlgraph/ops/elementwise.hpp"
#include "dlgraph/ops/eval_ops.hpp"
#include "dlgraph/ops/logic.hpp"
#include "dlgraph/ops/loss.hpp"
#include "dlgraph/ops/norm.hpp"
#include "dlgraph/ops/fill.hpp"
#include "dlgraph/ops/matmul.hpp"
#include "dlgraph/ops/op_table.hpp"
#include "dlgraph/ops/optimizers.hpp"
#include "dlgraph/ops/reduce.hpp"
#include "dlgraph/ops/shape_ops.hpp"
#include "dlgraph/ops/index.hpp"
#include "dlgraph/ops/op_util.hpp"
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
ck::device_fault* fault_of(const KernelContext& c) { return context_of(c).fault_slot(c.fault, c.step); }

void copy_bytes(void* dst, const void* src, std::size_t bytes, cudaStream_t s) {
    if (bytes && dst != src) check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s), "cudaMemcpyAsync");
}

// An op's kernels, and where it can run inside a fused chain, its code
// there (DeviceContext::fused_code: Op::fused, for FP32 and FP64).
struct table_entry {
    KernelTable kernels{};
    int fused = -1;
};
template <class Op, class... Ts> table_entry table_of() {
    table_entry e;
    ((e.kernels[static_cast<std::size_t>(dtype_of<Ts>)] = [](const KernelContext& c) { Op::template compute<Ts>(c); }),
     ...);
    if constexpr (requires { Op::fused; }) e.fused = Op::fused;
    return e;
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
    static constexpr int fused = ck::fused_code_of(ck::fused_kind::binary, static_cast<int>(Op));
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

// Inside a fused chain only ops without attributes (as on the CPU).
template <ck::unop Op, int Params> constexpr int unary_fused(ck::fused_kind k) {
    return Params == 0 && Op != ck::unop::gelu ? ck::fused_code_of(k, static_cast<int>(Op)) : -1;
}

template <ck::unop Op, int Params = 0> struct unary_op {
    static constexpr int fused = unary_fused<Op, Params>(ck::fused_kind::unary);
    template <class T> static void compute(const KernelContext& c) {
        const ck::unop op = Op == ck::unop::gelu ? gelu_unop(c) : Op;
        ck::unary<T>(op, unary_params_of<Params>(c), c.in(0).numel(), c.in(0).data<T>(), c.out(0).data<T>(),
                     stream_of(c));
    }
};

template <ck::unop Op, int Params = 0> struct unary_grad_op {
    static constexpr int fused = unary_fused<Op, Params>(ck::fused_kind::grad);  // of (Out@GRAD, X or Out)
    template <class T> static void compute(const KernelContext& c) {
        // X (slot 0) is absent where the gradient reads only Out.
        const Tensor& x = c.in_count(0) ? c.in(0) : c.in(1);
        const ck::unop op = Op == ck::unop::gelu ? gelu_unop(c) : Op;
        ck::unary_grad<T>(op, unary_params_of<Params>(c), c.in(2).numel(), x.data<T>(), c.in(1).data<T>(),
                          c.in(2).data<T>(), c.out(0).data<T>(), stream_of(c));
    }
};

// increment: Out = X + step (one element), as scale by 1 with bias step.
struct increment_op {
    template <class T> static void compute(const KernelContext& c) {
        ck::scale<T>(1, c.in(0).data<T>(), c.out(0).data<T>(), T(1), kernels::convert<T>(c.attr(ops::increment_op::step).f),
                     true, stream_of(c));
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

// reduce_prod's gradient: a block per output element (its group's zeros and nonzero product).
struct reduce_prod_grad_op {
    enum { X = 0, Out = 1, DOut = 2 };
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        bool red[max_rank];
        reduced_flags(c, x.rank(), red);
        ck::reduce_prod_grad<T>(ck::reduce_walk_of(x.rank(), x.shape().begin(), red), x.data<T>(),
                                c.in(Out).template data<T>(), c.in(DOut).template data<T>(), c.out(0).data<T>(),
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

// An optional slot's data, or null.
template <class T> const T* in_or_null(const KernelContext& c, int slot) {
    return c.in_count(slot) ? c.in(slot).data<T>() : nullptr;
}
template <class T> T* out_or_null(const KernelContext& c, int slot) {
    return c.out_count(slot) ? c.out(slot).data<T>() : nullptr;
}

struct bce_loss_op : ops::bce_loss_op {
    template <class T> static void compute(const KernelContext& c) {
        ck::bce_loss<T>(c.in(X).numel(), c.in(X).data<T>(), c.in(Label).data<T>(), c.out(0).data<T>(), fault_of(c),
                        stream_of(c));
    }
};
struct bce_loss_grad_op : ops::bce_loss_op {
    template <class T> static void compute(const KernelContext& c) {
        ck::bce_loss_grad<T>(c.in(X).numel(), c.in(X).data<T>(), c.in(Label).data<T>(), c.in(DOut).data<T>(),
                             c.out(0).data<T>(), stream_of(c));
    }
};
struct sigmoid_ce_op : ops::sigmoid_ce_op {
    template <class T> static void compute(const KernelContext& c) {
        ck::sigmoid_ce<T>(c.in(X).numel(), c.in(X).data<T>(), c.in(Label).data<T>(), c.attr(ignore_index).i,
                          c.attr(normalize).b, c.out(0).data<T>(), context_of(c).scratch(), stream_of(c));
    }
};
struct sigmoid_ce_grad_op : ops::sigmoid_ce_op {
    template <class T> static void compute(const KernelContext& c) {
        ck::sigmoid_ce_grad<T>(c.in(X).numel(), c.in(X).data<T>(), c.in(Label).data<T>(), c.in(DOut).data<T>(),
                               c.attr(ignore_index).i, c.attr(normalize).b, c.out(0).data<T>(), context_of(c).scratch(),
                               stream_of(c));
    }
};
struct huber_loss_op : ops::huber_loss_op {
    template <class T> static void compute(const KernelContext& c) {
        ck::huber_loss<T>(c.in(X).numel(), c.in(X).data<T>(), c.in(Y).data<T>(), static_cast<T>(c.attr(delta).f),
                          c.out(Residual).data<T>(), c.out(Out).data<T>(), stream_of(c));
    }
};
struct huber_loss_grad_op : ops::huber_loss_grad_op {
    template <class T> static void compute(const KernelContext& c) {
        ck::huber_loss_grad<T>(c.in(DOut).numel(), c.in(Residual).data<T>(), c.in(DOut).data<T>(),
                               static_cast<T>(c.attr(ops::huber_loss_op::delta).f), out_or_null<T>(c, DX),
                               out_or_null<T>(c, DY), stream_of(c));
    }
};
// smooth_l1's rows: X's first dim, each of the rest's elements.
struct row_split {
    i64 rows, cols;
};
row_split rows_and_cols(const Tensor& x) {
    const i64 rows = x.shape()[0];
    return {rows, rows ? x.numel() / rows : 0};
}
struct smooth_l1_loss_op : ops::smooth_l1_loss_op {
    template <class T> static void compute(const KernelContext& c) {
        const auto g = rows_and_cols(c.in(X));
        const T s = static_cast<T>(c.attr(sigma).f);
        ck::smooth_l1_loss<T>(g.rows, g.cols, c.in(X).data<T>(), c.in(Y).data<T>(), in_or_null<T>(c, InsideWeight),
                              in_or_null<T>(c, OutsideWeight), s * s, c.out(Diff).data<T>(), c.out(Out).data<T>(),
                              stream_of(c));
    }
};
struct smooth_l1_loss_grad_op : ops::smooth_l1_loss_grad_op {
    template <class T> static void compute(const KernelContext& c) {
        const auto g = rows_and_cols(c.in(Diff));
        const T s = static_cast<T>(c.attr(ops::smooth_l1_loss_op::sigma).f);
        ck::smooth_l1_loss_grad<T>(g.rows, g.cols, in_or_null<T>(c, InsideWeight), in_or_null<T>(c, OutsideWeight),
                                   c.in(Diff).data<T>(), c.in(DOut).data<T>(), s * s, out_or_null<T>(c, DX),
                                   out_or_null<T>(c, DY), stream_of(c));
    }
};
// kldiv's reduction and batch (X's first dim) for the kernels.
int kl_reduction_of(const KernelContext& c) {
    return static_cast<int>(ops::kldiv_loss_op::reduction_of(nullptr, c.attr(ops::kldiv_loss_op::reduction).s));
}
i64 kl_batch(const Tensor& x) { return x.rank() ? x.shape()[0] : 1; }
struct kldiv_loss_op : ops::kldiv_loss_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        ck::kldiv_loss<T>(x.numel(), kl_batch(x), kl_reduction_of(c), x.data<T>(), c.in(Target).data<T>(),
                          c.out(0).data<T>(), context_of(c).scratch(), stream_of(c));
    }
};
struct kldiv_loss_grad_op : ops::kldiv_loss_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        ck::kldiv_loss_grad<T>(x.numel(), kl_batch(x), kl_reduction_of(c), c.in(Target).data<T>(), c.in(DLoss).data<T>(),
                               c.out(0).data<T>(), stream_of(c));
    }
};

// ---- layer_norm -----------------------------------------------------------------------------------

// X as [rows, n]: n the product of the dims from begin_norm_axis on.
row_split norm_rows(const Tensor& x, i64 begin_norm_axis) {
    const int a = static_cast<int>(begin_norm_axis);
    return {ops::dim_product(x.shape(), 0, a), ops::dim_product(x.shape(), a, x.rank())};
}
struct layer_norm_op : ops::layer_norm_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        const auto g = norm_rows(x, c.attr(begin_norm_axis).i);
        ck::layer_norm<T>(g.rows, g.cols, x.data<T>(), in_or_null<T>(c, Scale), in_or_null<T>(c, Bias), c.attr(epsilon).f,
                          c.out(Y).data<T>(), out_or_null<T>(c, Mean), out_or_null<T>(c, Variance), stream_of(c));
    }
};
struct layer_norm_grad_op : ops::layer_norm_grad_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        const auto g = norm_rows(x, c.attr(begin_norm_axis).i);
        ck::layer_norm_grad<T>(g.rows, g.cols, x.data<T>(), c.in(DY).data<T>(), in_or_null<T>(c, Scale),
                               c.in(Mean).data<T>(), c.in(Variance).data<T>(), c.attr(epsilon).f, out_or_null<T>(c, DX),
                               out_or_null<T>(c, DScale), out_or_null<T>(c, DBias), context_of(c).scratch(),
                               context_of(c).scratch_bytes(), stream_of(c));
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
                        static_cast<T>(c.attr(rescale_grad).f), static_cast<T>(l2(c.attrs)), c.out(ParamOut).data<T>(),
                        c.out(VelocityOut).data<T>(), stream_of(c));
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

struct adagrad_op : ops::adagrad_op {
    template <class T> static void compute(const KernelContext& c) {
        ck::adagrad<T>(c.in(Param).numel(), c.in(Param).data<T>(), c.in(Grad).data<T>(), c.in(Moment).data<T>(),
                       c.in(LearningRate).data<T>(), static_cast<T>(c.attr(epsilon).f), c.out(ParamOut).data<T>(),
                       c.out(MomentOut).data<T>(), stream_of(c));
    }
};

// rmsprop: MeanGrad is read and written only when centered; otherwise a
// MeanGradOut that is not MeanGrad gets a copy of it, as on the CPU.
struct rmsprop_op : ops::rmsprop_op {
    template <class T> static void compute(const KernelContext& c) {
        const bool cen = c.attr(centered).b;
        const cudaStream_t s = stream_of(c);
        ck::rmsprop<T>(c.in(Param).numel(), c.in(Param).data<T>(), c.in(Grad).data<T>(), c.in(MeanSquare).data<T>(),
                       c.in(Moment).data<T>(), cen ? c.in(MeanGrad).data<T>() : nullptr, c.in(LearningRate).data<T>(),
                       static_cast<T>(c.attr(epsilon).f), static_cast<T>(c.attr(decay).f),
                       static_cast<T>(c.attr(momentum).f), cen, c.out(ParamOut).data<T>(), c.out(MeanSquareOut).data<T>(),
                       c.out(MomentOut).data<T>(), cen ? c.out(MeanGradOut).data<T>() : nullptr, s);
        if (!cen && c.out_count(MeanGradOut))
            copy_bytes(c.out(MeanGradOut).raw(), c.in(MeanGrad).raw(), c.in(MeanGrad).bytes(), s);
    }
};

struct lamb_op : ops::lamb_op {
    template <class T> static void compute(const KernelContext& c) {
        ck::lamb<T>(c.in(Param).numel(), c.in(Param).data<T>(), c.in(Grad).data<T>(), c.in(Moment1).data<T>(),
                    c.in(Moment2).data<T>(), c.in(LearningRate).data<T>(), static_cast<T>(c.attr(beta1).f),
                    static_cast<T>(c.attr(beta2).f), static_cast<T>(c.attr(epsilon).f),
                    static_cast<T>(c.attr(weight_decay).f), c.in(Beta1Pow).data<T>(), c.in(Beta2Pow).data<T>(),
                    c.out(ParamOut).data<T>(), c.out(Moment1Out).data<T>(), c.out(Moment2Out).data<T>(),
                    c.out(Beta1PowOut).data<T>(), c.out(Beta2PowOut).data<T>(), context_of(c).scratch(), stream_of(c));
    }
};

// ---- conv2d, pool2d, batch_norm, dropout ------------------------------------------------------------

// A convolution's geometry (cpu/conv.hpp's conv_products, without the GEMMs).
struct conv_geometry {
    kernels::window2d win;
    i64 images, groups, mg;
    conv_geometry(const Attribute* a, const Shape& x, const Shape& f) {
        const auto [h, w] = ops::conv2d_op::axes(a, x, f);
        groups = a[ops::conv2d_op::groups].i;
        win = ops::window_of(x[1] / groups, h, w);
        images = x[0];
        mg = f[0] / groups;
    }
};
struct conv2d_op : ops::conv2d_op {  // and depthwise_conv2d
    template <class T> static void compute(const KernelContext& c) {
        const conv_geometry g(c.attrs, c.in(Input).shape(), c.in(Filter).shape());
        ck::conv2d<T>(g.win, g.images, g.groups, g.mg, c.in(Input).data<T>(), c.in(Filter).data<T>(), c.out(0).data<T>(),
                      stream_of(c));
    }
};
struct conv2d_grad_op : ops::conv2d_grad_op {
    template <class T> static void compute(const KernelContext& c) {
        const conv_geometry g(c.attrs, c.in(Input).shape(), c.in(Filter).shape());
        ck::conv2d_grad<T>(g.win, g.images, g.groups, g.mg, c.in(Input).data<T>(), c.in(Filter).data<T>(),
                           c.in(DOutput).data<T>(), out_or_null<T>(c, DInput), out_or_null<T>(c, DFilter), stream_of(c));
    }
};

// pool2d's window over one channel, its kind, and the channels (N * C).
struct pool_geometry {
    kernels::window2d win;
    i64 planes;
    bool is_max, adaptive, exclusive;
    pool_geometry(const Attribute* a, const Shape& x) {
        using op = ops::pool2d_op;
        const auto [h, w] = op::axes(a, x);
        win = ops::window_of(1, h, w);
        planes = x[0] * x[1];
        is_max = a[op::pooling_type].s == "max";
        adaptive = a[op::adaptive].b;
        exclusive = a[op::exclusive].b;
    }
};
struct pool2d_op : ops::pool2d_op {
    template <class T> static void compute(const KernelContext& c) {
        const pool_geometry g(c.attrs, c.in(X).shape());
        ck::pool2d<T>(g.win, g.planes, g.is_max, g.adaptive, g.exclusive, c.in(X).data<T>(), c.out(0).data<T>(),
                      stream_of(c));
    }
};
struct pool2d_grad_op : ops::pool2d_grad_op {
    template <class T> static void compute(const KernelContext& c) {
        const pool_geometry g(c.attrs, c.in(X).shape());
        ck::pool2d_grad<T>(g.win, g.planes, g.is_max, g.adaptive, g.exclusive, c.in(X).data<T>(), c.in(Out).data<T>(),
                           c.in(DOut).data<T>(), c.out(0).data<T>(), stream_of(c));
    }
};

// X [N, C, ...] (or [N, ..., C], data_layout NHWC: single elements C
// apart) as batch_norm's channels.
ck::batch_norm_args batch_norm_args_of(const Shape& x, const Attribute* attrs, double eps, bool global) {
    ck::batch_norm_args a;
    if (ops::batch_norm_op::channel_axis(attrs, x.rank()) == 1) {
        a.n = x[0];
        a.c = x[1];
        a.hw = ops::dim_product(x, 2, x.rank());
    } else {
        a.n = ops::dim_product(x, 0, x.rank() - 1);
        a.c = x[x.rank() - 1];
        a.hw = 1;
    }
    a.eps = eps;
    a.global = global;
    return a;
}
struct batch_norm_op : ops::batch_norm_op {
    template <class T> static void compute(const KernelContext& c) {
        ck::batch_norm_args a = batch_norm_args_of(c.in(X).shape(), c.attrs, c.attr(epsilon).f, global_stats(c.attrs));
        a.momentum = c.attr(momentum).f;
        if (c.in_count(MomentumTensor)) {
            a.momentum_tensor = c.in(MomentumTensor).raw();
            a.momentum_fp64 = c.in(MomentumTensor).dtype() == DataType::FP64;
        }
        ck::batch_norm<T>(a, c.in(X).data<T>(), c.in(Scale).data<T>(), c.in(Bias).data<T>(), c.in(Mean).data<T>(),
                          c.in(Variance).data<T>(), c.out(Y).data<T>(), out_or_null<T>(c, MeanOut),
                          out_or_null<T>(c, VarianceOut), out_or_null<T>(c, SavedMean), out_or_null<T>(c, SavedVariance),
                          stream_of(c));
    }
};
struct batch_norm_grad_op : ops::batch_norm_grad_op {
    template <class T> static void compute(const KernelContext& c) {
        const bool global = global_stats(c.attrs);
        const ck::batch_norm_args a =
            batch_norm_args_of(c.in(X).shape(), c.attrs, c.attr(ops::batch_norm_op::epsilon).f, global);
        ck::batch_norm_grad<T>(a, c.in(X).data<T>(), c.in(DY).data<T>(), c.in(Scale).data<T>(),
                               c.in(global ? Mean : SavedMean).data<T>(), c.in(global ? Variance : SavedVariance).data<T>(),
                               out_or_null<T>(c, DX), out_or_null<T>(c, DScale), out_or_null<T>(c, DBias), stream_of(c));
    }
};

// dropout's keep scale: 1, or 1 / (1 - p) upscaled in training (0 for p = 1).
template <class T> T keep_scale_of(const Attribute* a) {
    const double p = a[ops::dropout_op::dropout_prob].f;
    return !ops::dropout_op::upscale(a) ? T(1) : p < 1 ? static_cast<T>(1 / (1 - p)) : T(0);
}
struct dropout_op : ops::dropout_op {
    template <class T> static void compute(const KernelContext& c) {
        const double p = c.attr(dropout_prob).f;
        const bool test = c.attr(is_test).b;
        ck::dropout_seed seed;  // as cpu_ops::dropout_op::seed_of: Seed, else seed with fix_seed, else fresh
        if (c.in_count(Seed)) {
            seed.kind = c.in(Seed).dtype() == DataType::INT64 ? ck::dropout_seed::int64_tensor : ck::dropout_seed::int32_tensor;
            seed.tensor = c.in(Seed).raw();
        } else if (c.attr(fix_seed).b) {
            seed.value = static_cast<std::uint64_t>(c.attr(ops::dropout_op::seed).i);
        } else {
            seed.kind = ck::dropout_seed::fresh;
            seed.state = context_of(c).seed_state();
        }
        const T scale = test ? (upscale(c.attrs) ? T(1) : static_cast<T>(1 - p)) : keep_scale_of<T>(c.attrs);
        ck::dropout<T>(c.in(X).numel(), c.in(X).data<T>(), c.out(Out).data<T>(),
                       c.out_count(Mask) ? c.out(Mask).data<bool>() : nullptr, test, p, scale, seed, stream_of(c));
    }
};
struct dropout_grad_op : ops::dropout_grad_op {
    template <class T> static void compute(const KernelContext& c) {
        ck::dropout_grad<T>(c.in(DOut).numel(), c.in(Mask).data<bool>(), c.in(DOut).data<T>(), c.out(0).data<T>(),
                            keep_scale_of<T>(c.attrs), stream_of(c));
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
template <bool V2> struct matmul_op : ops::matmul_op {  // and matmul_v2 (ops::matmul_flags)
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Tensor& y = c.in(Y);
        const Shape& xs = x.shape();
        const Shape& ys = y.shape();
        const auto f = ops::matmul_flags::of<V2>(c.attrs, xs.rank(), ys.rank());
        const kernels::matmul_view v(xs.begin(), xs.rank(), ys.begin(), ys.rank(), f.tx, f.ty);
        const T al = static_cast<T>(f.alpha);
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

template <bool V2> struct matmul_grad_op : ops::matmul_grad_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Tensor& y = c.in(Y);
        const Shape& xs = x.shape();
        const Shape& ys = y.shape();
        T* dx = c.out_count(DX) ? c.out(DX).data<T>() : nullptr;
        T* dy = c.out_count(DY) ? c.out(DY).data<T>() : nullptr;
        const auto f = ops::matmul_flags::of<V2>(c.attrs, xs.rank(), ys.rank());
        const kernels::matmul_view v(xs.begin(), xs.rank(), ys.begin(), ys.rank(), f.tx, f.ty);
        const T al = static_cast<T>(f.alpha);
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

// Row-major element strides of shape s.
void strides_of(const Shape& s, i64* st) {
    i64 k = 1;
    for (int d = s.rank() - 1; d >= 0; --d) {
        st[d] = k;
        k *= s[d];
    }
}

struct transpose_op : ops::transpose_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        Tensor& y = c.out(0);
        const auto& perm = c.attr(axis).ints;
        ck::permute_walk w;
        w.rank = x.rank();
        i64 xst[max_rank];
        strides_of(x.shape(), xst);
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

// flip: X walked backwards along the flipped dims, from their last element.
struct flip_op : ops::flip_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        bool f[max_rank];
        flipped(nullptr, c.attr(axis).ints, x.shape(), f);
        ck::permute_walk w;
        w.rank = x.rank();
        i64 st[max_rank], base = 0;
        strides_of(x.shape(), st);
        for (int d = 0; d < x.rank(); ++d) {
            w.out_dims[d] = x.shape()[d];
            w.in_st[d] = f[d] ? -st[d] : st[d];
            if (f[d] && x.shape()[d] > 0) base += (x.shape()[d] - 1) * st[d];
        }
        using W = word_of<sizeof(T)>;
        ck::permute<W>(x.numel(), w, static_cast<const W*>(x.raw()) + base, static_cast<W*>(c.out(0).raw()), stream_of(c));
    }
};

// The box of `whole` that starts at start[d] and spans sub[d] along each
// dim, walked from its first element (at `base`).
ck::permute_walk box_walk_of(const Shape& whole, const i64* start, const i64* sub, i64& base) {
    i64 st[max_rank];
    strides_of(whole, st);
    ck::permute_walk w;
    w.rank = whole.rank();
    base = 0;
    for (int d = 0; d < whole.rank(); ++d) {
        w.out_dims[d] = sub[d];
        w.in_st[d] = st[d];
        base += start[d] * st[d];
    }
    return w;
}
// slice: the box walked from its first element (ops::slice_op::box);
// slice_grad: zeros, and Out@GRAD written back into the box.
ck::permute_walk box_walk(const KernelContext& c, const Shape& in, i64& base) {
    i64 start[max_rank], sub[max_rank];
    ops::slice_op::box(nullptr, c.attrs, in, start, sub);
    return box_walk_of(in, start, sub, base);
}
struct slice_op : ops::slice_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(Input);
        i64 base = 0;
        const ck::permute_walk w = box_walk(c, x.shape(), base);
        using W = word_of<sizeof(T)>;
        ck::permute<W>(c.out(0).numel(), w, static_cast<const W*>(x.raw()) + base, static_cast<W*>(c.out(0).raw()),
                       stream_of(c));
    }
};
struct slice_grad_op : ops::slice_grad_op {
    template <class T> static void compute(const KernelContext& c) {
        Tensor& dx = c.out(0);
        const cudaStream_t s = stream_of(c);
        if (dx.bytes()) check(cudaMemsetAsync(dx.raw(), 0, dx.bytes(), s), "cudaMemsetAsync");
        i64 base = 0;
        const ck::permute_walk w = box_walk(c, c.in(Input).shape(), base);
        using W = word_of<sizeof(T)>;
        ck::unpermute<W>(c.in(DOut).numel(), w, static_cast<const W*>(c.in(DOut).raw()), static_cast<W*>(dx.raw()) + base, s);
    }
};

// pad: pad_value everywhere, then X written into its box of Out; pad_grad:
// that box of Out@GRAD.
struct pad_op : ops::pad_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        Tensor& out = c.out(0);
        const cudaStream_t s = stream_of(c);
        i64 before[max_rank], after[max_rank], base = 0;
        split(nullptr, c.attr(paddings).ints, x.rank(), before, after);
        ck::fill<T>(out.numel(), out.data<T>(), kernels::convert<T>(c.attr(pad_value).f), s);
        const ck::permute_walk w = box_walk_of(out.shape(), before, x.shape().begin(), base);
        using W = word_of<sizeof(T)>;
        ck::unpermute<W>(x.numel(), w, static_cast<const W*>(x.raw()), static_cast<W*>(out.raw()) + base, s);
    }
};
struct pad_grad_op : ops::pad_grad_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& d = c.in(DOut);
        Tensor& dx = c.out(0);
        i64 before[max_rank], after[max_rank], base = 0;
        ops::pad_op::split(nullptr, c.attr(ops::pad_op::paddings).ints, d.rank(), before, after);
        const ck::permute_walk w = box_walk_of(d.shape(), before, dx.shape().begin(), base);
        using W = word_of<sizeof(T)>;
        ck::permute<W>(dx.numel(), w, static_cast<const W*>(d.raw()) + base, static_cast<W*>(dx.raw()), stream_of(c));
    }
};

// tile, expand, expand_v2 and their gradients: the op's geometry as a tile_walk.
template <ops::tile_kind K> ck::tile_walk tile_walk_of(const KernelContext& c) {
    i64 xd[max_rank], reps[max_rank], out[max_rank];
    ck::tile_walk w;
    w.rank = ops::tile_op<K>::geometry(nullptr, c.in(0).shape(), c.attr(0).ints, xd, reps, out);
    for (int d = 0; d < w.rank; ++d) {
        w.x_dims[d] = xd[d];
        w.out_dims[d] = xd[d] * reps[d];
    }
    return w;
}
template <ops::tile_kind K> struct tile_op {
    template <class T> static void compute(const KernelContext& c) {
        using W = word_of<sizeof(T)>;
        Tensor& y = c.out(0);
        ck::tile<W>(y.numel(), tile_walk_of<K>(c), static_cast<const W*>(c.in(0).raw()), static_cast<W*>(y.raw()), stream_of(c));
    }
};
template <ops::tile_kind K> struct tile_grad_op {
    template <class T> static void compute(const KernelContext& c) {
        Tensor& dx = c.out(0);
        ck::tile_grad<T>(dx.numel(), tile_walk_of<K>(c), c.in(ops::tile_op<K>::DOut).template data<T>(), dx.data<T>(),
                         stream_of(c));
    }
};

// gather, scatter and their gradients; Index / Ids INT32 or INT64.
struct gather_op : ops::gather_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Tensor& idx = c.in(Index);
        const ops::axis_split g = ops::split_at_axis(x.shape(), c.attr(axis).i);
        ck::gather<T>(g.outer, g.d, g.inner, x.data<T>(), idx.raw(), idx.dtype() == DataType::INT32, idx.numel(),
                      c.out(0).data<T>(), fault_of(c), stream_of(c));
    }
};
struct gather_grad_op : ops::gather_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Tensor& idx = c.in(Index);
        const ops::axis_split g = ops::split_at_axis(x.shape(), c.attr(axis).i);
        ck::gather_grad<T>(g.outer, g.d, g.inner, idx.raw(), idx.dtype() == DataType::INT32, idx.numel(),
                           c.in(DOut).data<T>(), overwrites(c.attrs, x.rank()), c.out(0).data<T>(), fault_of(c), stream_of(c));
    }
};
struct scatter_op : ops::scatter_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Tensor& ids = c.in(Ids);
        const i64 rows = x.shape()[0], inner = rows ? x.numel() / rows : 0;
        ck::scatter<T>(rows, inner, x.data<T>(), ids.raw(), ids.dtype() == DataType::INT32, ids.numel(),
                       c.in(Updates).data<T>(), c.attr(overwrite).b, c.out(0).data<T>(), fault_of(c), stream_of(c));
    }
};
struct scatter_grad_op : ops::scatter_grad_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& d = c.in(DOut);
        const Tensor& ids = c.in(Ids);
        const i64 rows = d.shape()[0], inner = rows ? d.numel() / rows : 0;
        ck::scatter_grad<T>(rows, inner, ids.raw(), ids.dtype() == DataType::INT32, ids.numel(), d.data<T>(),
                            c.out_count(DX) ? c.out(DX).data<T>() : nullptr,
                            c.out_count(DUpdates) ? c.out(DUpdates).data<T>() : nullptr, fault_of(c), stream_of(c));
    }
};

// ---- arg_max, arg_min, cumsum, one_hot ----------------------------------------------------------

template <bool Max> struct arg_extreme_op : ops::arg_extreme_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(0);
        Tensor& out = c.out(0);
        const ops::axis_split g = ops::split_or_flatten(x.shape(), c.attr(axis).i, c.attr(flatten).b);
        if (out.dtype() == DataType::INT32)
            ck::arg_extreme<T>(Max, g.outer, g.d, g.inner, x.data<T>(), out.data<std::int32_t>(), stream_of(c));
        else
            ck::arg_extreme<T>(Max, g.outer, g.d, g.inner, x.data<T>(), out.data<i64>(), stream_of(c));
    }
};
// cumsum's gradient is the cumsum of Out@GRAD the other way round.
template <bool Grad> struct cumsum_op : ops::cumsum_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(Grad ? DOut : X);
        const ops::axis_split g = ops::split_or_flatten(x.shape(), c.attr(axis).i, c.attr(flatten).b);
        ck::cumsum<T>(g.outer, g.d, g.inner, x.data<T>(), c.out(0).data<T>(), c.attr(exclusive).b,
                      c.attr(reverse).b != Grad, stream_of(c));
    }
};
// Ids of type I (the kernel's), Out of the dtype the attribute gave it.
template <bool V2> struct one_hot_op : ops::one_hot_op<V2> {
    using base = ops::one_hot_op<V2>;
    template <class I> static void compute(const KernelContext& c) {
        const Tensor& ids = c.in(0);
        Tensor& out = c.out(0);
        visit_dtype(out.dtype(), [&]<class T>(type_tag<T>) {
            if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int32_t> ||
                          std::is_same_v<T, i64>)
                ck::one_hot<T>(ids.numel(), c.attr(base::depth).i, ids.raw(), std::is_same_v<I, std::int32_t>,
                               c.attr(base::allow_out_of_range).b, out.data<T>(), fault_of(c), stream_of(c));
        });
    }
};

// ---- comparisons, logical ops, where, top_k, accuracy ------------------------------------------

template <ck::cmpop Op, bool WithAxis = true> struct compare_op : ops::compare_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Tensor& y = c.in(Y);
        Tensor& z = c.out(0);
        ck::compare<T>(Op, z.numel(), x.data<T>(), y.data<T>(), z.data<bool>(),
                       strides_of(x.shape(), y.shape(), WithAxis ? c.attr(axis).i : -1, z.shape()), stream_of(c));
    }
};
struct logical_not_op {
    template <class T> static void compute(const KernelContext& c) {
        ck::logical_not<T>(c.in(0).numel(), c.in(0).data<T>(), c.out(0).data<bool>(), stream_of(c));
    }
};
struct where_op : ops::where_op {
    template <class T> static void compute(const KernelContext& c) {
        ck::where<T>(c.in(X).numel(), c.in(Condition).data<bool>(), c.in(X).data<T>(), c.in(Y).data<T>(),
                     c.out(0).data<T>(), stream_of(c));
    }
};
struct where_grad_op : ops::where_op {
    template <class T> static void compute(const KernelContext& c) {
        ck::where_grad<T>(c.in(DOut).numel(), c.in(Condition).data<bool>(), c.in(DOut).data<T>(),
                          c.out_count(DX) ? c.out(DX).data<T>() : nullptr, c.out_count(DY) ? c.out(DY).data<T>() : nullptr,
                          stream_of(c));
    }
};
struct top_k_op : ops::top_k_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(X);
        const Shape& xs = x.shape();
        const i64 n = xs[xs.rank() - 1], rows = ops::dim_product(xs, 0, xs.rank() - 1), kk = c.attr(k).i;
        // Inference refuses such a k; this guards against a stale plan, as the CPU kernel does.
        if (kk < 0 || kk > n) return c.fault->raise(kernels::fault{kernels::fault_code::k_out_of_range, kk, n});
        ck::top_k<T>(rows, n, kk, x.data<T>(), c.out(Out).data<T>(), c.out(Indices).data<i64>(), stream_of(c));
    }
};
struct accuracy_op : ops::accuracy_op {
    template <class T> static void compute(const KernelContext& c) {  // Out's values are not read
        const Tensor& ind = c.in(Indices);
        ck::accuracy(ind.shape()[0], ind.shape()[1], ind.data<i64>(), c.in(Label).data<i64>(),
                     c.out(Accuracy).data<float>(), c.out(Correct).data<std::int32_t>(),
                     c.out(Total).data<std::int32_t>(), stream_of(c));
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

// stack and unstack_grad: input 0's parts joined along a new dim; unstack
// and stack_grad: input 0 cut along a dim into the outputs. Each part is
// one index of that dim.
struct stack_op {
    template <class T> static void compute(const KernelContext& c) {
        Tensor& out = c.out(0);
        copy_parts(out.raw(), out.shape(), normal_axis(c.attr(0).i, out.rank()), sizeof(T), c.in_count(0),
                   [&](int k) { return std::pair{const_cast<void*>(c.in(0, k).raw()), i64{1}}; }, true, stream_of(c));
    }
};
struct unstack_op {
    template <class T> static void compute(const KernelContext& c) {
        const Tensor& x = c.in(0);
        copy_parts(const_cast<void*>(x.raw()), x.shape(), normal_axis(c.attr(0).i, x.rank()), sizeof(T), c.out_count(0),
                   [&](int k) { return std::pair{c.out(0, k).raw(), i64{1}}; }, false, stream_of(c));
    }
};

// ---- collectives, over NCCL ---------------------------------------------------------------------
//
// Placed on the device only for a ring whose communicator moves GPU memory
// (make_plan's device_rings): an nccl::Communicator of this context's GPU.
// Queued on the step's stream; the context's next wait watches the
// communicator (an error or a timeout aborts it rather than waiting
// forever). Not recorded into CUDA graphs: a replay would queue the
// collective with no wait watching it.
nccl::Communicator& nccl_of(const KernelContext& c, const char* what) {
    auto* n = dynamic_cast<nccl::Communicator*>(c.comm);
    if (!n)
        throw comm_error("dlgraph.comm.memory", std::string(what) + ": the ring's communicator (" +
                                                    (c.comm ? c.comm->describe() : std::string("none")) +
                                                    ") does not move GPU memory");
    return *n;
}
cudaStream_t collective_stream(const KernelContext& c, nccl::Communicator& n, const char* what) {
    cuda_context& ctx = context_of(c);
    if (n.device() != ctx.device())
        throw comm_error("dlgraph.comm.device", std::string(what) + ": the ring's communicator (" + n.describe() +
                                                    ") is on another GPU than the session (GPU " +
                                                    std::to_string(ctx.device()) + ")");
    const cudaStream_t s = stream_of(c);
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(s, &capture) == cudaSuccess && capture != cudaStreamCaptureStatusNone)
        throw session_error("dlgraph.cuda.unrecordable", std::string(what) + " is not recorded into a CUDA graph");
    ctx.watch(&n);
    return s;
}
template <ReduceOp R> struct c_allreduce_op {
    template <class T> static void compute(const KernelContext& c) {
        const char* what = ops::allreduce_type(R);
        nccl::Communicator& n = nccl_of(c, what);
        const cudaStream_t s = collective_stream(c, n, what);
        n.all_reduce_on(c.in(0).raw(), c.out(0).raw(), c.out(0).numel(), dtype_of<T>, R, s, what);
    }
};
struct c_broadcast_op {
    template <class T> static void compute(const KernelContext& c) {
        nccl::Communicator& n = nccl_of(c, "c_broadcast");
        const cudaStream_t s = collective_stream(c, n, "c_broadcast");
        n.broadcast_on(c.in(0).raw(), c.out(0).raw(), c.out(0).numel(), dtype_of<T>,
                       static_cast<int>(c.attr(ops::c_broadcast_op::root).i), s, "c_broadcast");
    }
};
struct c_allgather_op {
    template <class T> static void compute(const KernelContext& c) {
        nccl::Communicator& n = nccl_of(c, "c_allgather");
        if (c.attr(ops::c_allgather_op::nranks).i != n.size())
            throw comm_error("dlgraph.comm.size", "c_allgather: nranks is " +
                                                      std::to_string(c.attr(ops::c_allgather_op::nranks).i) +
                                                      " but the communicator (" + n.describe() + ") has " +
                                                      std::to_string(n.size()) + " ranks");
        const cudaStream_t s = collective_stream(c, n, "c_allgather");
        n.all_gather_on(c.in(0).raw(), c.out(0).raw(), c.in(0).numel(), dtype_of<T>, s, "c_allgather");
    }
};

// ---- the table ------------------------------------------------------------------------------------------

template <class Op> table_entry arith() { return table_of<Op, float, double, std::int32_t, std::int64_t>(); }
template <class Op> table_entry floats() { return table_of<Op, float, double>(); }
template <class Op> table_entry stored() {
    return table_of<Op, bool, std::int16_t, std::int32_t, std::int64_t, float16, float, double>();
}
template <class Op> table_entry logic() { return table_of<Op, bool, std::int32_t, std::int64_t, float, double>(); }
template <class Op> table_entry numbers() { return table_of<Op, bool, std::int16_t, std::int32_t, std::int64_t, float, double>(); }

std::array<table_entry, op_count> make_table() {
    std::array<table_entry, op_count> t{};
    auto set = [&](op_id id, table_entry k) { t[static_cast<std::size_t>(id)] = k; };
    using ck::binop;
    using ck::unop;
    set(op_id::elementwise_add, arith<binary_op<binop::add>>());
    set(op_id::elementwise_sub, arith<binary_op<binop::sub>>());
    set(op_id::elementwise_mul, arith<binary_op<binop::mul>>());
    set(op_id::elementwise_div, arith<binary_op<binop::div>>());
    set(op_id::elementwise_max, arith<binary_op<binop::max>>());
    set(op_id::elementwise_mod, arith<binary_op<binop::mod>>());
    set(op_id::elementwise_floordiv, arith<binary_op<binop::floordiv>>());
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
    set(op_id::reduce_prod_grad, floats<reduce_prod_grad_op>());
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
    set(op_id::matmul, floats<matmul_op<false>>());
    set(op_id::matmul_grad, floats<matmul_grad_op<false>>());
    set(op_id::matmul_v2, floats<matmul_op<true>>());
    set(op_id::matmul_v2_grad, floats<matmul_grad_op<true>>());
    set(op_id::transpose, stored<transpose_op>());
    set(op_id::concat, stored<concat_op>());
    set(op_id::concat_grad, stored<split_op<ops::concat_grad_op::DOut, ops::concat_grad_op::axis>>());
    set(op_id::split, stored<split_op<ops::split_op::X, ops::split_op::axis>>());
    set(op_id::stack, stored<stack_op>());
    using ops::tile_kind;
    set(op_id::tile, table_of<tile_op<tile_kind::tile>, bool, std::int32_t, i64, float, double>());
    set(op_id::expand, table_of<tile_op<tile_kind::expand>, bool, std::int32_t, i64, float, double>());
    set(op_id::expand_v2, table_of<tile_op<tile_kind::expand_v2>, bool, std::int32_t, i64, float, double>());
    set(op_id::tile_grad, floats<tile_grad_op<tile_kind::tile>>());
    set(op_id::expand_grad, floats<tile_grad_op<tile_kind::expand>>());
    set(op_id::expand_v2_grad, floats<tile_grad_op<tile_kind::expand_v2>>());
    set(op_id::pad, arith<pad_op>());
    set(op_id::pad_grad, floats<pad_grad_op>());
    set(op_id::gather, arith<gather_op>());
    set(op_id::gather_grad, floats<gather_grad_op>());
    set(op_id::scatter, arith<scatter_op>());
    set(op_id::scatter_grad, floats<scatter_grad_op>());
    set(op_id::unstack, stored<unstack_op>());
    set(op_id::stack_grad, floats<unstack_op>());
    set(op_id::unstack_grad, floats<stack_op>());
    set(op_id::flip, stored<flip_op>());
    set(op_id::flatten_contiguous_range, stored<copy_op<ops::flatten_contiguous_range_op::X>>());  // XShape: no elements
    set(op_id::flatten_contiguous_range_grad, stored<copy_op<ops::flatten_contiguous_range_grad_op::DOut>>());
    set(op_id::increment, arith<increment_op>());
    set(op_id::slice, stored<slice_op>());
    set(op_id::slice_grad, stored<slice_grad_op>());
    using ck::cmpop;
    set(op_id::less_than, logic<compare_op<cmpop::less_than>>());
    set(op_id::less_equal, logic<compare_op<cmpop::less_equal>>());
    set(op_id::greater_than, logic<compare_op<cmpop::greater_than>>());
    set(op_id::greater_equal, logic<compare_op<cmpop::greater_equal>>());
    set(op_id::equal, logic<compare_op<cmpop::equal>>());
    set(op_id::not_equal, logic<compare_op<cmpop::not_equal>>());
    set(op_id::logical_and, logic<compare_op<cmpop::logical_and, false>>());
    set(op_id::logical_or, logic<compare_op<cmpop::logical_or, false>>());
    set(op_id::logical_xor, logic<compare_op<cmpop::logical_xor, false>>());
    set(op_id::logical_not, logic<logical_not_op>());
    set(op_id::where, arith<where_op>());
    set(op_id::where_grad, floats<where_grad_op>());
    set(op_id::top_k, arith<top_k_op>());
    set(op_id::reduce_all, table_of<reduce_op<ck::redop::all>, bool>());
    set(op_id::reduce_any, table_of<reduce_op<ck::redop::any>, bool>());
    set(op_id::arg_max, arith<arg_extreme_op<true>>());
    set(op_id::arg_min, arith<arg_extreme_op<false>>());
    set(op_id::cumsum, arith<cumsum_op<false>>());
    set(op_id::cumsum_grad, floats<cumsum_op<true>>());
    set(op_id::one_hot, table_of<one_hot_op<false>, std::int32_t, i64>());
    set(op_id::one_hot_v2, table_of<one_hot_op<true>, std::int32_t, i64>());
    set(op_id::accuracy, arith<accuracy_op>());
    set(op_id::bce_loss, floats<bce_loss_op>());
    set(op_id::bce_loss_grad, floats<bce_loss_grad_op>());
    set(op_id::sigmoid_cross_entropy_with_logits, floats<sigmoid_ce_op>());
    set(op_id::sigmoid_cross_entropy_with_logits_grad, floats<sigmoid_ce_grad_op>());
    set(op_id::huber_loss, floats<huber_loss_op>());
    set(op_id::huber_loss_grad, floats<huber_loss_grad_op>());
    set(op_id::smooth_l1_loss, floats<smooth_l1_loss_op>());
    set(op_id::smooth_l1_loss_grad, floats<smooth_l1_loss_grad_op>());
    set(op_id::kldiv_loss, floats<kldiv_loss_op>());
    set(op_id::kldiv_loss_grad, floats<kldiv_loss_grad_op>());
    set(op_id::layer_norm, floats<layer_norm_op>());
    set(op_id::layer_norm_grad, floats<layer_norm_grad_op>());
    set(op_id::adagrad, floats<adagrad_op>());
    set(op_id::rmsprop, floats<rmsprop_op>());
    set(op_id::lamb, floats<lamb_op>());
    set(op_id::conv2d, floats<conv2d_op>());
    set(op_id::depthwise_conv2d, floats<conv2d_op>());
    set(op_id::conv2d_grad, floats<conv2d_grad_op>());
    set(op_id::depthwise_conv2d_grad, floats<conv2d_grad_op>());
    set(op_id::pool2d, floats<pool2d_op>());
    set(op_id::pool2d_grad, floats<pool2d_grad_op>());
    set(op_id::batch_norm, floats<batch_norm_op>());
    set(op_id::batch_norm_grad, floats<batch_norm_grad_op>());
    set(op_id::dropout, floats<dropout_op>());
    set(op_id::dropout_grad, floats<dropout_grad_op>());
    set(op_id::c_allreduce_sum, arith<c_allreduce_op<ReduceOp::sum>>());
    set(op_id::c_allreduce_max, arith<c_allreduce_op<ReduceOp::max>>());
    set(op_id::c_allreduce_min, arith<c_allreduce_op<ReduceOp::min>>());
    set(op_id::c_allreduce_prod, arith<c_allreduce_op<ReduceOp::prod>>());
    set(op_id::c_broadcast, stored<c_broadcast_op>());
    set(op_id::c_allgather, stored<c_allgather_op>());
    return t;
}

const table_entry* entry_of(const OpDef& def) noexcept {
    static const std::array<table_entry, op_count> table = make_table();
    const OpDef* d = detail::find_builtin_op(def.type);
    return d ? &table[static_cast<std::size_t>(d - op_table().data())] : nullptr;
}

// A fused chain (fusion.hpp) as one kernel; as its steps one by one where a
// broadcast operand shares memory with the output (see fusion.hpp).
static_assert(ck::max_fused_steps == max_device_chain);
void run_chain(const KernelContext& c) {
    const auto& ch = *static_cast<const detail::fused_chain*>(c.fused);
    if (detail::broadcast_overlaps_out(ch)) return detail::run_unfused(ch);
    ck::fused_program p;
    p.count = static_cast<int>(ch.instrs.size());
    p.n = ch.n;
    p.row = ch.row;
    for (std::size_t k = 0; k < ch.instrs.size(); ++k) {
        const auto& in = ch.instrs[k];
        p.steps[k] = {in.code, static_cast<int>(in.x.kind), static_cast<int>(in.y.kind), in.x.t ? in.x.t->raw() : nullptr,
                      in.y.t ? in.y.t->raw() : nullptr};
    }
    if (ch.elem == sizeof(float)) ck::fused<float>(p, static_cast<float*>(ch.out->raw()), stream_of(c));
    else ck::fused<double>(p, static_cast<double*>(ch.out->raw()), stream_of(c));
}

}  // namespace

KernelFn cuda_kernel(const OpDef& def, DataType t) noexcept {
    const table_entry* e = entry_of(def);
    if (!e) return def.device_kernel("cuda", t);  // a registered op brings its own, or runs on the host
    // Only where the CPU has a kernel too: the op is valid at that dtype.
    if (!def.supports(t)) return nullptr;
    return e->kernels[static_cast<std::size_t>(t)];
}

int cuda_fused_code(const OpDef& def, DataType t) noexcept {
    const table_entry* e = entry_of(def);
    if (!e || def.fusible.arity == 0 || (t != DataType::FP32 && t != DataType::FP64) || !cuda_kernel(def, t)) return -1;
    // The code's operands are the op's fused ones (one, or two).
    const int arity = e->fused < 0 ? 0 : ck::fused_kind_of(e->fused) == ck::fused_kind::unary ? 1 : 2;
    return arity == def.fusible.arity ? e->fused : -1;
}

KernelFn cuda_chain_kernel() noexcept { return run_chain; }

}  // namespace dlgraph::cuda_detail
