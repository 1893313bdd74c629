// What a fixed model (a header `dlgraph emit` wrote) needs at run time: the
// kernel core and a few helpers over it. No exceptions, heap, threads, RTTI
// or containers: it builds with -fno-exceptions -fno-rtti for a
// microcontroller, and a model's steps are direct calls into the core with
// constant extents, arena offsets and weights, which the compiler folds.
//
// The helpers mirror what the CPU's kernels (cpu/*.hpp) do around the same
// core calls, serially, so a model's results are bit for bit those of
// Session<cpu> on the same machine (the CPU splits work over threads only
// where that does not change a bit).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "dlgraph/kernels/config.hpp"
#include "dlgraph/kernels/conv.hpp"
#include "dlgraph/kernels/elementwise.hpp"
#include "dlgraph/kernels/gemm.hpp"
#include "dlgraph/kernels/norm.hpp"
#include "dlgraph/kernels/quant.hpp"
#include "dlgraph/kernels/reduce.hpp"
#include "dlgraph/kernels/shape.hpp"
#include "dlgraph/kernels/softmax.hpp"

namespace dlgraph::fixed {

// z = f(x, y) over a broadcast walk `g` of an output of n elements (the
// walk is computed by the emitter with kernels::broadcast_walk_of).
template <class T, class F>
inline void broadcast(const T* x, const T* y, T* z, std::int64_t n, const kernels::broadcast_geometry& g,
                      F f) noexcept {
    kernels::broadcast_runs(g, n, [&](std::int64_t ox, std::int64_t oy, std::int64_t oz) {
        kernels::binary_loop_serial(g.inner, x + ox, g.sx, y + oy, g.sy, z + oz, f);
    });
}

// Bytes of workspace a product needs (0 on the unpacked path, which every
// product of fewer than kernels::gemm_small_m rows takes): a model's arena
// adds the largest of its products', computed by the compiler that builds
// the model, for the vectors of its target.
template <class T>
constexpr std::size_t gemm_workspace_bytes(bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k) noexcept {
    return sizeof(T) * static_cast<std::size_t>(kernels::gemm_workspace_size<T>(trans_b, m, n, k));
}

// C = alpha * op(A) * op(B) on the calling thread, with the workspace
// (`ws`, 64-byte aligned, gemm_workspace_bytes of this product at least).
template <class T>
inline void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
                 std::int64_t lda, const T* b, std::int64_t ldb, T* c, std::int64_t ldc, std::byte* ws,
                 std::size_t ws_bytes) noexcept {
    // The emitter sized and aligned the workspace, so the core cannot refuse it.
    (void)kernels::gemm_serial(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, false, c, ldc,
                               reinterpret_cast<T*>(ws), static_cast<std::int64_t>(ws_bytes / sizeof(T)));
}

// ---- convolutional networks (as cpu/conv.hpp and cpu/norm.hpp) ----------------

// Bytes of a convolution's workspace: its column matrix (kk x ohw, none for
// a window that reads the image as it is), rounded to 64 bytes, then its
// product's workspace.
template <class T>
constexpr std::size_t conv2d_workspace_bytes(bool identity, std::int64_t mg, std::int64_t kk, std::int64_t ohw) noexcept {
    const std::size_t col = identity ? 0 : (sizeof(T) * static_cast<std::size_t>(kk * ohw) + 63) / 64 * 64;
    return col + gemm_workspace_bytes<T>(false, mg, ohw, kk);
}

// y [images, groups * mg, oh, ow] = x [images, groups * g.c, h, w] (*)
// f [groups * mg, g.c, kh, kw]: per image and group, the column matrix and
// one product, as cpu_ops::conv2d_op.
template <class T>
inline void conv2d(const kernels::window2d& g, std::int64_t images, std::int64_t groups, std::int64_t mg, const T* x,
                   const T* f, T* y, std::byte* ws, std::size_t ws_bytes) noexcept {
    const std::int64_t kk = g.col_rows(), ohw = g.col_cols(), in_group = g.c * g.h * g.w;
    const std::size_t col_bytes = conv2d_workspace_bytes<T>(g.identity(), 0, kk, ohw);
    T* const col = reinterpret_cast<T*>(ws);
    for (std::int64_t n = 0; n < images; ++n)
        for (std::int64_t k = 0; k < groups; ++k) {
            const T* image = x + (n * groups + k) * in_group;
            if (!g.identity()) kernels::im2col(g, image, col);
            gemm<T>(false, false, mg, ohw, kk, T(1), f + k * mg * kk, kk, g.identity() ? image : col, ohw,
                    y + (n * groups + k) * mg * ohw, ohw, ws + col_bytes, ws_bytes - col_bytes);
        }
}

// Max or average pooling of `planes` channels (h x w each, g.c = 1).
template <class T>
inline void pool2d(const kernels::window2d& g, std::int64_t planes, bool is_max, bool adaptive, bool exclusive,
                   const T* x, T* y) noexcept {
    const std::int64_t in_plane = g.h * g.w, out_plane = g.oh * g.ow;
    for (std::int64_t i = 0; i < planes; ++i)
        if (is_max) kernels::max_pool2d(g, adaptive, x + i * in_plane, y + i * out_plane);
        else kernels::avg_pool2d(g, adaptive, exclusive, x + i * in_plane, y + i * out_plane);
}

// Batch normalization with the moving statistics (is_test), x [n, c, hw...]:
// y = (x - mean) * (1 / sqrt(var + eps)) * scale + bias per channel.
template <class T>
inline void batch_norm_inference(const T* x, T* y, std::int64_t n, std::int64_t c, std::int64_t hw, const T* scale,
                                 const T* bias, const T* mean, const T* var, double eps) noexcept {
    const kernels::channel ch{n, hw, c * hw};
    for (std::int64_t k = 0; k < c; ++k) {
        const T inv = static_cast<T>(1.0 / std::sqrt(static_cast<double>(var[k]) + eps));
        kernels::normalize_channel(x + k * hw, y + k * hw, ch, static_cast<T>(static_cast<double>(mean[k])), inv,
                                   scale[k], bias[k]);
    }
}

// Between two steps. The arena holds values of different types at the same
// offsets over a run (a double buffer, later a float one), and the
// compiler's type-based alias analysis would let it move a load of one type
// past a store of the other once the steps are inlined into run(); this
// barrier keeps every step's memory accesses after the previous step's.
// It costs no instruction.
inline void step_boundary() noexcept {
#if defined(__GNUC__) || defined(__clang__)
    __asm__ __volatile__("" ::: "memory");
#endif
}

// A model's arena checked against a budget at compile time: a model whose
// arena is larger fails to compile, and the compiler's message shows both
// numbers (the failed condition with the template's arguments).
template <std::size_t ArenaBytes, std::size_t BudgetBytes> struct arena_within_budget {
    static_assert(ArenaBytes <= BudgetBytes, "dlgraph: the model's arena (bytes, left) exceeds its budget (bytes, right)");
    static constexpr bool value = true;
};

}  // namespace dlgraph::fixed
