// The CUDA backend's device code, as seen from host C++: launchers on raw
// device pointers, extents and small geometry structs, each queueing one or
// two kernels on a stream and returning at once. They are defined in
// src/cuda/kernels.cu (nvcc) for the element types listed there; the op
// glue (src/cuda/ops.cpp, a plain C++ file) reads a step's tensors and
// attributes and calls them. This header includes no CUDA header, so g++
// compiles everything but the kernels.
//
// The per-element math is the kernel core's (kernels/elementwise.hpp: its
// functors are __host__ __device__), so a device computes what the CPU does;
// sums may add in another order (block reductions), and exp, log, tanh and
// pow come from CUDA's math library.
#pragma once

#include <cstddef>
#include <cstdint>

#include "dlgraph/kernels/conv.hpp"  // window2d

struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace dlgraph::cuda_kernels {

using stream_t = CUstream_st*;
inline constexpr int max_rank = 8;

// A fault a device kernel met (kernels::fault_code and its facts), in the
// context's device memory; the context reads it at each synchronization
// and resets it (code 0, first_row all ones). The first fault wins; for a
// label out of range that is the lowest bad row, as on the CPU: kernels
// note bad rows in first_row and a one-thread kernel queued after them
// records the fault of the lowest.
struct device_fault {
    int code;
    long long a, b, c;
    unsigned long long first_row;
};

enum class binop : int { add, sub, mul, div, max, min, pow, mod, floordiv };
enum class unop : int {
    relu, sigmoid, tanh, exp, log, sqrt, abs, square,
    softsign, sin, cos, reciprocal, rsqrt, floor, ceil, round, sign, gelu, gelu_tanh,
    // with attributes (unary_params): kernels/elementwise.hpp's Fn<T>{p[0], ...}
    leaky_relu, elu, relu6, hard_sigmoid, hard_swish, softplus, swish, clip, pow
};
// A fused chain's op (DeviceContext::fused_code): its kind and its binop or
// unop. fused_grad is a unary op's gradient as a binary step:
// z = F.grad(v, v, dout) of (dout, v), v being the X or Out it reads.
enum class fused_kind : int { binary = 1, unary = 2, grad = 3 };
inline constexpr int fused_code_of(fused_kind k, int op) { return static_cast<int>(k) << 8 | op; }
inline constexpr fused_kind fused_kind_of(int code) { return static_cast<fused_kind>(code >> 8); }
inline constexpr int fused_op_of(int code) { return code & 0xff; }

// A unary op's FLOAT attributes, in the op's order.
struct unary_params {
    double p[3] = {};
};
// mean: times 1/count (reduce_mean); mean_all: divided by count (mean).
// all, any: BOOL only (reduce_all, reduce_any).
enum class redop : int { sum, mean, mean_all, max, min, prod, all, any };

// How a broadcasting binary op walks its output of `rank` dims zs: X's and
// Y's element strides per output dim (0 along a dim broadcast).
struct broadcast_strides {
    int rank = 0;
    std::int64_t zs[max_rank] = {}, xst[max_rank] = {}, yst[max_rank] = {};
};

// z[i] = op(x[.], y[.]) for the n elements of z. An integer division by zero
// records fault div_by_zero (the element gets 0).
template <class T>
void binary(binop op, std::int64_t n, const T* x, const T* y, T* z, const broadcast_strides& g, device_fault* f,
            stream_t s);
// The gradients of z = op(x, y): dx (xn elements) and dy (yn elements),
// each summed over the output elements its element reached; either may be
// null (not wanted).
// A broadcast operand's gradient is a reduction: `scratch` as for reduce below.
template <class T>
void binary_grad(binop op, std::int64_t n, std::int64_t xn, std::int64_t yn, const T* x, const T* y, const T* out,
                 const T* dout, T* dx, T* dy, const broadcast_strides& g, void* scratch, std::size_t scratch_bytes,
                 stream_t s);
template <class T> void unary(unop op, const unary_params& p, std::int64_t n, const T* x, T* z, stream_t s);
template <class T>
void unary_grad(unop op, const unary_params& p, std::int64_t n, const T* x, const T* out, const T* dout, T* dx,
                stream_t s);
// An element-wise chain as one kernel: for each of the n elements of z, the
// steps in order, each computing the running value from its operands (the
// running value itself, a tensor of n elements, a single element, or a row
// of `row` elements repeated), and z gets the last. Operand kinds are
// FusedOperand's (planner.hpp): 0 running, 1 full, 2 scalar, 3 row.
inline constexpr int max_fused_steps = 32;  // = max_device_chain
struct fused_step {
    int code = 0;      // fused_code_of
    int xk = 0, yk = 0;
    const void* x = nullptr;
    const void* y = nullptr;
};
struct fused_program {
    int count = 0;
    std::int64_t n = 0, row = 0;
    fused_step steps[max_fused_steps];
};
template <class T> void fused(const fused_program& p, T* z, stream_t s);
// z = s * x + b (bias_after) or s * (x + b).
template <class T> void scale(std::int64_t n, const T* x, T* z, T sc, T b, bool bias_after, stream_t s);
template <class T> void fill(std::int64_t n, T* z, T v, stream_t s);
// z = convert<D>(x) (kernels::convert: saturating, NaN to 0).
template <class S, class D> void cast(std::int64_t n, const S* x, D* z, stream_t s);
// z += x (sum's accumulation; integers wrap).
template <class T> void add_into(std::int64_t n, const T* x, T* z, stream_t s);

// A reduction: each of `outputs` output elements (the kept dims, row-major)
// folds `count` elements of X (the reduced dims, row-major). An output
// element's first X offset is sum(kept index * kept_st); its k-th folded
// element adds sum(reduced index * red_st).
struct reduce_walk {
    int kept_rank = 0, red_rank = 0;
    std::int64_t kept_ext[max_rank] = {}, kept_st[max_rank] = {}, red_ext[max_rank] = {}, red_st[max_rank] = {};
    std::int64_t outputs = 0, count = 0;
};
// The walk of a tensor of `rank` dims `ext` (row-major) whose dims flagged in
// `red` are folded. Dims of extent 1 are left out and neighbours of one kind
// merged, so that a row, a column or a whole-tensor reduction is one
// reduced dim (the kernels' fast cases).
inline reduce_walk reduce_walk_of(int rank, const std::int64_t* ext, const bool* red) {
    reduce_walk w;
    std::int64_t st = 1;
    std::int64_t kst[max_rank], rst[max_rank], kext[max_rank], rext[max_rank];
    int nk = 0, nr = 0;
    int last = -1;  // the kind of the dim walked last (1: reduced), -1 before any
    for (int d = rank - 1; d >= 0; --d) {
        if (ext[d] == 1) continue;
        const int kind = red[d] ? 1 : 0;
        std::int64_t* e = kind ? rext : kext;
        int& n = kind ? nr : nk;
        if (kind == last) {
            e[n - 1] *= ext[d];
        } else {
            e[n] = ext[d];
            (kind ? rst : kst)[n++] = st;
        }
        last = kind;
        st *= ext[d];
    }
    // Collected from the last dim: store them first dim first.
    w.kept_rank = nk;
    w.red_rank = nr;
    w.outputs = 1;
    w.count = 1;
    for (int i = 0; i < nk; ++i) {
        w.kept_ext[i] = kext[nk - 1 - i];
        w.kept_st[i] = kst[nk - 1 - i];
        w.outputs *= w.kept_ext[i];
    }
    for (int i = 0; i < nr; ++i) {
        w.red_ext[i] = rext[nr - 1 - i];
        w.red_st[i] = rst[nr - 1 - i];
        w.count *= w.red_ext[i];
    }
    return w;
}
// `scratch` (device memory, may be null) holds partial results when one
// output's elements are folded by several blocks: the context lends the
// cuBLAS workspace, which no cuBLAS call uses while a reduction runs on the
// same stream.
template <class T>
void reduce(redop op, const reduce_walk& w, const T* x, T* y, void* scratch, std::size_t scratch_bytes, stream_t s);
// Sends Out@GRAD back over X's n elements: dims and Out's strides per X dim
// (0 on a reduced dim). sum: dout; mean: dout * scale; mean_all: dout /
// scale; max: dout where x equals out.
struct reduce_grad_walk {
    int rank = 0;
    std::int64_t dims[max_rank] = {}, ost[max_rank] = {};
    std::int64_t n = 0;
};
template <class T>
void reduce_grad(redop op, const reduce_grad_walk& w, const T* x, const T* out, const T* dout, T* dx, T scale,
                 stream_t s);
// reduce_prod's gradient (kernels::reduce_prod_grad): one block per output
// element counts its group's zeros and multiplies its nonzeros, then writes
// the group's dx.
template <class T>
void reduce_prod_grad(const reduce_walk& w, const T* x, const T* out, const T* dout, T* dx, stream_t s);

// Softmax along the middle dim of [outer, d, inner] (d > 0) and its gradient.
template <class T> void softmax(std::int64_t outer, std::int64_t d, std::int64_t inner, const T* x, T* y, stream_t s);
template <class T>
void softmax_grad(std::int64_t outer, std::int64_t d, std::int64_t inner, const T* y, const T* dy, T* dx, stream_t s);
// Rows of a [rows, d] table W picked by n ids (int32 when ids32, else int64):
// out[i, :] = W[ids[i], :], 0 where the id is `pad` (unless it is -1); and
// the gradient dw = 0, dw[ids[i], :] += dout[i, :] in order. An id out of
// [0, rows) records fault id_out_of_range (the lowest position's).
template <class T>
void lookup_table(std::int64_t rows, std::int64_t d, const T* w, const void* ids, bool ids32, std::int64_t n,
                  std::int64_t pad, T* out, device_fault* f, stream_t s);
template <class T>
void lookup_table_grad(std::int64_t rows, std::int64_t d, const void* ids, bool ids32, std::int64_t n, std::int64_t pad,
                       const T* dout, T* dw, device_fault* f, stream_t s);
// log_softmax along the middle dim of [outer, d, inner] (d > 0) and its gradient.
template <class T>
void log_softmax(std::int64_t outer, std::int64_t d, std::int64_t inner, const T* x, T* y, stream_t s);
template <class T>
void log_softmax_grad(std::int64_t outer, std::int64_t d, std::int64_t inner, const T* y, const T* dy, T* dx,
                      stream_t s);
// Losses over `rows` rows of d classes; a hard label is an int64 class per
// row (one out of [0, d) records fault label_out_of_range; one equal to
// `ignore` has loss and gradient 0), a soft one a [rows, d] distribution of T.
template <class T>
void cross_entropy(bool soft, std::int64_t rows, std::int64_t d, const T* x, const void* label, std::int64_t ignore,
                   T* y, device_fault* f, stream_t s);
template <class T>
void cross_entropy_grad(bool soft, std::int64_t rows, std::int64_t d, const T* x, const void* label,
                        std::int64_t ignore, const T* dy, T* dx, device_fault* f, stream_t s);
template <class T>
void softmax_with_cross_entropy(bool soft, std::int64_t rows, std::int64_t d, const T* logits, const void* label,
                                std::int64_t ignore, T* softmax, T* loss, device_fault* f, stream_t s);
template <class T>
void softmax_with_cross_entropy_grad(bool soft, std::int64_t rows, std::int64_t d, const void* label,
                                     std::int64_t ignore, const T* softmax, const T* dloss, T* dx, device_fault* f,
                                     stream_t s);

// Optimizers; scalars that are tensors (learning rate, beta powers) stay in
// device memory and are read by the kernels.
template <class T> void sgd(std::int64_t n, const T* p, const T* g, const T* lr, T* out, stream_t s);
template <class T>
void momentum(std::int64_t n, const T* p, const T* g, const T* v, const T* lr, T mu, bool nesterov, T rescale, T l2,
              T* p_out, T* v_out, stream_t s);
template <class T>
// adam, or adamw where coeff != 0 (p -= lr * coeff * p first); the step
// is at *lr times lr_ratio.
void adam(std::int64_t n, const T* p, const T* g, const T* m1, const T* m2, const T* lr, T beta1, T beta2, T eps,
          const T* beta1_pow, const T* beta2_pow, T coeff, T lr_ratio, T* p_out, T* m1_out, T* m2_out,
          T* beta1_pow_out, T* beta2_pow_out, stream_t s);

// y[i] = x[sum(index_d(i) * in_st[d])]: i walks Y's dims row-major (a
// transpose; a flip, with negative strides from the last element; a slice,
// from the box's first). Elements are moved as bytes: Word is an unsigned
// integer of the element's size. unpermute is the reverse walk, x[i]
// written to y[sum(index_d(i) * in_st[d])] (a slice's gradient).
struct permute_walk {
    int rank = 0;
    std::int64_t out_dims[max_rank] = {}, in_st[max_rank] = {};
};
template <class Word> void permute(std::int64_t n, const permute_walk& w, const Word* x, Word* y, stream_t s);
template <class Word> void unpermute(std::int64_t n, const permute_walk& w, const Word* x, Word* y, stream_t s);

// tile, expand, expand_v2: y = x repeated along each dim (i walks Y's dims
// row-major; x's element is at each index mod x_dims[d]), moved as Words
// as permute; and the gradient, dx[j] = the sum of dy's copies of x's
// element j in dy's order (kernels::tile_grad's bits), a thread per j.
struct tile_walk {
    int rank = 0;
    std::int64_t out_dims[max_rank] = {}, x_dims[max_rank] = {};
};
template <class Word> void tile(std::int64_t n, const tile_walk& w, const Word* x, Word* y, stream_t s);
template <class T> void tile_grad(std::int64_t nx, const tile_walk& w, const T* dy, T* dx, stream_t s);
// gather along the middle dim d of [outer, d, inner] at n ids (int32 when
// ids32, else int64), and its gradient (dx = 0, then each id's slice added,
// or with overwrite assigned, in order: a thread per (outer, inner)
// column); scatter into rows of `inner` (out = x first, unless x is out),
// the updates in order a thread per column, and its gradient (dx, dupd may
// be null). An id out of [0, d) records fault id_out_of_range (the lowest
// position's).
template <class T>
void gather(std::int64_t outer, std::int64_t d, std::int64_t inner, const T* x, const void* ids, bool ids32,
            std::int64_t n, T* out, device_fault* f, stream_t s);
template <class T>
void gather_grad(std::int64_t outer, std::int64_t d, std::int64_t inner, const void* ids, bool ids32, std::int64_t n,
                 const T* dout, bool overwrite, T* dx, device_fault* f, stream_t s);
template <class T>
void scatter(std::int64_t rows, std::int64_t inner, const T* x, const void* ids, bool ids32, std::int64_t n,
             const T* updates, bool overwrite, T* out, device_fault* f, stream_t s);
template <class T>
void scatter_grad(std::int64_t rows, std::int64_t inner, const void* ids, bool ids32, std::int64_t n, const T* dout,
                  T* dx, T* dupdates, device_fault* f, stream_t s);

// Along the middle dim d of [outer, d, inner] (kernels/reduce.hpp's, the
// same order and bits, a thread per (outer, inner) line): the position of
// the largest (Max) or smallest element, first on ties, a NaN winning; and
// cumulative sums (exclusive: each element left out of its own; reverse:
// from the end).
template <class T, class I> void arg_extreme(bool max, std::int64_t outer, std::int64_t d, std::int64_t inner, const T* x, I* out, stream_t s);
template <class T>
void cumsum(std::int64_t outer, std::int64_t d, std::int64_t inner, const T* x, T* y, bool exclusive, bool reverse,
            stream_t s);
// one_hot rows of n ids (int32 when ids32, else int64) among `depth`
// classes; an id out of range records fault id_out_of_range (the lowest
// position's) unless allow_out_of_range, which gives a row of zeros.
template <class T>
void one_hot(std::int64_t n, std::int64_t depth, const void* ids, bool ids32, bool allow_out_of_range, T* out,
             device_fault* f, stream_t s);

// Comparisons and logical ops (kernels/logic.hpp's functors) of broadcast
// operands into BOOL; logical_not; where and its gradient (dx or dy may be
// null: not wanted).
enum class cmpop : int {
    less_than, less_equal, greater_than, greater_equal, equal, not_equal, logical_and, logical_or, logical_xor
};
template <class T>
void compare(cmpop op, std::int64_t n, const T* x, const T* y, bool* z, const broadcast_strides& g, stream_t s);
template <class T> void logical_not(std::int64_t n, const T* x, bool* z, stream_t s);
template <class T> void where(std::int64_t n, const bool* cond, const T* x, const T* y, T* z, stream_t s);
template <class T> void where_grad(std::int64_t n, const bool* cond, const T* dout, T* dx, T* dy, stream_t s);

// top_k over `rows` rows of n values (0 <= k <= n): values and indices
// [rows, k], best first by kernels::topk_before (larger first, NaN above
// all, ties by lower index), the CPU's order exactly. A block per row
// picks the k best one by one: O(k n) per row.
template <class T>
void top_k(std::int64_t rows, std::int64_t n, std::int64_t k, const T* x, T* values, std::int64_t* indices, stream_t s);
// accuracy over `rows` rows of k top_k indices and an INT64 label per row
// (kernels::accuracy): one block.
void accuracy(std::int64_t rows, std::int64_t k, const std::int64_t* indices, const std::int64_t* label, float* acc,
              std::int32_t* correct, std::int32_t* total, stream_t s);

// ---- src/cuda/train_kernels.cu -----------------------------------------------------------------
//
// The scratch device memory the launchers below that take one need: sums
// of a whole array in double (their partials and results).
inline constexpr std::size_t sum_scratch_bytes = (1024 + 4) * sizeof(double);

// Losses (kernels/loss.hpp). bce_loss: an x outside [0, 1] (NaN too)
// records fault prob_out_of_range, the lowest position's, as on the CPU.
// sigmoid_ce with normalize counts the kept labels first (scratch). dx or
// dy of a gradient may be null (not wanted), as may smooth_l1's weights.
// kldiv's reduction: kernels::kl_reduction's value (none, sum, mean,
// batchmean); other than none, the sum goes through scratch.
template <class T>
void bce_loss(std::int64_t n, const T* x, const T* label, T* out, device_fault* f, stream_t s);
template <class T>
void bce_loss_grad(std::int64_t n, const T* x, const T* label, const T* dout, T* dx, stream_t s);
template <class T>
void sigmoid_ce(std::int64_t n, const T* x, const T* label, std::int64_t ignore_index, bool normalize, T* out,
                void* scratch, stream_t s);
template <class T>
void sigmoid_ce_grad(std::int64_t n, const T* x, const T* label, const T* dout, std::int64_t ignore_index,
                     bool normalize, T* dx, void* scratch, stream_t s);
template <class T>
void huber_loss(std::int64_t n, const T* x, const T* y, T delta, T* residual, T* out, stream_t s);
template <class T>
void huber_loss_grad(std::int64_t n, const T* residual, const T* dout, T delta, T* dx, T* dy, stream_t s);
template <class T>
void smooth_l1_loss(std::int64_t rows, std::int64_t cols, const T* x, const T* y, const T* inside, const T* outside,
                    T sigma2, T* diff, T* out, stream_t s);
template <class T>
void smooth_l1_loss_grad(std::int64_t rows, std::int64_t cols, const T* inside, const T* outside, const T* diff,
                         const T* dout, T sigma2, T* dx, T* dy, stream_t s);
template <class T>
void kldiv_loss(std::int64_t n, std::int64_t batch, int reduction, const T* x, const T* target, T* loss, void* scratch,
                stream_t s);
template <class T>
void kldiv_loss_grad(std::int64_t n, std::int64_t batch, int reduction, const T* target, const T* dloss, T* dx,
                     stream_t s);

// layer_norm over `rows` rows of n elements (kernels/norm.hpp; scale, bias,
// mean, var, and the gradient's outputs may be null): a block per row,
// moments in double; Scale@GRAD and Bias@GRAD a thread per column and run
// of rows, the runs' sums (in scratch) added in order.
template <class T>
void layer_norm(std::int64_t rows, std::int64_t n, const T* x, const T* scale, const T* bias, double eps, T* y, T* mean,
                T* var, stream_t s);
template <class T>
void layer_norm_grad(std::int64_t rows, std::int64_t n, const T* x, const T* dy, const T* scale, const T* mean,
                     const T* var, double eps, T* dx, T* dscale, T* dbias, void* scratch, std::size_t scratch_bytes,
                     stream_t s);

// Optimizers (kernels/optimizers.hpp); the learning rate and LAMB's powers
// are read on the device. lamb: the norms go through scratch; the powers'
// outputs are written after the update, so they may be the inputs.
template <class T>
void adagrad(std::int64_t n, const T* p, const T* g, const T* moment, const T* lr, T eps, T* p_out, T* moment_out,
             stream_t s);
template <class T>
void rmsprop(std::int64_t n, const T* p, const T* g, const T* mean_square, const T* moment, const T* mean_grad,
             const T* lr, T eps, T decay, T momentum, bool centered, T* p_out, T* mean_square_out, T* moment_out,
             T* mean_grad_out, stream_t s);
template <class T>
void lamb(std::int64_t n, const T* p, const T* g, const T* m1, const T* m2, const T* lr, T beta1, T beta2, T eps,
          T weight_decay, const T* beta1_pow, const T* beta2_pow, T* p_out, T* m1_out, T* m2_out, T* beta1_pow_out,
          T* beta2_pow_out, void* scratch, stream_t s);

// ---- src/cuda/window_kernels.cu ----------------------------------------------------------------

// conv2d and depthwise_conv2d over NCHW: `images` images of `groups` groups,
// g one group's window (g.c its channels), mg filters per group. Direct: a
// thread per output element; Input@GRAD a thread per input element,
// Filter@GRAD a block per filter element (sums in double); either may be null.
template <class T>
void conv2d(const kernels::window2d& g, std::int64_t images, std::int64_t groups, std::int64_t mg, const T* x,
            const T* filter, T* y, stream_t s);
template <class T>
void conv2d_grad(const kernels::window2d& g, std::int64_t images, std::int64_t groups, std::int64_t mg, const T* x,
                 const T* filter, const T* dy, T* dx, T* dfilter, stream_t s);
// pool2d over `planes` channels of g (kernels/conv.hpp's windows), max or
// average; its gradient gathers, per input element, the outputs' in order.
template <class T>
void pool2d(const kernels::window2d& g, std::int64_t planes, bool is_max, bool adaptive, bool exclusive, const T* x,
            T* y, stream_t s);
template <class T>
void pool2d_grad(const kernels::window2d& g, std::int64_t planes, bool is_max, bool adaptive, bool exclusive,
                 const T* x, const T* y, const T* dy, T* dx, stream_t s);
// batch_norm over X [n, c, hw]: a block per channel. momentum_tensor, when
// not null, is a device FP32 (or FP64: momentum_fp64) value read instead of
// `momentum`. Outputs other than y may be null.
struct batch_norm_args {
    std::int64_t n = 0, c = 0, hw = 0;
    double eps = 0, momentum = 0;
    const void* momentum_tensor = nullptr;
    bool momentum_fp64 = false;
    bool global = false;  // normalize by Mean and Variance (batch_norm_op::global_stats)
};
template <class T>
void batch_norm(const batch_norm_args& a, const T* x, const T* scale, const T* bias, const T* mean, const T* var, T* y,
                T* mean_out, T* var_out, T* saved_mean, T* saved_inv, stream_t s);
// stat: Variance (global) or SavedVariance (1 / std).
template <class T>
void batch_norm_grad(const batch_norm_args& a, const T* x, const T* dy, const T* scale, const T* mean, const T* stat,
                     T* dx, T* dscale, T* dbias, stream_t s);
// dropout's seed: a value, a Seed tensor in device memory, or fresh: the
// context's device state, advanced by a kernel before each use (so that a
// replayed CUDA graph draws a new mask each time).
struct dropout_seed {
    enum kind_t : int { value_given, int32_tensor, int64_tensor, fresh } kind = value_given;
    std::uint64_t value = 0;
    const void* tensor = nullptr;
    std::uint64_t* state = nullptr;
};
// Training: kernels::dropout_train's mask (keep = draw >= p, y = x * scale);
// is_test: y = x * scale, mask all true. mask may be null.
template <class T>
void dropout(std::int64_t n, const T* x, T* y, bool* mask, bool is_test, double p, T scale, const dropout_seed& seed,
             stream_t s);
template <class T> void dropout_grad(std::int64_t n, const bool* mask, const T* dy, T* dx, T keep_scale, stream_t s);

}  // namespace dlgraph::cuda_kernels
