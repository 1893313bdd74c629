// The CUDA backend's kernels (declared in include/dlgraph/cuda/launch.hpp).
// Element-wise kernels are grid-stride loops over the kernel core's
// functors; reductions and row kernels give each output element (or row) a
// block of `block_threads` threads that stride over it and combine in
// shared memory. Every index is 64-bit. Nothing here allocates, syncs or
// throws: a launch error is left for the stream's next synchronization.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "common.cuh"
#include "dlgraph/cuda/launch.hpp"
#include "dlgraph/kernels/elementwise.hpp"
#include "dlgraph/kernels/eval.hpp"
#include "dlgraph/kernels/index.hpp"
#include "dlgraph/kernels/logic.hpp"

namespace dlgraph::cuda_kernels {

namespace {

// After a kernel that noted bad label rows: the fault of the lowest one.
__global__ void label_fault_kernel(const i64* label, i64 d, device_fault* f) {
    const unsigned long long r = f->first_row;
    if (r != ~0ull && f->code == 0) raise_fault(f, k::fault_code::label_out_of_range, label[r], static_cast<i64>(r), d);
}
void finish_label_faults(bool soft, const void* label, i64 d, device_fault* f, stream_t s) {
    if (!soft) label_fault_kernel<<<1, 1, 0, s>>>(static_cast<const i64*>(label), d, f);
}

// ---- lookup_table --------------------------------------------------------------------------

__device__ inline i64 load_id(const void* ids, bool ids32, i64 i) {
    return ids32 ? static_cast<i64>(static_cast<const std::int32_t*>(ids)[i]) : static_cast<const i64*>(ids)[i];
}
// Whether id is usable; else notes position i (the lowest one wins).
__device__ inline bool id_ok(i64 id, i64 i, i64 rows, device_fault* f) {
    if (id >= 0 && id < rows) return true;
    atomicMin(&f->first_row, static_cast<unsigned long long>(i));
    return false;
}
// After a kernel that noted bad ids: the fault of the lowest position.
__global__ void id_fault_kernel(const void* ids, bool ids32, i64 rows, device_fault* f) {
    const unsigned long long i = f->first_row;
    if (i != ~0ull && f->code == 0)
        raise_fault(f, k::fault_code::id_out_of_range, load_id(ids, ids32, static_cast<i64>(i)), static_cast<i64>(i), rows);
}

// Only the ids' check (an output with no elements still refuses a bad id).
__global__ void check_ids_kernel(const void* ids, bool ids32, i64 n, i64 rows, device_fault* f) {
    for (i64 i = first_index(); i < n; i += stride_all()) id_ok(load_id(ids, ids32, i), i, rows, f);
}

template <class T>
__global__ void lookup_table_kernel(i64 rows, i64 d, const T* w, const void* ids, bool ids32, i64 n, i64 pad, T* out,
                                    device_fault* f) {
    for (i64 e = first_index(); e < n * d; e += stride_all()) {
        const i64 i = e / d, id = load_id(ids, ids32, i);
        if (pad != k::no_padding && id == pad) out[e] = T(0);
        else if (id_ok(id, i, rows, f)) out[e] = w[id * d + e % d];
    }
}
// One thread per column, the ids in order: the CPU's sums, bit for bit.
template <class T>
__global__ void lookup_table_grad_kernel(i64 rows, i64 d, const void* ids, bool ids32, i64 n, i64 pad, const T* dout,
                                         T* dw, device_fault* f) {
    for (i64 col = first_index(); col < d; col += stride_all()) {
        for (i64 r = 0; r < rows; ++r) dw[r * d + col] = T(0);
        for (i64 i = 0; i < n; ++i) {
            const i64 id = load_id(ids, ids32, i);
            if (pad != k::no_padding && id == pad) continue;
            if (id_ok(id, i, rows, f)) dw[id * d + col] += dout[i * d + col];
        }
    }
}

// ---- element-wise --------------------------------------------------------------------------

// X's and Y's offsets of output element i.
__device__ inline void broadcast_offsets(const broadcast_strides& g, i64 i, i64& ox, i64& oy) {
    i64 rest = i;
    ox = 0;
    oy = 0;
    for (int d = g.rank - 1; d >= 0; --d) {
        const i64 c = rest % g.zs[d];
        rest /= g.zs[d];
        ox += c * g.xst[d];
        oy += c * g.yst[d];
    }
}

// Binary ops whose integer divisor of zero is a fault.
template <class F>
inline constexpr bool divides = std::is_same_v<F, k::div_fn> || std::is_same_v<F, k::mod_fn> || std::is_same_v<F, k::floordiv_fn>;

template <class T, class F>
__global__ void binary_kernel(i64 n, const T* x, const T* y, T* z, broadcast_strides g, F f, device_fault* fault) {
    for (i64 i = first_index(); i < n; i += stride_all()) {
        i64 ox, oy;
        broadcast_offsets(g, i, ox, oy);
        const T b = y[oy];
        if constexpr (std::is_integral_v<T> && divides<F>)
            if (b == T(0)) raise_fault(fault, k::fault_code::div_by_zero);
        z[i] = f(x[ox], b);
    }
}

// Same-shaped operands (or a scalar one): no index arithmetic.
template <class T, class F>
__global__ void binary_flat_kernel(i64 n, const T* x, int sx, const T* y, int sy, T* z, F f, device_fault* fault) {
    for (i64 i = first_index(); i < n; i += stride_all()) {
        const T b = y[i * sy];
        if constexpr (std::is_integral_v<T> && divides<F>)
            if (b == T(0)) raise_fault(fault, k::fault_code::div_by_zero);
        z[i] = f(x[i * sx], b);
    }
}

// Whether every dim walks X and Y alike (each whole, or a single element):
// then xk, yk are their FusedOperand kinds (1 full, 2 scalar).
bool flat_operands(const broadcast_strides& g, int& xk, int& yk) {
    bool x_full = true, y_full = true, x_scalar = true, y_scalar = true;
    i64 st = 1;
    for (int d = g.rank - 1; d >= 0; --d) {
        if (g.zs[d] != 1) {
            x_full = x_full && g.xst[d] == st;
            y_full = y_full && g.yst[d] == st;
            x_scalar = x_scalar && g.xst[d] == 0;
            y_scalar = y_scalar && g.yst[d] == 0;
        }
        st *= g.zs[d];
    }
    xk = x_full ? 1 : 2;
    yk = y_full ? 1 : 2;
    return (x_full || x_scalar) && (y_full || y_scalar);
}

template <class T, class F> void binary_as(F f, i64 n, const T* x, const T* y, T* z, const broadcast_strides& g,
                                           device_fault* fault, stream_t s) {
    if (n == 0) return;
    int xk = 0, yk = 0;
    if (flat_operands(g, xk, yk))
        binary_flat_kernel<<<grid_for(n), block_threads, 0, s>>>(n, x, xk == 1 ? 1 : 0, y, yk == 1 ? 1 : 0, z, f, fault);
    else binary_kernel<<<grid_for(n), block_threads, 0, s>>>(n, x, y, z, g, f, fault);
}

template <class T, class F> __global__ void unary_kernel(i64 n, const T* x, T* z, F f) {
    for (i64 i = first_index(); i < n; i += stride_all()) z[i] = f(x[i]);
}
template <class T, class F> __global__ void unary_grad_kernel(i64 n, const T* x, const T* out, const T* d, T* dx, F f) {
    for (i64 i = first_index(); i < n; i += stride_all()) dx[i] = f.grad(x[i], out[i], d[i]);
}

template <class T, class F> void unary_as(F f, i64 n, const T* x, T* z, stream_t s) {
    if (n > 0) unary_kernel<<<grid_for(n), block_threads, 0, s>>>(n, x, z, f);
}

// Binary gradients without broadcasting: one pass.
template <class T, class F>
__global__ void binary_grad_flat_kernel(i64 n, const T* x, const T* y, const T* out, const T* d, T* dx, T* dy, F f) {
    for (i64 i = first_index(); i < n; i += stride_all()) {
        if (dx) dx[i] = f.dx(x[i], y[i], out[i], d[i]);
        if (dy) dy[i] = f.dy(x[i], y[i], out[i], d[i]);
    }
}

// With broadcasting: one thread per element of the gradient it writes (of
// operand A, the other being B), summing over the output elements that
// element reached in output order, as the CPU's walk adds them. ast/bst are
// A's and B's strides per output dim; along a dim where A's stride is 0
// (and the output's extent is not 1) A was broadcast.
template <bool ForX, class T, class F>
__global__ void binary_grad_reduce_kernel(i64 an, const T* x, const T* y, const T* out, const T* d, T* da,
                                          broadcast_strides g, F f) {
    const i64* ast = ForX ? g.xst : g.yst;
    const i64* bst = ForX ? g.yst : g.xst;
    for (i64 j = first_index(); j < an; j += stride_all()) {
        // A's index j as output coordinates along A's own dims.
        i64 rest = j, zbase = 0, bbase = 0;
        i64 zst = 1;
        i64 zstride[max_rank];
        for (int dd = g.rank - 1; dd >= 0; --dd) {
            zstride[dd] = zst;
            zst *= g.zs[dd];
        }
        for (int dd = g.rank - 1; dd >= 0; --dd) {
            if (ast[dd] == 0 && g.zs[dd] != 1) continue;  // broadcast: walked below
            const i64 c = rest % g.zs[dd];
            rest /= g.zs[dd];
            zbase += c * zstride[dd];
            bbase += c * bst[dd];
        }
        // Odometer over the broadcast dims, in output order.
        i64 idx[max_rank] = {};
        T acc = T(0);
        i64 zo = zbase, bo = bbase;
        while (true) {
            const T a = ForX ? f.dx(x[j], y[bo], out[zo], d[zo]) : f.dy(x[bo], y[j], out[zo], d[zo]);
            acc += a;
            int dd = g.rank - 1;
            for (; dd >= 0; --dd) {
                if (!(ast[dd] == 0 && g.zs[dd] != 1)) continue;
                zo += zstride[dd];
                bo += bst[dd];
                if (++idx[dd] < g.zs[dd]) break;
                zo -= zstride[dd] * g.zs[dd];
                bo -= bst[dd] * g.zs[dd];
                idx[dd] = 0;
            }
            if (dd < 0) break;
        }
        da[j] = acc;
    }
}

// Host launchers and the fused kernel (device code) call these visitors.
#pragma nv_exec_check_disable
template <class Visit> __host__ __device__ __forceinline__ void visit_binop(binop op, Visit v) {
    switch (op) {
        case binop::add: return v(k::add_fn{});
        case binop::sub: return v(k::sub_fn{});
        case binop::mul: return v(k::mul_fn{});
        case binop::div: return v(k::div_fn{});
        case binop::max: return v(k::max_fn{});
        case binop::min: return v(k::min_fn{});
        case binop::pow: return v(k::pow_fn{});
        case binop::mod: return v(k::mod_fn{});
        case binop::floordiv: return v(k::floordiv_fn{});
    }
}
#pragma nv_exec_check_disable
template <class T, class Visit> __host__ __device__ __forceinline__ void visit_unop(unop op, const unary_params& pr, Visit v) {
    const double* p = pr.p;
    switch (op) {
        case unop::relu: return v(k::relu_fn{});
        case unop::sigmoid: return v(k::sigmoid_fn{});
        case unop::tanh: return v(k::tanh_fn{});
        case unop::exp: return v(k::exp_fn{});
        case unop::log: return v(k::log_fn{});
        case unop::sqrt: return v(k::sqrt_fn{});
        case unop::abs: return v(k::abs_fn{});
        case unop::square: return v(k::square_fn{});
        case unop::softsign: return v(k::softsign_fn{});
        case unop::sin: return v(k::sin_fn{});
        case unop::cos: return v(k::cos_fn{});
        case unop::reciprocal: return v(k::reciprocal_fn{});
        case unop::rsqrt: return v(k::rsqrt_fn{});
        case unop::floor: return v(k::floor_fn{});
        case unop::ceil: return v(k::ceil_fn{});
        case unop::round: return v(k::round_fn{});
        case unop::sign: return v(k::sign_fn{});
        case unop::gelu: return v(k::gelu_fn{});
        case unop::gelu_tanh: return v(k::gelu_tanh_fn{});
        case unop::leaky_relu: return v(k::leaky_relu_fn<T>{T(p[0])});
        case unop::elu: return v(k::elu_fn<T>{T(p[0])});
        case unop::relu6: return v(k::relu6_fn<T>{T(p[0])});
        case unop::hard_sigmoid: return v(k::hard_sigmoid_fn<T>{T(p[0]), T(p[1])});
        case unop::hard_swish: return v(k::hard_swish_fn<T>{T(p[0]), T(p[1]), T(p[2])});
        case unop::softplus: return v(k::softplus_fn<T>{T(p[0]), T(p[1])});
        case unop::swish: return v(k::swish_fn<T>{T(p[0])});
        case unop::clip: return v(k::clip_fn<T>{T(p[0]), T(p[1])});
        case unop::pow: return v(k::pow_factor_fn<T>{T(p[0])});
    }
}

// ---- fused element-wise chains --------------------------------------------------------------

// Each thread takes P groups of 16 bytes (fused_group<T> elements) of every
// operand, loaded at once when aligned, so that P loads per operand are in
// flight before the thread computes.
template <class T> constexpr int fused_group = 16 / static_cast<int>(sizeof(T));
template <class T> struct alignas(16) fused_pack {
    T v[fused_group<T>];
};

// Operand `kind` (FusedOperand) at elements [i, i + W), of which those from
// m on are past the end (they get 0), into a; `run` is the running value.
template <class T, bool Aligned, int W>
__device__ __forceinline__ void fused_load(int kind, const void* ptr, i64 i, int m, i64 row, const T* run, T* a) {
    constexpr int G = fused_group<T>;
    const T* t = static_cast<const T*>(ptr);
    if (kind == 0) {
#pragma unroll
        for (int j = 0; j < W; ++j) a[j] = run[j];
    } else if (kind == 1) {
        if (Aligned && m == W) {
#pragma unroll
            for (int g = 0; g < W / G; ++g) {
                const fused_pack<T> q = reinterpret_cast<const fused_pack<T>*>(t + i)[g];
#pragma unroll
                for (int j = 0; j < G; ++j) a[g * G + j] = q.v[j];
            }
        } else {
#pragma unroll
            for (int j = 0; j < W; ++j) a[j] = j < m ? t[i + j] : T(0);
        }
    } else if (kind == 2) {
        const T v = t[0];
#pragma unroll
        for (int j = 0; j < W; ++j) a[j] = v;
    } else {  // a row repeated every `row` elements
        i64 r = i % row;
#pragma unroll
        for (int j = 0; j < W; ++j) {
            a[j] = j < m ? t[r] : T(0);
            if (++r == row) r = 0;
        }
    }
}

// v = step `code` of operands a (and b).
template <class T, int W> __device__ __forceinline__ void fused_apply(int code, const T* a, const T* b, T* v) {
    const unary_params none;
    switch (fused_kind_of(code)) {
        case fused_kind::binary:
            return visit_binop(static_cast<binop>(fused_op_of(code)), [&](auto f) {
#pragma unroll
                for (int j = 0; j < W; ++j) v[j] = f(a[j], b[j]);
            });
        case fused_kind::unary:
            return visit_unop<T>(static_cast<unop>(fused_op_of(code)), none, [&](auto f) {
#pragma unroll
                for (int j = 0; j < W; ++j) v[j] = f(a[j]);
            });
        case fused_kind::grad:  // a = Out@GRAD, b = the X or Out the gradient reads
            return visit_unop<T>(static_cast<unop>(fused_op_of(code)), none, [&](auto f) {
#pragma unroll
                for (int j = 0; j < W; ++j) v[j] = f.grad(b[j], b[j], a[j]);
            });
    }
}

// Each thread runs the whole chain on W = P groups of elements at a time, in
// registers, and writes only the result.
template <class T, bool Aligned, int P> __global__ void fused_kernel(fused_program p, T* z) {
    constexpr int G = fused_group<T>, W = P * G;
    for (i64 i = first_index() * W; i < p.n; i += stride_all() * W) {
        const int m = p.n - i < W ? static_cast<int>(p.n - i) : W;
        T v[W], a[W], b[W];
#pragma unroll
        for (int j = 0; j < W; ++j) v[j] = T(0);
        for (int k = 0; k < p.count; ++k) {
            const fused_step& st = p.steps[k];
            fused_load<T, Aligned, W>(st.xk, st.x, i, m, p.row, v, a);
            if (fused_kind_of(st.code) != fused_kind::unary) fused_load<T, Aligned, W>(st.yk, st.y, i, m, p.row, v, b);
            fused_apply<T, W>(st.code, a, b, v);
        }
        if (Aligned && m == W) {
#pragma unroll
            for (int g = 0; g < P; ++g) {
                fused_pack<T> q;
#pragma unroll
                for (int j = 0; j < G; ++j) q.v[j] = v[g * G + j];
                reinterpret_cast<fused_pack<T>*>(z + i)[g] = q;
            }
        } else {
#pragma unroll
            for (int j = 0; j < W; ++j)  // constant indices: v stays in registers
                if (j < m) z[i + j] = v[j];
        }
    }
}

template <class T, int P> void fused_launch(const fused_program& p, T* z, bool aligned, stream_t s) {
    const i64 threads = (p.n + P * fused_group<T> - 1) / (P * fused_group<T>);
    if (aligned) fused_kernel<T, true, P><<<grid_for(threads), block_threads, 0, s>>>(p, z);
    else fused_kernel<T, false, P><<<grid_for(threads), block_threads, 0, s>>>(p, z);
}

template <class T> __global__ void fill_kernel(i64 n, T* z, T v) {
    for (i64 i = first_index(); i < n; i += stride_all()) z[i] = v;
}
template <class S, class D> __global__ void cast_kernel(i64 n, const S* x, D* z) {
    for (i64 i = first_index(); i < n; i += stride_all()) z[i] = k::convert<D>(x[i]);
}
template <class T> __global__ void add_into_kernel(i64 n, const T* x, T* z) {
    for (i64 i = first_index(); i < n; i += stride_all()) z[i] = k::wrap_add(z[i], x[i]);
}

// ---- block reductions ----------------------------------------------------------------------

template <class T> __host__ __device__ T max_identity() {
    if constexpr (std::is_floating_point_v<T>) return -std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::lowest();
}
template <class T> __host__ __device__ T min_identity() {
    if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::infinity();
    else return std::numeric_limits<T>::max();
}

// An output's fold made final: mean scales it (as the CPU kernels do).
template <class T> __device__ T finish_fold(T acc, redop op, i64 count) {
    if constexpr (std::is_floating_point_v<T>) {
        if (op == redop::mean) acc = acc * (T(1) / static_cast<T>(count));
        if (op == redop::mean_all) acc = acc / static_cast<T>(count);
    }
    return acc;
}

// What a reduction folds: element `off` of X (for output o, which a
// gradient's load needs too).
template <class T> struct plain_load {
    const T* x;
    __device__ T operator()(i64, i64 off) const { return x[off]; }
};

// Folds ld(o, r) for r in [begin, end) with stride `step` into four
// accumulators (four loads in flight per thread), then into one.
template <class T, class F, class L> __device__ T fold_range(L ld, i64 o, i64 begin, i64 end, i64 step, T init, F f) {
    T a0 = init, a1 = init, a2 = init, a3 = init;
    i64 r = begin;
    for (; r + 3 * step < end; r += 4 * step) {
        a0 = f(a0, ld(o, r));
        a1 = f(a1, ld(o, r + step));
        a2 = f(a2, ld(o, r + 2 * step));
        a3 = f(a3, ld(o, r + 3 * step));
    }
    for (; r < end; r += step) a0 = f(a0, ld(o, r));
    return f(f(a0, a1), f(a2, a3));
}

// The X offset of output o's first element.
__device__ inline i64 kept_base(const reduce_walk& w, i64 o) {
    i64 base = 0;
    for (int d = w.kept_rank - 1; d >= 0; --d) {
        base += o % w.kept_ext[d] * w.kept_st[d];
        o /= w.kept_ext[d];
    }
    return base;
}

// Contiguous reduced elements: output o folds count elements from its
// base. Block (o, s) folds split s of `splits`; with one split it writes
// y[o], else partial[o * splits + s].
template <class T, class F, class L>
__global__ void reduce_inner_kernel(reduce_walk w, L ld, T* y, T* partial, i64 splits, T init, F f, redop op) {
    const i64 chunk = (w.count + splits - 1) / splits;
    for (i64 o = blockIdx.x; o < w.outputs; o += gridDim.x) {
        const i64 base = kept_base(w, o);
        const i64 begin = blockIdx.y * chunk, end = begin + chunk < w.count ? begin + chunk : w.count;
        const T acc = block_fold(fold_range(ld, o, base + begin + threadIdx.x, base + end, i64(blockDim.x), init, f), f);
        if (threadIdx.x == 0) {
            if (splits == 1) y[o] = finish_fold(acc, op, w.count);
            else partial[o * splits + blockIdx.y] = acc;
        }
    }
}

// One contiguous kept dim: thread o of the grid's x folds column o,
// X[o + r * red_st] for the rows r of split blockIdx.y; with one split it
// writes y[o], else partial[s * outputs + o].
template <class T, class F, class L>
__global__ void reduce_outer_kernel(reduce_walk w, L ld, T* y, T* partial, i64 splits, T init, F f, redop op) {
    const i64 chunk = (w.count + splits - 1) / splits;
    const i64 st = w.red_st[0];
    for (i64 o = first_index(); o < w.outputs; o += stride_all()) {
        const i64 begin = blockIdx.y * chunk, end = begin + chunk < w.count ? begin + chunk : w.count;
        const T acc = fold_range(ld, o, o + begin * st, o + end * st, st, init, f);
        if (splits == 1) y[o] = finish_fold(acc, op, w.count);
        else partial[blockIdx.y * w.outputs + o] = acc;
    }
}

// The second pass: y[o] folds partial[o * per_output + s * per_split] over
// the splits s, one block per output.
template <class T, class F>
__global__ void reduce_partials_kernel(i64 outputs, i64 splits, i64 per_output, i64 per_split, const T* partial, T* y,
                                       i64 count, T init, F f, redop op) {
    for (i64 o = blockIdx.x; o < outputs; o += gridDim.x) {
        const T acc = block_fold(fold_range(plain_load<T>{partial + o * per_output}, o, i64(threadIdx.x) * per_split,
                                            splits * per_split, i64(blockDim.x) * per_split, init, f),
                                 f);
        if (threadIdx.x == 0) y[o] = finish_fold(acc, op, count);
    }
}

// The X offset of the r-th element an output folds, from its first (base).
__device__ inline i64 red_offset(const reduce_walk& w, i64 base, i64 r) {
    for (int d = w.red_rank - 1; d >= 0; --d) {
        base += r % w.red_ext[d] * w.red_st[d];
        r /= w.red_ext[d];
    }
    return base;
}

// Any other walk: one block per output element.
template <class T, class F, class L>
__global__ void reduce_kernel(reduce_walk w, L ld, T* y, T init, F f, redop op) {
    for (i64 o = blockIdx.x; o < w.outputs; o += gridDim.x) {
        const i64 base = kept_base(w, o);
        T acc = init;
        for (i64 r = threadIdx.x; r < w.count; r += blockDim.x) acc = f(acc, ld(o, red_offset(w, base, r)));
        acc = block_fold(acc, f);
        if (threadIdx.x == 0) y[o] = finish_fold(acc, op, w.count);
    }
}

template <class T>
__global__ void reduce_grad_kernel(redop op, reduce_grad_walk w, const T* x, const T* out, const T* dout, T* dx,
                                   T scale) {
    for (i64 i = first_index(); i < w.n; i += stride_all()) {
        i64 rest = i, o = 0;
        for (int d = w.rank - 1; d >= 0; --d) {
            o += rest % w.dims[d] * w.ost[d];
            rest /= w.dims[d];
        }
        if (op == redop::max || op == redop::min) dx[i] = x[i] == out[o] ? dout[o] : T(0);
        else if (op == redop::mean) dx[i] = dout[o] * scale;
        else if (op == redop::mean_all) dx[i] = dout[o] / scale;
        else dx[i] = dout[o];
    }
}

// reduce_prod's gradient, a block per output element o: its group's count
// of zeros and product of nonzeros, then dx = dout * Out / x where the
// group has no zero, dout * (the product of the others) at a group's only
// zero, else 0 (kernels::reduce_prod_grad).
template <class T>
__global__ void reduce_prod_grad_kernel(reduce_walk w, const T* x, const T* out, const T* dout, T* dx) {
    for (i64 o = blockIdx.x; o < w.outputs; o += gridDim.x) {
        const i64 base = kept_base(w, o);
        i64 zeros = 0;
        T nonzero = T(1);
        for (i64 r = threadIdx.x; r < w.count; r += blockDim.x) {
            const T v = x[red_offset(w, base, r)];
            if (v == T(0)) ++zeros;
            else nonzero *= v;
        }
        zeros = block_fold(zeros, k::add_fn{});
        nonzero = block_fold(nonzero, k::mul_fn{});
        for (i64 r = threadIdx.x; r < w.count; r += blockDim.x) {
            const i64 off = red_offset(w, base, r);
            const T v = x[off];
            T g = T(0);
            if (zeros == 0) g = dout[o] * out[o] / v;
            else if (zeros == 1 && v == T(0)) g = dout[o] * nonzero;
            dx[off] = g;
        }
    }
}

// ---- softmax and losses --------------------------------------------------------------------

// A row of d elements at x + base with stride `st`: softmax into y; returns
// log(sum(exp)) (every thread).
template <class T> __device__ T softmax_row(const T* x, T* y, i64 base, i64 st, i64 d) {
    T m = max_identity<T>();
    for (i64 j = threadIdx.x; j < d; j += blockDim.x) m = k::vm::max(m, x[base + j * st]);
    m = block_fold(m, k::max_fn{});
    const T shift = isfinite(m) ? m : T(0);
    T sum = 0;
    for (i64 j = threadIdx.x; j < d; j += blockDim.x) {
        const T e = exp(x[base + j * st] - shift);
        y[base + j * st] = e;
        sum += e;
    }
    sum = block_fold(sum, k::add_fn{});
    const T inv = T(1) / sum;
    for (i64 j = threadIdx.x; j < d; j += blockDim.x) y[base + j * st] *= inv;
    return shift + log(sum);
}

template <class T> __global__ void softmax_kernel(i64 outer, i64 d, i64 inner, const T* x, T* y) {
    for (i64 r = blockIdx.x; r < outer * inner; r += gridDim.x) {
        const i64 base = r / inner * d * inner + r % inner;
        softmax_row(x, y, base, inner, d);
    }
}

template <class T> __global__ void softmax_grad_kernel(i64 outer, i64 d, i64 inner, const T* y, const T* dy, T* dx) {
    for (i64 r = blockIdx.x; r < outer * inner; r += gridDim.x) {
        const i64 base = r / inner * d * inner + r % inner;
        T dot = 0;
        for (i64 j = threadIdx.x; j < d; j += blockDim.x) dot += y[base + j * inner] * dy[base + j * inner];
        dot = block_fold(dot, k::add_fn{});
        for (i64 j = threadIdx.x; j < d; j += blockDim.x) {
            const i64 at = base + j * inner;
            dx[at] = y[at] * (dy[at] - dot);
        }
    }
}

template <class T> __global__ void log_softmax_kernel(i64 outer, i64 d, i64 inner, const T* x, T* y) {
    for (i64 r = blockIdx.x; r < outer * inner; r += gridDim.x) {
        const i64 base = r / inner * d * inner + r % inner;
        T m = max_identity<T>();
        for (i64 j = threadIdx.x; j < d; j += blockDim.x) m = k::vm::max(m, x[base + j * inner]);
        m = block_fold(m, k::max_fn{});
        const T shift = isfinite(m) ? m : T(0);
        T sum = 0;
        for (i64 j = threadIdx.x; j < d; j += blockDim.x) sum += exp(x[base + j * inner] - shift);
        const T l = log(block_fold(sum, k::add_fn{}));  // as kernels::log_softmax_fn: the max, then the log-sum
        for (i64 j = threadIdx.x; j < d; j += blockDim.x) y[base + j * inner] = (x[base + j * inner] - shift) - l;
    }
}

template <class T>
__global__ void log_softmax_grad_kernel(i64 outer, i64 d, i64 inner, const T* y, const T* dy, T* dx) {
    for (i64 r = blockIdx.x; r < outer * inner; r += gridDim.x) {
        const i64 base = r / inner * d * inner + r % inner;
        T sum = 0;
        for (i64 j = threadIdx.x; j < d; j += blockDim.x) sum += dy[base + j * inner];
        sum = block_fold(sum, k::add_fn{});
        for (i64 j = threadIdx.x; j < d; j += blockDim.x) {
            const i64 at = base + j * inner;
            dx[at] = dy[at] - exp(y[at]) * sum;
        }
    }
}

// The row's hard label; ignored_row where it is `ignore` (loss and gradient
// 0); or -1 after noting the row when it is out of range.
constexpr i64 ignored_row = -2;
__device__ inline i64 row_label(const void* label, i64 r, i64 d, i64 ignore, device_fault* f) {
    const i64 l = static_cast<const i64*>(label)[r];
    if (l == ignore) return ignored_row;
    if (l < 0 || l >= d) {
        atomicMin(&f->first_row, static_cast<unsigned long long>(r));
        return -1;
    }
    return l;
}

template <class T> __global__ void cross_entropy_hard_kernel(i64 rows, i64 d, const T* x, const void* label, i64 ignore,
                                                             T* y, device_fault* f) {
    for (i64 r = first_index(); r < rows; r += stride_all()) {
        const i64 l = row_label(label, r, d, ignore, f);
        if (l >= 0) y[r] = -log(x[r * d + l]);
        else if (l == ignored_row && y) y[r] = T(0);
    }
}
template <class T> __global__ void cross_entropy_soft_kernel(i64 rows, i64 d, const T* x, const T* label, T* y) {
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        T acc = 0;
        for (i64 j = threadIdx.x; j < d; j += blockDim.x) acc += label[r * d + j] * log(x[r * d + j]);
        acc = block_fold(acc, k::add_fn{});
        if (threadIdx.x == 0) y[r] = -acc;
    }
}
template <class T>
__global__ void cross_entropy_grad_kernel(bool soft, i64 rows, i64 d, const T* x, const void* label, i64 ignore,
                                          const T* dy, T* dx, device_fault* f) {
    for (i64 i = first_index(); i < rows * d; i += stride_all()) {
        const i64 r = i / d, j = i % d;
        if (soft) {
            dx[i] = -dy[r] * static_cast<const T*>(label)[i] / x[i];
        } else {
            const i64 l = row_label(label, r, d, ignore, f);
            if (l >= 0) dx[i] = j == l ? -dy[r] / x[i] : T(0);
            else if (l == ignored_row) dx[i] = T(0);
        }
    }
}

template <class T>
__global__ void swce_kernel(bool soft, i64 rows, i64 d, const T* logits, const void* label, i64 ignore, T* sm, T* loss,
                            device_fault* f) {
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const i64 l = soft ? 0 : static_cast<const i64*>(label)[r];
        const bool ignored = !soft && l == ignore;
        if (d == 0) {  // no classes: loss 0 (a hard label cannot be in range)
            if (threadIdx.x == 0) {
                if (soft || ignored) loss[r] = 0;
                else row_label(label, r, d, ignore, f);
            }
            continue;
        }
        if (!soft && !ignored && (l < 0 || l >= d)) {  // the same for every thread of the block
            if (threadIdx.x == 0) row_label(label, r, d, ignore, f);
            continue;
        }
        const T lse = softmax_row(logits, sm, r * d, 1, d);
        if (!soft) {
            if (threadIdx.x == 0) loss[r] = ignored ? T(0) : lse - logits[r * d + l];
            continue;
        }
        const T* lr = static_cast<const T*>(label) + r * d;
        T acc = 0;
        for (i64 j = threadIdx.x; j < d; j += blockDim.x) acc += lr[j] * (lse - logits[r * d + j]);
        acc = block_fold(acc, k::add_fn{});
        if (threadIdx.x == 0) loss[r] = acc;
    }
}

template <class T>
__global__ void swce_grad_hard_kernel(i64 rows, i64 d, const void* label, i64 ignore, const T* sm, const T* dl, T* dx,
                                      device_fault* f) {
    for (i64 i = first_index(); i < rows * d; i += stride_all()) {
        const i64 r = i / d, j = i % d;
        const i64 l = row_label(label, r, d, ignore, f);
        if (l == ignored_row) dx[i] = T(0);
        if (l < 0) continue;
        const T g = dl[r];
        const T v = sm[i] * g;
        dx[i] = j == l ? v - g : v;
    }
}
template <class T> __global__ void swce_grad_soft_kernel(i64 rows, i64 d, const T* label, const T* sm, const T* dl, T* dx) {
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        T lsum = 0;
        for (i64 j = threadIdx.x; j < d; j += blockDim.x) lsum += label[r * d + j];
        lsum = block_fold(lsum, k::add_fn{});
        const T g = dl[r];
        for (i64 j = threadIdx.x; j < d; j += blockDim.x) dx[r * d + j] = (sm[r * d + j] * lsum - label[r * d + j]) * g;
    }
}

// ---- optimizers ----------------------------------------------------------------------------

template <class T> __global__ void sgd_kernel(i64 n, const T* p, const T* g, const T* lr, T* out) {
    const T rate = *lr;
    for (i64 i = first_index(); i < n; i += stride_all()) out[i] = p[i] - rate * g[i];
}
template <class T>
__global__ void momentum_kernel(i64 n, const T* p, const T* g, const T* v, const T* lr, T mu, bool nesterov, T rescale,
                                T l2, T* po, T* vo) {
    const T rate = *lr;
    const bool reg = rescale != T(1) || l2 != T(0);  // as kernels::momentum
    for (i64 i = first_index(); i < n; i += stride_all()) {
        const T gi = reg ? rescale * g[i] + l2 * p[i] : g[i];
        const T vn = mu * v[i] + gi;
        vo[i] = vn;
        po[i] = p[i] - rate * (nesterov ? gi + mu * vn : vn);
    }
}
template <class T>
__global__ void adam_kernel(i64 n, const T* p, const T* g, const T* m1, const T* m2, const T* lr_p, T b1, T b2, T eps,
                            const T* b1p, const T* b2p, T coeff, T lr_ratio, T* po, T* m1o, T* m2o) {
    const T lr = *lr_p * lr_ratio, decay = lr * coeff;  // as kernels::adamw
    const T lr_t = lr * sqrt(T(1) - *b2p) / (T(1) - *b1p);
    const T eps_t = eps * sqrt(T(1) - *b2p);
    for (i64 i = first_index(); i < n; i += stride_all()) {
        const T a = b1 * m1[i] + (T(1) - b1) * g[i];
        const T b = b2 * m2[i] + (T(1) - b2) * g[i] * g[i];
        m1o[i] = a;
        m2o[i] = b;
        T pv = p[i];
        if (coeff != T(0)) pv = pv - decay * pv;
        po[i] = pv - lr_t * a / (sqrt(b) + eps_t);
    }
}
// After adam_kernel on the same stream (which reads the powers), so the
// powers may be updated in place.
template <class T> __global__ void adam_pow_kernel(const T* b1p, const T* b2p, T b1, T b2, T* b1po, T* b2po) {
    const T a = *b1p * b1, b = *b2p * b2;
    *b1po = a;
    *b2po = b;
}

template <bool Back, class Word> __global__ void permute_kernel(i64 n, permute_walk w, const Word* x, Word* y) {
    for (i64 i = first_index(); i < n; i += stride_all()) {
        i64 rest = i, off = 0;
        for (int d = w.rank - 1; d >= 0; --d) {
            off += rest % w.out_dims[d] * w.in_st[d];
            rest /= w.out_dims[d];
        }
        if constexpr (Back) y[off] = x[i];
        else y[i] = x[off];
    }
}

// ---- tile, gather, scatter -------------------------------------------------------------------

template <class Word> __global__ void tile_kernel(i64 n, tile_walk w, const Word* x, Word* y) {
    for (i64 i = first_index(); i < n; i += stride_all()) {
        i64 rest = i, off = 0, st = 1;
        for (int d = w.rank - 1; d >= 0; --d) {
            off += rest % w.out_dims[d] % w.x_dims[d] * st;
            rest /= w.out_dims[d];
            st *= w.x_dims[d];
        }
        y[i] = x[off];
    }
}
// A thread per element j of x: its copies in dy, the repeats counted
// row-major (the CPU's order).
template <class T> __global__ void tile_grad_kernel(i64 nx, tile_walk w, const T* dy, T* dx) {
    for (i64 j = first_index(); j < nx; j += stride_all()) {
        i64 idx[max_rank], rep[max_rank], yst[max_rank];
        i64 rest = j, st = 1;
        for (int d = w.rank - 1; d >= 0; --d) {
            idx[d] = rest % w.x_dims[d];
            rest /= w.x_dims[d];
            rep[d] = 0;
            yst[d] = st;
            st *= w.out_dims[d];
        }
        T acc = T(0);
        for (;;) {
            i64 off = 0;
            for (int d = 0; d < w.rank; ++d) off += (rep[d] * w.x_dims[d] + idx[d]) * yst[d];
            acc += dy[off];
            int d = w.rank - 1;
            for (; d >= 0; --d) {
                if (++rep[d] < w.out_dims[d] / w.x_dims[d]) break;
                rep[d] = 0;
            }
            if (d < 0) break;
        }
        dx[j] = acc;
    }
}
template <class T>
__global__ void gather_kernel(i64 outer, i64 d, i64 inner, const T* x, const void* ids, bool ids32, i64 n, T* out,
                              device_fault* f) {
    for (i64 e = first_index(); e < outer * n * inner; e += stride_all()) {
        const i64 k = e % inner, i = e / inner % n, o = e / inner / n, id = load_id(ids, ids32, i);
        if (id_ok(id, i, d, f)) out[e] = x[(o * d + id) * inner + k];
    }
}
template <class T>
__global__ void gather_grad_kernel(i64 outer, i64 d, i64 inner, const void* ids, bool ids32, i64 n, const T* dout,
                                   bool overwrite, T* dx, device_fault* f) {
    for (i64 col = first_index(); col < outer * inner; col += stride_all()) {
        const i64 o = col / inner, k = col % inner;
        for (i64 r = 0; r < d; ++r) dx[(o * d + r) * inner + k] = T(0);
        for (i64 i = 0; i < n; ++i) {
            const i64 id = load_id(ids, ids32, i);
            if (!id_ok(id, i, d, f)) continue;
            T& g = dx[(o * d + id) * inner + k];
            const T v = dout[(o * n + i) * inner + k];
            g = overwrite ? v : g + v;
        }
    }
}
template <class T>
__global__ void scatter_kernel(i64 rows, i64 inner, const void* ids, bool ids32, i64 n, const T* updates, bool overwrite,
                               T* out, device_fault* f) {
    for (i64 k = first_index(); k < inner; k += stride_all()) {
        if (!overwrite)
            for (i64 i = 0; i < n; ++i) {
                const i64 id = load_id(ids, ids32, i);
                if (id_ok(id, i, rows, f)) out[id * inner + k] = T(0);
            }
        for (i64 i = 0; i < n; ++i) {
            const i64 id = load_id(ids, ids32, i);
            if (!id_ok(id, i, rows, f)) continue;
            T& o = out[id * inner + k];
            const T v = updates[i * inner + k];
            o = overwrite ? v : k::wrap_add(o, v);
        }
    }
}
template <class T>
__global__ void scatter_grad_kernel(i64 rows, i64 inner, const void* ids, bool ids32, i64 n, const T* dout, T* dx,
                                    T* dupdates, device_fault* f) {
    for (i64 e = first_index(); e < n * inner; e += stride_all()) {
        const i64 i = e / inner, k = e % inner, id = load_id(ids, ids32, i);
        if (!id_ok(id, i, rows, f)) continue;
        if (dx) dx[id * inner + k] = T(0);
        if (dupdates) dupdates[e] = dout[id * inner + k];
    }
}

// ---- comparisons, logical ops, where -------------------------------------------------------

template <class T, class F> __global__ void compare_kernel(i64 n, const T* x, const T* y, bool* z, broadcast_strides g, F f) {
    for (i64 i = first_index(); i < n; i += stride_all()) {
        i64 ox, oy;
        broadcast_offsets(g, i, ox, oy);
        z[i] = f(x[ox], y[oy]);
    }
}
template <class T> __global__ void logical_not_kernel(i64 n, const T* x, bool* z) {
    for (i64 i = first_index(); i < n; i += stride_all()) z[i] = x[i] == T(0);
}
template <class T> __global__ void where_kernel(i64 n, const bool* c, const T* x, const T* y, T* z) {
    for (i64 i = first_index(); i < n; i += stride_all()) z[i] = c[i] ? x[i] : y[i];
}
template <class T> __global__ void where_grad_kernel(i64 n, const bool* c, const T* d, T* dx, T* dy) {
    for (i64 i = first_index(); i < n; i += stride_all()) {
        if (dx) dx[i] = c[i] ? d[i] : T(0);
        if (dy) dy[i] = c[i] ? T(0) : d[i];
    }
}

// ---- arg_max, arg_min, cumsum, one_hot -----------------------------------------------------

template <bool Max, class T, class I> __global__ void arg_extreme_kernel(i64 outer, i64 d, i64 inner, const T* x, I* out) {
    // Whether a beats the best so far, b: a NaN beats any number, nothing beats a NaN.
    auto beats = [](T a, T b) {
        if constexpr (std::is_floating_point_v<T>) {
            if (b != b) return false;
            if (a != a) return true;
        }
        return Max ? a > b : a < b;
    };
    for (i64 line = first_index(); line < outer * inner; line += stride_all()) {
        const T* xl = x + line / inner * d * inner + line % inner;
        i64 best = 0;
        for (i64 k = 1; k < d; ++k)
            if (beats(xl[k * inner], xl[best * inner])) best = k;
        out[line] = static_cast<I>(best);
    }
}

template <class T> __global__ void cumsum_kernel(i64 outer, i64 d, i64 inner, const T* x, T* y, bool exclusive, bool reverse) {
    for (i64 line = first_index(); line < outer * inner; line += stride_all()) {
        const i64 base = line / inner * d * inner + line % inner;
        T acc = T(0);
        for (i64 s = 0; s < d; ++s) {
            const i64 kk = reverse ? d - 1 - s : s;
            const T v = x[base + kk * inner];
            if (exclusive) {  // y[k] = y[prev] + x[prev], from 0
                y[base + kk * inner] = acc;
                acc = k::add_fn{}(acc, v);
            } else {  // y[k] = y[prev] + x[k], from x[first]
                acc = s == 0 ? v : k::add_fn{}(acc, v);
                y[base + kk * inner] = acc;
            }
        }
    }
}

template <class T>
__global__ void one_hot_kernel(i64 n, i64 depth, const void* ids, bool ids32, bool allow, T* out, device_fault* f) {
    for (i64 e = first_index(); e < n * depth; e += stride_all()) {
        const i64 i = e / depth, id = load_id(ids, ids32, i);
        if (!allow && e % depth == 0) id_ok(id, i, depth, f);
        out[e] = id == e % depth ? T(1) : T(0);
    }
}

// ---- top_k, accuracy -----------------------------------------------------------------------

// A block per row: k rounds, each picking the best element that ranks after
// the last one picked (topk_before is a strict total order, so the j-th
// pick is the row's j-th best).
template <class T> __global__ void top_k_kernel(i64 rows, i64 n, i64 k, const T* x, T* values, i64* indices) {
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const k::topk_before<T> before{x + r * n};
        auto better = [&](i64 a, i64 b) { return a < 0 ? b : b < 0 ? a : before(a, b) ? a : b; };
        i64 last = -1;
        for (i64 j = 0; j < k; ++j) {
            i64 best = -1;
            for (i64 i = threadIdx.x; i < n; i += blockDim.x)
                if (last < 0 || before(last, i)) best = better(best, i);
            last = block_fold(best, better);
            if (threadIdx.x == 0) {
                indices[r * k + j] = last;
                values[r * k + j] = before.row[last];
            }
        }
    }
}

__global__ void accuracy_kernel(i64 rows, i64 k, const i64* indices, const i64* label, float* acc, std::int32_t* correct,
                                std::int32_t* total) {
    i64 hits = 0;
    for (i64 r = threadIdx.x; r < rows; r += blockDim.x)
        for (i64 j = 0; j < k; ++j)
            if (indices[r * k + j] == label[r]) {
                ++hits;
                break;
            }
    hits = block_fold(hits, k::add_fn{});
    if (threadIdx.x == 0) {
        *acc = rows ? static_cast<float>(static_cast<double>(hits) / static_cast<double>(rows)) : 0.0f;
        *correct = static_cast<std::int32_t>(hits);
        *total = static_cast<std::int32_t>(rows);
    }
}

}  // namespace

// ---- launchers -----------------------------------------------------------------------------

// A one-step fused program: the fused kernel's 16-byte loads.
template <class T> void fused_one(int code, i64 n, int xk, const void* x, int yk, const void* y, T* z, stream_t s) {
    fused_program p;
    p.count = 1;
    p.n = n;
    p.steps[0] = {code, xk, yk, x, y};
    fused<T>(p, z, s);
}

template <class T>
void binary(binop op, i64 n, const T* x, const T* y, T* z, const broadcast_strides& g, device_fault* f, stream_t s) {
    int xk = 0, yk = 0;
    if constexpr (std::is_floating_point_v<T>)  // no division fault to check
        if (flat_operands(g, xk, yk))
            return fused_one<T>(fused_code_of(fused_kind::binary, static_cast<int>(op)), n, xk, x, yk, y, z, s);
    visit_binop(op, [&](auto fn) { binary_as<T>(fn, n, x, y, z, g, f, s); });
}
template <class T>
void binary_grad(binop op, i64 n, i64 xn, i64 yn, const T* x, const T* y, const T* out, const T* dout, T* dx, T* dy,
                 const broadcast_strides& g, void* scratch, std::size_t scratch_bytes, stream_t s) {
    visit_binop(op, [&](auto fn) { binary_grad_as<T>(fn, n, xn, yn, x, y, out, dout, dx, dy, g, scratch, scratch_bytes, s); });
}
template <class T> void unary(unop op, const unary_params& p, i64 n, const T* x, T* z, stream_t s) {
    if constexpr (std::is_floating_point_v<T>)
        if (static_cast<int>(op) <= static_cast<int>(unop::gelu_tanh))  // no attributes
            return fused_one<T>(fused_code_of(fused_kind::unary, static_cast<int>(op)), n, 1, x, 0, nullptr, z, s);
    visit_unop<T>(op, p, [&](auto fn) {
        using F = decltype(fn);
        // Integers have abs and square only (as on the CPU).
        if constexpr (std::is_floating_point_v<T> || std::is_same_v<F, k::abs_fn> || std::is_same_v<F, k::square_fn>)
            unary_as<T>(fn, n, x, z, s);
    });
}
template <class T>
void unary_grad(unop op, const unary_params& p, i64 n, const T* x, const T* out, const T* dout, T* dx, stream_t s) {
    if (n == 0) return;
    visit_unop<T>(op, p, [&](auto fn) { unary_grad_kernel<<<grid_for(n), block_threads, 0, s>>>(n, x, out, dout, dx, fn); });
}
template <class T> void scale(i64 n, const T* x, T* z, T sc, T b, bool bias_after, stream_t s) {
    if (bias_after) unary_as<T>(k::scale_fn<T, true>{sc, b}, n, x, z, s);
    else unary_as<T>(k::scale_fn<T, false>{sc, b}, n, x, z, s);
}
template <class T> void fill(i64 n, T* z, T v, stream_t s) {
    if (n > 0) fill_kernel<<<grid_for(n), block_threads, 0, s>>>(n, z, v);
}
template <class S, class D> void cast(i64 n, const S* x, D* z, stream_t s) {
    if (n > 0) cast_kernel<<<grid_for(n), block_threads, 0, s>>>(n, x, z);
}
template <class T> void add_into(i64 n, const T* x, T* z, stream_t s) {
    if (n > 0) add_into_kernel<<<grid_for(n), block_threads, 0, s>>>(n, x, z);
}

// Blocks a reduction aims for: several waves of blocks on every SM, so that
// none idles while others finish.
constexpr i64 reduce_target_blocks = 4096;
constexpr i64 max_splits = 65535;  // gridDim.y

// Splits of the reduced elements (each folded by its own block or thread
// row) for `items` parallel items of `count` elements, at least `min_per_split`
// elements each, with partials of `outputs` outputs fitting the scratch.
i64 splits_for(i64 items, i64 count, i64 min_per_split, i64 outputs, std::size_t elem, std::size_t scratch_bytes) {
    if (items >= reduce_target_blocks || scratch_bytes == 0) return 1;
    i64 s = (reduce_target_blocks + items - 1) / items;
    s = std::min({s, (count + min_per_split - 1) / min_per_split, max_splits,
                  static_cast<i64>(scratch_bytes / (elem * static_cast<std::size_t>(outputs)))});
    return s < 1 ? 1 : s;
}

// y[o] = the fold of ld(o, off) over the walk's reduced offsets of output o.
template <class T, class F, class L>
void reduce_with(redop op, const reduce_walk& w, L ld, T* y, T* scratch, std::size_t scratch_bytes, T init, F f,
                 stream_t s) {
    if (w.red_rank == 1 && w.red_st[0] == 1) {  // contiguous runs: a block per (output, split)
        const i64 splits = splits_for(w.outputs, w.count, 8 * block_threads, w.outputs, sizeof(T), scratch_bytes);
        const dim3 grid(grid_items(w.outputs), static_cast<unsigned>(splits));
        reduce_inner_kernel<<<grid, block_threads, 0, s>>>(w, ld, y, scratch, splits, init, f, op);
        if (splits > 1)
            reduce_partials_kernel<<<grid_items(w.outputs), block_threads, 0, s>>>(w.outputs, splits, splits, 1, scratch,
                                                                                  y, w.count, init, f, op);
    } else if (w.red_rank == 1 && w.kept_rank == 1 && w.kept_st[0] == 1) {  // columns: a thread per (output, split)
        const i64 col_blocks = (w.outputs + block_threads - 1) / block_threads;
        const i64 splits = splits_for(col_blocks, w.count, 32, w.outputs, sizeof(T), scratch_bytes);
        const dim3 grid(grid_for(w.outputs), static_cast<unsigned>(splits));
        reduce_outer_kernel<<<grid, block_threads, 0, s>>>(w, ld, y, scratch, splits, init, f, op);
        if (splits > 1)
            reduce_partials_kernel<<<grid_items(w.outputs), block_threads, 0, s>>>(w.outputs, splits, 1, w.outputs,
                                                                                  scratch, y, w.count, init, f, op);
    } else {
        reduce_kernel<<<grid_items(w.outputs), block_threads, 0, s>>>(w, ld, y, init, f, op);
    }
}

// The gradient of operand A (x when ForX, else y) where the other operand
// has the output's shape: element j of dA folds the terms of the output
// elements it reached, a reduction over A's broadcast dims.
template <bool ForX, class T, class F> struct grad_load {
    const T *x, *y, *out, *d;
    F f;
    __device__ T operator()(i64 j, i64 zo) const {
        if constexpr (ForX) return f.dx(x[j], y[zo], out[zo], d[zo]);
        else return f.dy(x[zo], y[j], out[zo], d[zo]);
    }
};

template <bool ForX, class T, class F>
void operand_grad(F f, i64 n, i64 an, i64 bn, const T* x, const T* y, const T* out, const T* d, T* da,
                  const broadcast_strides& g, T* scratch, std::size_t scratch_bytes, stream_t s) {
    if (!da || an == 0) return;
    if (bn == n && an < n) {
        const i64* ast = ForX ? g.xst : g.yst;
        bool red[max_rank];
        for (int dd = 0; dd < g.rank; ++dd) red[dd] = ast[dd] == 0 && g.zs[dd] != 1;
        reduce_with(redop::sum, reduce_walk_of(g.rank, g.zs, red), grad_load<ForX, T, F>{x, y, out, d, f}, da, scratch,
                    scratch_bytes, T(0), k::add_fn{}, s);
    } else {
        binary_grad_reduce_kernel<ForX><<<grid_for(an), block_threads, 0, s>>>(an, x, y, out, d, da, g, f);
    }
}

template <class T, class F>
void binary_grad_as(F f, i64 n, i64 xn, i64 yn, const T* x, const T* y, const T* out, const T* d, T* dx, T* dy,
                    const broadcast_strides& g, void* scratch, std::size_t scratch_bytes, stream_t s) {
    if (xn == n && yn == n) {
        if (n > 0) binary_grad_flat_kernel<<<grid_for(n), block_threads, 0, s>>>(n, x, y, out, d, dx, dy, f);
        return;
    }
    if (n == 0) {  // nothing reached the operands
        if (dx && xn) cudaMemsetAsync(dx, 0, static_cast<std::size_t>(xn) * sizeof(T), s);
        if (dy && yn) cudaMemsetAsync(dy, 0, static_cast<std::size_t>(yn) * sizeof(T), s);
        return;
    }
    T* part = static_cast<T*>(scratch);
    operand_grad<true>(f, n, xn, yn, x, y, out, d, dx, g, part, scratch_bytes, s);
    operand_grad<false>(f, n, yn, xn, x, y, out, d, dy, g, part, scratch_bytes, s);
}

template <class T> void fused(const fused_program& p, T* z, stream_t s) {
    if (p.n == 0) return;
    auto aligned = [](const void* q) { return reinterpret_cast<std::uintptr_t>(q) % 16 == 0; };
    bool all = aligned(z);
    for (int k = 0; k < p.count; ++k) {
        all = all && (p.steps[k].xk != 1 || aligned(p.steps[k].x));
        all = all && (p.steps[k].yk != 1 || aligned(p.steps[k].y));
    }
    // Two groups per thread: on an H200 the triad a*b+c ran at 0.977 ms
    // with two, 0.989-1.00 with one and 0.977 with four (which takes twice
    // the registers), a device-to-device copy of the same bytes 1.02 ms.
    fused_launch<T, 2>(p, z, all, s);
}

template <class T>
void reduce(redop op, const reduce_walk& w, const T* x, T* y, void* scratch, std::size_t scratch_bytes, stream_t s) {
    if (w.outputs == 0) return;
    T* part = static_cast<T*>(scratch);
    const plain_load<T> ld{x};
    if constexpr (std::is_same_v<T, bool>) {
        if (op == redop::all) reduce_with(op, w, ld, y, part, scratch_bytes, true, k::logical_and_fn{}, s);
        else reduce_with(op, w, ld, y, part, scratch_bytes, false, k::logical_or_fn{}, s);
    } else if (op == redop::max) {
        reduce_with(op, w, ld, y, part, scratch_bytes, max_identity<T>(), k::max_fn{}, s);
    } else if (op == redop::min) {
        reduce_with(op, w, ld, y, part, scratch_bytes, min_identity<T>(), k::min_fn{}, s);
    } else if (op == redop::prod) {
        reduce_with(op, w, ld, y, part, scratch_bytes, T(1), k::mul_fn{}, s);
    } else {
        reduce_with(op, w, ld, y, part, scratch_bytes, T(0), k::add_fn{}, s);
    }
}
template <class T>
void reduce_grad(redop op, const reduce_grad_walk& w, const T* x, const T* out, const T* dout, T* dx, T scale,
                 stream_t s) {
    if (w.n > 0) reduce_grad_kernel<<<grid_for(w.n), block_threads, 0, s>>>(op, w, x, out, dout, dx, scale);
}

template <class T>
void reduce_prod_grad(const reduce_walk& w, const T* x, const T* out, const T* dout, T* dx, stream_t s) {
    if (w.outputs > 0 && w.count > 0)
        reduce_prod_grad_kernel<<<grid_items(w.outputs), block_threads, 0, s>>>(w, x, out, dout, dx);
}

template <class T> void softmax(i64 outer, i64 d, i64 inner, const T* x, T* y, stream_t s) {
    if (outer * inner > 0 && d > 0) softmax_kernel<<<grid_items(outer * inner), block_threads, 0, s>>>(outer, d, inner, x, y);
}
template <class T> void softmax_grad(i64 outer, i64 d, i64 inner, const T* y, const T* dy, T* dx, stream_t s) {
    if (outer * inner > 0 && d > 0)
        softmax_grad_kernel<<<grid_items(outer * inner), block_threads, 0, s>>>(outer, d, inner, y, dy, dx);
}
template <class T>
void lookup_table(i64 rows, i64 d, const T* w, const void* ids, bool ids32, i64 n, i64 pad, T* out, device_fault* f,
                  stream_t s) {
    if (n * d == 0) return;
    lookup_table_kernel<<<grid_for(n * d), block_threads, 0, s>>>(rows, d, w, ids, ids32, n, pad, out, f);
    id_fault_kernel<<<1, 1, 0, s>>>(ids, ids32, rows, f);
}
template <class T>
void lookup_table_grad(i64 rows, i64 d, const void* ids, bool ids32, i64 n, i64 pad, const T* dout, T* dw,
                       device_fault* f, stream_t s) {
    if (rows * d == 0) return;
    lookup_table_grad_kernel<<<grid_for(d), block_threads, 0, s>>>(rows, d, ids, ids32, n, pad, dout, dw, f);
    id_fault_kernel<<<1, 1, 0, s>>>(ids, ids32, rows, f);
}
template <class T> void log_softmax(i64 outer, i64 d, i64 inner, const T* x, T* y, stream_t s) {
    if (outer * inner > 0 && d > 0)
        log_softmax_kernel<<<grid_items(outer * inner), block_threads, 0, s>>>(outer, d, inner, x, y);
}
template <class T> void log_softmax_grad(i64 outer, i64 d, i64 inner, const T* y, const T* dy, T* dx, stream_t s) {
    if (outer * inner > 0 && d > 0)
        log_softmax_grad_kernel<<<grid_items(outer * inner), block_threads, 0, s>>>(outer, d, inner, y, dy, dx);
}
template <class T>
void cross_entropy(bool soft, i64 rows, i64 d, const T* x, const void* label, i64 ignore, T* y, device_fault* f,
                   stream_t s) {
    if (rows == 0) return;
    if (soft) cross_entropy_soft_kernel<<<grid_items(rows), block_threads, 0, s>>>(rows, d, x, static_cast<const T*>(label), y);
    else cross_entropy_hard_kernel<<<grid_for(rows), block_threads, 0, s>>>(rows, d, x, label, ignore, y, f);
    finish_label_faults(soft, label, d, f, s);
}
template <class T>
void cross_entropy_grad(bool soft, i64 rows, i64 d, const T* x, const void* label, i64 ignore, const T* dy, T* dx,
                        device_fault* f, stream_t s) {
    if (rows * d > 0)
        cross_entropy_grad_kernel<<<grid_for(rows * d), block_threads, 0, s>>>(soft, rows, d, x, label, ignore, dy, dx, f);
    else if (!soft && rows > 0 && d == 0)  // every label not ignored is out of range
        cross_entropy_hard_kernel<<<grid_for(rows), block_threads, 0, s>>>(rows, d, x, label, ignore,
                                                                           static_cast<T*>(nullptr), f);
    if (rows > 0) finish_label_faults(soft, label, d, f, s);
}
template <class T>
void softmax_with_cross_entropy(bool soft, i64 rows, i64 d, const T* logits, const void* label, i64 ignore, T* sm,
                                T* loss, device_fault* f, stream_t s) {
    if (rows == 0) return;
    swce_kernel<<<grid_items(rows), block_threads, 0, s>>>(soft, rows, d, logits, label, ignore, sm, loss, f);
    finish_label_faults(soft, label, d, f, s);
}
template <class T>
void softmax_with_cross_entropy_grad(bool soft, i64 rows, i64 d, const void* label, i64 ignore, const T* sm,
                                     const T* dl, T* dx, device_fault* f, stream_t s) {
    if (rows == 0) return;
    if (soft) swce_grad_soft_kernel<<<grid_items(rows), block_threads, 0, s>>>(rows, d, static_cast<const T*>(label), sm, dl, dx);
    else if (d > 0) swce_grad_hard_kernel<<<grid_for(rows * d), block_threads, 0, s>>>(rows, d, label, ignore, sm, dl, dx, f);
    else
        cross_entropy_hard_kernel<<<grid_for(rows), block_threads, 0, s>>>(rows, d, sm, label, ignore,
                                                                           static_cast<T*>(nullptr), f);
    finish_label_faults(soft, label, d, f, s);
}

template <class T> void sgd(i64 n, const T* p, const T* g, const T* lr, T* out, stream_t s) {
    if (n > 0) sgd_kernel<<<grid_for(n), block_threads, 0, s>>>(n, p, g, lr, out);
}
template <class T>
void momentum(i64 n, const T* p, const T* g, const T* v, const T* lr, T mu, bool nesterov, T rescale, T l2, T* po, T* vo,
              stream_t s) {
    if (n > 0) momentum_kernel<<<grid_for(n), block_threads, 0, s>>>(n, p, g, v, lr, mu, nesterov, rescale, l2, po, vo);
}
template <class T>
void adam(i64 n, const T* p, const T* g, const T* m1, const T* m2, const T* lr, T b1, T b2, T eps, const T* b1p,
          const T* b2p, T coeff, T lr_ratio, T* po, T* m1o, T* m2o, T* b1po, T* b2po, stream_t s) {
    if (n > 0)
        adam_kernel<<<grid_for(n), block_threads, 0, s>>>(n, p, g, m1, m2, lr, b1, b2, eps, b1p, b2p, coeff, lr_ratio, po,
                                                          m1o, m2o);
    adam_pow_kernel<<<1, 1, 0, s>>>(b1p, b2p, b1, b2, b1po, b2po);
}

template <class Word> void permute(i64 n, const permute_walk& w, const Word* x, Word* y, stream_t s) {
    if (n > 0) permute_kernel<false><<<grid_for(n), block_threads, 0, s>>>(n, w, x, y);
}
template <class Word> void unpermute(i64 n, const permute_walk& w, const Word* x, Word* y, stream_t s) {
    if (n > 0) permute_kernel<true><<<grid_for(n), block_threads, 0, s>>>(n, w, x, y);
}

template <class T>
void compare(cmpop op, i64 n, const T* x, const T* y, bool* z, const broadcast_strides& g, stream_t s) {
    if (n == 0) return;
    auto launch = [&](auto f) { compare_kernel<<<grid_for(n), block_threads, 0, s>>>(n, x, y, z, g, f); };
    switch (op) {
        case cmpop::less_than: return launch(k::less_than_fn{});
        case cmpop::less_equal: return launch(k::less_equal_fn{});
        case cmpop::greater_than: return launch(k::greater_than_fn{});
        case cmpop::greater_equal: return launch(k::greater_equal_fn{});
        case cmpop::equal: return launch(k::equal_fn{});
        case cmpop::not_equal: return launch(k::not_equal_fn{});
        case cmpop::logical_and: return launch(k::logical_and_fn{});
        case cmpop::logical_or: return launch(k::logical_or_fn{});
        case cmpop::logical_xor: return launch(k::logical_xor_fn{});
    }
}
template <class T> void logical_not(i64 n, const T* x, bool* z, stream_t s) {
    if (n > 0) logical_not_kernel<<<grid_for(n), block_threads, 0, s>>>(n, x, z);
}
template <class T> void where(i64 n, const bool* c, const T* x, const T* y, T* z, stream_t s) {
    if (n > 0) where_kernel<<<grid_for(n), block_threads, 0, s>>>(n, c, x, y, z);
}
template <class T> void where_grad(i64 n, const bool* c, const T* d, T* dx, T* dy, stream_t s) {
    if (n > 0) where_grad_kernel<<<grid_for(n), block_threads, 0, s>>>(n, c, d, dx, dy);
}

template <class T, class I> void arg_extreme(bool max, i64 outer, i64 d, i64 inner, const T* x, I* out, stream_t s) {
    if (outer * inner == 0) return;
    if (max) arg_extreme_kernel<true><<<grid_for(outer * inner), block_threads, 0, s>>>(outer, d, inner, x, out);
    else arg_extreme_kernel<false><<<grid_for(outer * inner), block_threads, 0, s>>>(outer, d, inner, x, out);
}
template <class T> void cumsum(i64 outer, i64 d, i64 inner, const T* x, T* y, bool exclusive, bool reverse, stream_t s) {
    if (outer * inner * d > 0)
        cumsum_kernel<<<grid_for(outer * inner), block_threads, 0, s>>>(outer, d, inner, x, y, exclusive, reverse);
}
template <class T>
void one_hot(i64 n, i64 depth, const void* ids, bool ids32, bool allow, T* out, device_fault* f, stream_t s) {
    if (n * depth == 0) return;
    one_hot_kernel<<<grid_for(n * depth), block_threads, 0, s>>>(n, depth, ids, ids32, allow, out, f);
    if (!allow) id_fault_kernel<<<1, 1, 0, s>>>(ids, ids32, depth, f);
}

template <class Word> void tile(i64 n, const tile_walk& w, const Word* x, Word* y, stream_t s) {
    if (n > 0) tile_kernel<<<grid_for(n), block_threads, 0, s>>>(n, w, x, y);
}
template <class T> void tile_grad(i64 nx, const tile_walk& w, const T* dy, T* dx, stream_t s) {
    if (nx > 0) tile_grad_kernel<<<grid_for(nx), block_threads, 0, s>>>(nx, w, dy, dx);
}
template <class T>
void gather(i64 outer, i64 d, i64 inner, const T* x, const void* ids, bool ids32, i64 n, T* out, device_fault* f,
            stream_t s) {
    if (n == 0) return;
    if (outer * inner > 0) gather_kernel<<<grid_for(outer * n * inner), block_threads, 0, s>>>(outer, d, inner, x, ids, ids32, n, out, f);
    else check_ids_kernel<<<grid_for(n), block_threads, 0, s>>>(ids, ids32, n, d, f);
    id_fault_kernel<<<1, 1, 0, s>>>(ids, ids32, d, f);
}
template <class T>
void gather_grad(i64 outer, i64 d, i64 inner, const void* ids, bool ids32, i64 n, const T* dout, bool overwrite, T* dx,
                 device_fault* f, stream_t s) {
    if (outer * inner > 0)
        gather_grad_kernel<<<grid_for(outer * inner), block_threads, 0, s>>>(outer, d, inner, ids, ids32, n, dout, overwrite, dx, f);
    else if (n > 0)
        check_ids_kernel<<<grid_for(n), block_threads, 0, s>>>(ids, ids32, n, d, f);
    id_fault_kernel<<<1, 1, 0, s>>>(ids, ids32, d, f);
}
template <class T>
void scatter(i64 rows, i64 inner, const T* x, const void* ids, bool ids32, i64 n, const T* updates, bool overwrite,
             T* out, device_fault* f, stream_t s) {
    if (out != x && rows * inner > 0)
        cudaMemcpyAsync(out, x, static_cast<std::size_t>(rows * inner) * sizeof(T), cudaMemcpyDeviceToDevice, s);
    if (n == 0) return;
    if (inner > 0) scatter_kernel<<<grid_for(inner), block_threads, 0, s>>>(rows, inner, ids, ids32, n, updates, overwrite, out, f);
    else check_ids_kernel<<<grid_for(n), block_threads, 0, s>>>(ids, ids32, n, rows, f);
    id_fault_kernel<<<1, 1, 0, s>>>(ids, ids32, rows, f);
}
template <class T>
void scatter_grad(i64 rows, i64 inner, const void* ids, bool ids32, i64 n, const T* dout, T* dx, T* dupdates,
                  device_fault* f, stream_t s) {
    if (dx && rows * inner > 0)
        cudaMemcpyAsync(dx, dout, static_cast<std::size_t>(rows * inner) * sizeof(T), cudaMemcpyDeviceToDevice, s);
    if (n == 0) return;
    if (inner > 0) scatter_grad_kernel<<<grid_for(n * inner), block_threads, 0, s>>>(rows, inner, ids, ids32, n, dout, dx, dupdates, f);
    else check_ids_kernel<<<grid_for(n), block_threads, 0, s>>>(ids, ids32, n, rows, f);
    id_fault_kernel<<<1, 1, 0, s>>>(ids, ids32, rows, f);
}

template <class T> void top_k(i64 rows, i64 n, i64 k, const T* x, T* values, i64* indices, stream_t s) {
    if (rows > 0 && k > 0) top_k_kernel<<<grid_items(rows), block_threads, 0, s>>>(rows, n, k, x, values, indices);
}
void accuracy(i64 rows, i64 k, const i64* indices, const i64* label, float* acc, std::int32_t* correct,
              std::int32_t* total, stream_t s) {
    accuracy_kernel<<<1, block_threads, 0, s>>>(rows, k, indices, label, acc, correct, total);
}

// ---- the instantiations the op glue uses ----------------------------------------------------

#define DLGRAPH_CUDA_ARITH(T)                                                                                     \
    template void binary<T>(binop, i64, const T*, const T*, T*, const broadcast_strides&, device_fault*, stream_t); \
    template void scale<T>(i64, const T*, T*, T, T, bool, stream_t);                                             \
    template void add_into<T>(i64, const T*, T*, stream_t);                                                       \
    template void reduce<T>(redop, const reduce_walk&, const T*, T*, void*, std::size_t, stream_t);
#define DLGRAPH_CUDA_FLOAT(T)                                                                                     \
    template void binary_grad<T>(binop, i64, i64, i64, const T*, const T*, const T*, const T*, T*, T*,           \
                                 const broadcast_strides&, void*, std::size_t, stream_t);                         \
    template void unary<T>(unop, const unary_params&, i64, const T*, T*, stream_t);                               \
    template void fused<T>(const fused_program&, T*, stream_t);                                                    \
    template void unary_grad<T>(unop, const unary_params&, i64, const T*, const T*, const T*, T*, stream_t);      \
    template void reduce_grad<T>(redop, const reduce_grad_walk&, const T*, const T*, const T*, T*, T, stream_t);  \
    template void reduce_prod_grad<T>(const reduce_walk&, const T*, const T*, const T*, T*, stream_t);            \
    template void softmax<T>(i64, i64, i64, const T*, T*, stream_t);                                              \
    template void softmax_grad<T>(i64, i64, i64, const T*, const T*, T*, stream_t);                               \
    template void log_softmax<T>(i64, i64, i64, const T*, T*, stream_t);                                          \
    template void lookup_table<T>(i64, i64, const T*, const void*, bool, i64, i64, T*, device_fault*, stream_t);  \
    template void lookup_table_grad<T>(i64, i64, const void*, bool, i64, i64, const T*, T*, device_fault*,        \
                                       stream_t);                                                                 \
    template void log_softmax_grad<T>(i64, i64, i64, const T*, const T*, T*, stream_t);                           \
    template void cross_entropy<T>(bool, i64, i64, const T*, const void*, i64, T*, device_fault*, stream_t);      \
    template void cross_entropy_grad<T>(bool, i64, i64, const T*, const void*, i64, const T*, T*, device_fault*,  \
                                        stream_t);                                                                \
    template void softmax_with_cross_entropy<T>(bool, i64, i64, const T*, const void*, i64, T*, T*, device_fault*, \
                                                stream_t);                                                        \
    template void softmax_with_cross_entropy_grad<T>(bool, i64, i64, const void*, i64, const T*, const T*, T*,    \
                                                     device_fault*, stream_t);                                    \
    template void sgd<T>(i64, const T*, const T*, const T*, T*, stream_t);                                        \
    template void momentum<T>(i64, const T*, const T*, const T*, const T*, T, bool, T, T, T*, T*, stream_t);            \
    template void adam<T>(i64, const T*, const T*, const T*, const T*, const T*, T, T, T, const T*, const T*, T, T,  \
                          T*, T*, T*, T*, T*, stream_t);
DLGRAPH_CUDA_ARITH(float)
DLGRAPH_CUDA_ARITH(double)
DLGRAPH_CUDA_ARITH(std::int32_t)
DLGRAPH_CUDA_ARITH(std::int64_t)
DLGRAPH_CUDA_FLOAT(float)
DLGRAPH_CUDA_FLOAT(double)
template void unary<std::int32_t>(unop, const unary_params&, i64, const std::int32_t*, std::int32_t*, stream_t);
template void unary<std::int64_t>(unop, const unary_params&, i64, const std::int64_t*, std::int64_t*, stream_t);

#define DLGRAPH_CUDA_FILL(T) template void fill<T>(i64, T*, T, stream_t);
DLGRAPH_CUDA_FILL(bool)
DLGRAPH_CUDA_FILL(std::int16_t)
DLGRAPH_CUDA_FILL(std::int32_t)
DLGRAPH_CUDA_FILL(std::int64_t)
DLGRAPH_CUDA_FILL(float)
DLGRAPH_CUDA_FILL(double)

#define DLGRAPH_CUDA_CAST_TO(S, D) template void cast<S, D>(i64, const S*, D*, stream_t);
#define DLGRAPH_CUDA_CAST(S)                                                                                      \
    DLGRAPH_CUDA_CAST_TO(S, bool)                                                                                 \
    DLGRAPH_CUDA_CAST_TO(S, std::int16_t)                                                                         \
    DLGRAPH_CUDA_CAST_TO(S, std::int32_t)                                                                         \
    DLGRAPH_CUDA_CAST_TO(S, std::int64_t) DLGRAPH_CUDA_CAST_TO(S, float) DLGRAPH_CUDA_CAST_TO(S, double)
DLGRAPH_CUDA_CAST(bool)
DLGRAPH_CUDA_CAST(std::int16_t)
DLGRAPH_CUDA_CAST(std::int32_t)
DLGRAPH_CUDA_CAST(std::int64_t)
DLGRAPH_CUDA_CAST(float)
DLGRAPH_CUDA_CAST(double)

#define DLGRAPH_CUDA_WORD(W)                                                   \
    template void permute<W>(i64, const permute_walk&, const W*, W*, stream_t); \
    template void unpermute<W>(i64, const permute_walk&, const W*, W*, stream_t); \
    template void tile<W>(i64, const tile_walk&, const W*, W*, stream_t);
DLGRAPH_CUDA_WORD(std::uint8_t)
DLGRAPH_CUDA_WORD(std::uint16_t)
DLGRAPH_CUDA_WORD(std::uint32_t)
DLGRAPH_CUDA_WORD(std::uint64_t)

#define DLGRAPH_CUDA_LOGIC(T)                                                                         \
    template void compare<T>(cmpop, i64, const T*, const T*, bool*, const broadcast_strides&, stream_t); \
    template void logical_not<T>(i64, const T*, bool*, stream_t);
DLGRAPH_CUDA_LOGIC(bool)
DLGRAPH_CUDA_LOGIC(std::int32_t)
DLGRAPH_CUDA_LOGIC(std::int64_t)
DLGRAPH_CUDA_LOGIC(float)
DLGRAPH_CUDA_LOGIC(double)
#define DLGRAPH_CUDA_SELECT(T)                                                         \
    template void where<T>(i64, const bool*, const T*, const T*, T*, stream_t);        \
    template void top_k<T>(i64, i64, i64, const T*, T*, i64*, stream_t);
template void reduce<bool>(redop, const reduce_walk&, const bool*, bool*, void*, std::size_t, stream_t);
#define DLGRAPH_CUDA_ARG(T)                                                                   \
    template void arg_extreme<T, std::int32_t>(bool, i64, i64, i64, const T*, std::int32_t*, stream_t); \
    template void arg_extreme<T, std::int64_t>(bool, i64, i64, i64, const T*, std::int64_t*, stream_t); \
    template void cumsum<T>(i64, i64, i64, const T*, T*, bool, bool, stream_t);                         \
    template void one_hot<T>(i64, i64, const void*, bool, bool, T*, device_fault*, stream_t);                     \
    template void gather<T>(i64, i64, i64, const T*, const void*, bool, i64, T*, device_fault*, stream_t);       \
    template void scatter<T>(i64, i64, const T*, const void*, bool, i64, const T*, bool, T*, device_fault*, stream_t);
DLGRAPH_CUDA_ARG(std::int32_t)
DLGRAPH_CUDA_ARG(std::int64_t)
DLGRAPH_CUDA_ARG(float)
DLGRAPH_CUDA_ARG(double)
DLGRAPH_CUDA_SELECT(std::int32_t)
DLGRAPH_CUDA_SELECT(std::int64_t)
DLGRAPH_CUDA_SELECT(float)
DLGRAPH_CUDA_SELECT(double)
template void where_grad<float>(i64, const bool*, const float*, float*, float*, stream_t);
template void where_grad<double>(i64, const bool*, const double*, double*, double*, stream_t);
#define DLGRAPH_CUDA_INDEX_GRAD(T)                                                                                      \
    template void tile_grad<T>(i64, const tile_walk&, const T*, T*, stream_t);                                         \
    template void gather_grad<T>(i64, i64, i64, const void*, bool, i64, const T*, bool, T*, device_fault*, stream_t); \
    template void scatter_grad<T>(i64, i64, const void*, bool, i64, const T*, T*, T*, device_fault*, stream_t);
DLGRAPH_CUDA_INDEX_GRAD(float)
DLGRAPH_CUDA_INDEX_GRAD(double)

}  // namespace dlgraph::cuda_kernels
