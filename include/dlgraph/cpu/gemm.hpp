// The CPU's matrix product: the kernel core's GEMM (kernels/gemm.hpp) split
// over the thread pool, with each thread's packing workspace kept between
// calls, or the system's BLAS. Every matrix-product kernel and the public
// dlgraph::gemm (dlgraph/gemm.hpp) come here.
//
// With parallelism() > 1 the product is split into column (or row) strips of
// C, one per thread; each strip is an independent product, so the result
// does not depend on the thread count.
//
// Build with DLGRAPH_USE_CBLAS defined (the CMake option DLGRAPH_CBLAS) to
// call the system's cblas_sgemm / cblas_dgemm instead.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include "dlgraph/kernels/gemm.hpp"
#include "dlgraph/thread_pool.hpp"

#ifdef DLGRAPH_USE_CBLAS
#include <cblas.h>
#endif

namespace dlgraph::cpu_ops {

namespace gemm_detail {

// A thread's packing workspace, grown on demand and kept: after the first
// product of a given size, gemm allocates nothing.
template <class T> struct workspace {
    struct freer {
        void operator()(T* p) const { ::operator delete(p, std::align_val_t{64}); }
    };
    std::unique_ptr<T[], freer> data;
    std::int64_t size = 0;
    T* get(std::int64_t n) {
        if (n > size) {
            data.reset(static_cast<T*>(::operator new(static_cast<std::size_t>(n) * sizeof(T), std::align_val_t{64})));
            size = n;
        }
        return data.get();
    }
};
template <class T> inline workspace<T>& thread_workspace() {
    static thread_local workspace<T> ws;
    return ws;
}

// Rectangle r of the product on this thread, in this thread's workspace.
template <class T>
void block(bool trans_a, bool trans_b, std::int64_t K, T alpha, const T* A, std::int64_t lda, const T* B,
           std::int64_t ldb, bool accumulate, T* C, std::int64_t ldc, kernels::gemm_range r) {
    const std::int64_t n = kernels::gemm_workspace_size<T>(trans_b, r.r1 - r.r0, r.c1 - r.c0, K);
    T* const ws = n > 0 ? thread_workspace<T>().get(n) : nullptr;  // the unpacked path needs none
    // Sized by gemm_workspace_size and 64-byte aligned: gemm_block cannot refuse it.
    (void)kernels::gemm_block(trans_a, trans_b, K, alpha, A, lda, B, ldb, accumulate, C, ldc, r, ws, n);
}

// The most strips worth a thread each: a strip is at least ~2M
// multiply-adds (bench/README.md has its time), so waking a thread never costs more than it
// saves.
inline std::int64_t strips_worth(std::int64_t M, std::int64_t N, std::int64_t K) {
    return M * N * K / (std::int64_t(1) << 21);
}

// Runs f(b0, b1) on strips of [0, extent) in whole units (register tiles),
// one per thread where an M x N x K product is worth that many.
template <class F>
void for_each_strip(std::int64_t extent, std::int64_t unit, std::int64_t M, std::int64_t N, std::int64_t K, F f) {
    const std::int64_t units = (extent + unit - 1) / unit;
    const int strips = static_cast<int>(std::min({std::int64_t(parallelism()), strips_worth(M, N, K), units}));
    if (strips <= 1) return f(0, extent);
    parallel_for(strips, [&](int s) { f(units * s / strips * unit, std::min(extent, units * (s + 1) / strips * unit)); });
}

}  // namespace gemm_detail

// C (M x N, row stride ldc) = alpha * op(A) * op(B) (+ C if `accumulate`).
// A is stored M x K (lda) or, with trans_a, K x M; B is stored K x N (ldb)
// or, with trans_b, N x K. Pointers need no alignment.
template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, T alpha, const T* A,
          std::int64_t lda, const T* B, std::int64_t ldb, bool accumulate, T* C, std::int64_t ldc) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "gemm is for FP32 and FP64");
    if (kernels::gemm_empty(M, N, K, accumulate, C, ldc)) return;
#ifdef DLGRAPH_USE_CBLAS
    const auto ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
    const T beta = accumulate ? T(1) : T(0);
    if constexpr (std::is_same_v<T, float>)
        cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha, A,
                    static_cast<int>(lda), B, static_cast<int>(ldb), beta, C, static_cast<int>(ldc));
    else
        cblas_dgemm(CblasRowMajor, ta, tb, static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha, A,
                    static_cast<int>(lda), B, static_cast<int>(ldb), beta, C, static_cast<int>(ldc));
#else
    using kernels::gemm_range;
    constexpr std::int64_t mr = kernels::gemm_mr<T>, nr = kernels::gemm_nr<T>;
    // Threads take strips of C: columns when there are enough of them,
    // else rows.
    const int threads = parallelism();
    int strips = static_cast<int>(std::min<std::int64_t>(threads, gemm_detail::strips_worth(M, N, K)));
    if (strips <= 1) {
        gemm_detail::block(trans_a, trans_b, K, alpha, A, lda, B, ldb, accumulate, C, ldc, gemm_range{0, M, 0, N});
        return;
    }
    const bool by_cols = N >= strips * nr * 2 || M < strips * mr;
    const std::int64_t unit = by_cols ? nr : mr, extent = by_cols ? N : M;
    const std::int64_t units = (extent + unit - 1) / unit;
    strips = static_cast<int>(std::min<std::int64_t>(strips, units));
    auto bounds = [&](int s, int n) {
        return std::pair{units * s / n * unit, std::min(extent, units * (s + 1) / n * unit)};
    };
    // A strip of rows takes the path of its own row count: where the whole
    // product packs, every strip needs gemm_small_m rows at least, or it
    // would round as the unpacked path does (and results would depend on
    // the thread count).
    if (!by_cols && !kernels::gemm_takes_small_path(M, !trans_b)) {
        auto shortest = [&](int n) {
            std::int64_t m = extent;
            for (int s = 0; s < n; ++s) m = std::min(m, bounds(s, n).second - bounds(s, n).first);
            return m;
        };
        while (strips > 1 && shortest(strips) < kernels::gemm_small_m) --strips;
    }
    if (strips <= 1) {
        gemm_detail::block(trans_a, trans_b, K, alpha, A, lda, B, ldb, accumulate, C, ldc, gemm_range{0, M, 0, N});
        return;
    }
    parallel_for(strips, [&](int s) {
        const auto [b0, b1] = bounds(s, strips);
        gemm_detail::block(trans_a, trans_b, K, alpha, A, lda, B, ldb, accumulate, C, ldc,
                           by_cols ? gemm_range{0, M, b0, b1} : gemm_range{b0, b1, 0, N});
    });
#endif
}

// ---- B packed once ------------------------------------------------------------
// kernels/gemm.hpp packs a constant B once (gemm_pack_b); gemm_prepacked
// multiplies with it. Worth it only where gemm would pack B at all, which
// with the system BLAS is never.

inline bool gemm_prepack_pays(std::int64_t M) {
#ifdef DLGRAPH_USE_CBLAS
    (void)M;
    return false;
#else
    return M >= kernels::gemm_small_m;
#endif
}

// gemm with op(B) given as kernels::gemm_pack_b wrote it for these K and N.
// Threads take strips of rows, each reading all of packed B.
template <class T>
void gemm_prepacked(bool trans_a, std::int64_t M, std::int64_t N, std::int64_t K, T alpha, const T* A, std::int64_t lda,
                    const T* packed_b, bool accumulate, T* C, std::int64_t ldc) {
    if (kernels::gemm_empty(M, N, K, accumulate, C, ldc)) return;
    auto rows = [&](std::int64_t r0, std::int64_t r1) {
        const std::int64_t n = kernels::gemm_prepacked_workspace_size<T>(r1 - r0, K);
        T* const ws = gemm_detail::thread_workspace<T>().get(n);
        // Sized by gemm_prepacked_workspace_size and 64-byte aligned: cannot be refused.
        (void)kernels::gemm_prepacked_block(trans_a, N, K, alpha, A, lda, packed_b, accumulate, C, ldc, r0, r1, ws,
                                            n);
    };
    gemm_detail::for_each_strip(M, kernels::gemm_mr<T>, M, N, K, rows);
}

// gemm with op(A) given as kernels::gemm_pack_a wrote it for these M and K
// (see gemm_prepack_pays). Threads take strips of columns, each reading
// all of packed A.
template <class T>
void gemm_prepacked_a(std::int64_t M, bool trans_b, std::int64_t N, std::int64_t K, T alpha, const T* packed_a,
                      const T* B, std::int64_t ldb, bool accumulate, T* C, std::int64_t ldc) {
    if (kernels::gemm_empty(M, N, K, accumulate, C, ldc)) return;
    auto cols = [&](std::int64_t c0, std::int64_t c1) {
        const std::int64_t n = kernels::gemm_prepacked_a_workspace_size<T>(c1 - c0, K);
        T* const ws = gemm_detail::thread_workspace<T>().get(n);
        // Sized by gemm_prepacked_a_workspace_size and 64-byte aligned: cannot be refused.
        (void)kernels::gemm_prepacked_a_block(M, trans_b, K, alpha, packed_a, B, ldb, accumulate, C, ldc, c0, c1, ws,
                                              n);
    };
    gemm_detail::for_each_strip(N, kernels::gemm_nr<T>, M, N, K, cols);
}

}  // namespace dlgraph::cpu_ops
