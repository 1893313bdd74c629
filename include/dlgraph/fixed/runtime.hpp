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

#include <cstddef>
#include <cstdint>

#include "dlgraph/kernels/config.hpp"
#include "dlgraph/kernels/elementwise.hpp"
#include "dlgraph/kernels/gemm.hpp"
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
