// The matrix product every op uses: C = alpha * op(A) * op(B) (+ C), row-major,
// FP32 and FP64.
//
// Large products follow the GotoBLAS / BLIS scheme. B is packed one kc x nc
// block at a time into panels nr columns wide and A one mc x kc block at a
// time into panels mr rows tall, both zero-padded to whole panels; an
// xsimd micro-kernel then keeps an mr x nr tile of C in registers while it
// streams one A panel (from L2) against one B panel (from L1). Packing reads
// a transposed operand in place, so all four transpose cases share one
// kernel and nothing is copied beyond the packed blocks.
//
// Products with a few rows (M < small_m, the batch-1 inference case) skip
// packing, which would cost as much as the product: each k adds a broadcast
// A(i, k) times a row of B to a tile of C kept in registers, wide enough for
// the FMA units to overlap.
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
#include <cstdlib>
#include <memory>
#include <new>

#include "dlgraph/kernels/vec.hpp"
#include "dlgraph/thread_pool.hpp"

#ifdef DLGRAPH_USE_CBLAS
#include <cblas.h>
#endif

namespace dlgraph {

namespace gemm_detail {

template <class T> using batch = xsimd::batch<T>;
template <class T> inline constexpr int W = static_cast<int>(batch<T>::size);

// Register tile: mr rows x (nv vectors) columns. With 32 vector registers
// (AVX-512) 12 x 2 takes 24 accumulators; with 16 (AVX2) 6 x 2 takes 12.
inline constexpr int nv = 2;
template <class T> inline constexpr int mr = sizeof(batch<T>) >= 64 ? 12 : 6;
template <class T> inline constexpr int nr = nv * W<T>;

// Cache blocks: a kc x nr panel of B stays in L1 (32 KiB), an mc x kc block
// of A in L2, a kc x nc block of B in L3.
inline constexpr std::int64_t kc_block = 256;
template <class T> inline constexpr std::int64_t mc_block = mr<T> * (sizeof(T) == 4 ? 16 : 8);
template <class T> inline constexpr std::int64_t nc_block = nr<T> * 128;

// Rows below which packing costs more than it saves.
inline constexpr std::int64_t small_m = 8;

// A thread's packing buffers, grown on demand and kept: after the first
// product of a given size, gemm allocates nothing.
template <class T> struct pack_buffer {
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

template <class T> struct pack_buffers {
    pack_buffer<T> a, b;
};
template <class T> inline pack_buffers<T>& thread_buffers() {
    static thread_local pack_buffers<T> buffers;
    return buffers;
}

// An operand as a matrix view: element (r, c) is at p[r * rs + c * cs].
template <class T> struct view {
    const T* p;
    std::int64_t rs, cs;
    const T& operator()(std::int64_t r, std::int64_t c) const { return p[r * rs + c * cs]; }
};

// Packs rows [0, m) x k-range [0, kc) of A into panels of mr rows:
// panel q holds A(q*mr + r, k) at [q*mr*kc + k*mr + r], rows past m zero.
template <class T> void pack_a(view<T> A, std::int64_t m, std::int64_t kc, T* out) {
    constexpr int MR = mr<T>;
    for (std::int64_t i0 = 0; i0 < m; i0 += MR, out += MR * kc) {
        const int rows = static_cast<int>(std::min<std::int64_t>(MR, m - i0));
        if (A.rs == 1) {  // a transposed A: a panel's column is contiguous
            for (std::int64_t k = 0; k < kc; ++k) {
                const T* src = &A(i0, k);
                T* dst = out + k * MR;
                int r = 0;
                for (; r < rows; ++r) dst[r] = src[r];
                for (; r < MR; ++r) dst[r] = T(0);
            }
        } else {
            for (int r = 0; r < rows; ++r) {
                const T* src = &A(i0 + r, 0);
                for (std::int64_t k = 0; k < kc; ++k) out[k * MR + r] = src[k * A.cs];
            }
            for (int r = rows; r < MR; ++r)
                for (std::int64_t k = 0; k < kc; ++k) out[k * MR + r] = T(0);
        }
    }
}

// Packs k-range [0, kc) x columns [0, n) of B into panels of nr columns:
// panel q holds B(k, q*nr + c) at [q*nr*kc + k*nr + c], columns past n zero.
template <class T> void pack_b(view<T> B, std::int64_t kc, std::int64_t n, T* out) {
    constexpr int NR = nr<T>;
    for (std::int64_t j0 = 0; j0 < n; j0 += NR, out += NR * kc) {
        const int cols = static_cast<int>(std::min<std::int64_t>(NR, n - j0));
        if (B.cs == 1 && cols == NR) {
            for (std::int64_t k = 0; k < kc; ++k) {
                const T* src = &B(k, j0);
                for (int v = 0; v < nv; ++v) batch<T>::load_unaligned(src + v * W<T>).store_aligned(out + k * NR + v * W<T>);
            }
        } else if (B.cs == 1) {
            for (std::int64_t k = 0; k < kc; ++k) {
                const T* src = &B(k, j0);
                T* dst = out + k * NR;
                int c = 0;
                for (; c < cols; ++c) dst[c] = src[c];
                for (; c < NR; ++c) dst[c] = T(0);
            }
        } else {  // a transposed B: a panel's row is strided, its columns contiguous
            for (int c = 0; c < cols; ++c) {
                const T* src = &B(0, j0 + c);
                for (std::int64_t k = 0; k < kc; ++k) out[k * NR + c] = src[k * B.rs];
            }
            for (int c = cols; c < NR; ++c)
                for (std::int64_t k = 0; k < kc; ++k) out[k * NR + c] = T(0);
        }
    }
}

// C tile (R x nr, row stride ldc) = alpha * Ap * Bp (+ C when acc), R <= mr
// (Ap's panels are mr tall; a short last panel uses a shorter kernel rather
// than multiplying padding). `rows` x `cols` of the tile are real; a partial
// tile goes through a scratch tile so the kernel itself always runs full width.
template <class T, int R>
void micro_kernel(std::int64_t kc, const T* __restrict Ap, const T* __restrict Bp, T* C, std::int64_t ldc, T alpha,
                  bool acc, int rows, int cols) {
    constexpr int MR = mr<T>, NR = nr<T>;
    using B = batch<T>;
    B s[R][nv];
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < nv; ++v) s[r][v] = B(T(0));
    for (std::int64_t k = 0; k < kc; ++k, Ap += MR, Bp += NR) {
        B b[nv];
        for (int v = 0; v < nv; ++v) b[v] = B::load_aligned(Bp + v * W<T>);
        for (int r = 0; r < R; ++r) {
            const B a(Ap[r]);
            for (int v = 0; v < nv; ++v) s[r][v] = xsimd::fma(a, b[v], s[r][v]);
        }
    }
    const B al(alpha);
    if (rows == R && cols == NR) {
        for (int r = 0; r < R; ++r)
            for (int v = 0; v < nv; ++v) {
                T* cp = C + r * ldc + v * W<T>;
                B res = s[r][v] * al;
                if (acc) res += B::load_unaligned(cp);
                res.store_unaligned(cp);
            }
        return;
    }
    alignas(64) T tile[R][NR];
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < nv; ++v) (s[r][v] * al).store_aligned(&tile[r][v * W<T>]);
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) C[r * ldc + c] = acc ? C[r * ldc + c] + tile[r][c] : tile[r][c];
}

// Runs the kernel for a tile of `rows` real rows: full height, or the
// smallest of 2/3 or 1/3 of it that covers them.
template <class T>
void micro_tile(std::int64_t kc, const T* Ap, const T* Bp, T* C, std::int64_t ldc, T alpha, bool acc, int rows,
                int cols) {
    constexpr int MR = mr<T>;
    if (rows > 2 * MR / 3) micro_kernel<T, MR>(kc, Ap, Bp, C, ldc, alpha, acc, rows, cols);
    else if (rows > MR / 3) micro_kernel<T, 2 * MR / 3>(kc, Ap, Bp, C, ldc, alpha, acc, rows, cols);
    else micro_kernel<T, MR / 3>(kc, Ap, Bp, C, ldc, alpha, acc, rows, cols);
}

// K in equal blocks of at most kc_block: 784 = 4 x 196, not 3 x 256 + 16
// (a thin last block pays the C updates and packing of a full one).
inline std::int64_t k_block(std::int64_t K) {
    const std::int64_t blocks = (K + kc_block - 1) / kc_block;
    return (K + blocks - 1) / blocks;
}

// B packed whole, block after block as packed_gemm packs it: the block of
// columns [jc, jc + nc) and depths [pc, pc + kc) starts at K * jc +
// pc * round_up(nc, nr). K * round_up(N, nr) elements in all.
template <class T> std::int64_t packed_b_size(std::int64_t K, std::int64_t N) {
    return K * ((N + nr<T> - 1) / nr<T> * nr<T>);
}
template <class T> std::int64_t packed_b_offset(std::int64_t K, std::int64_t jc, std::int64_t nc, std::int64_t pc) {
    return K * jc + pc * ((nc + nr<T> - 1) / nr<T> * nr<T>);
}
template <class T> void pack_b_whole(view<T> B, std::int64_t K, std::int64_t N, T* out) {
    const std::int64_t kc_max = k_block(K);
    for (std::int64_t jc = 0; jc < N; jc += nc_block<T>) {
        const std::int64_t nc = std::min(nc_block<T>, N - jc);
        for (std::int64_t pc = 0; pc < K; pc += kc_max)
            pack_b(view<T>{&B(pc, jc), B.rs, B.cs}, std::min(kc_max, K - pc), nc,
                   out + packed_b_offset<T>(K, jc, nc, pc));
    }
}

// The packed product of an M x N block of C, one thread. With `prepacked`
// (B packed whole by pack_b_whole) B itself is not read.
template <class T>
void packed_gemm(std::int64_t M, std::int64_t N, std::int64_t K, T alpha, view<T> A, view<T> B, bool accumulate, T* C,
                 std::int64_t ldc, const T* prepacked = nullptr) {
    constexpr int MR = mr<T>, NR = nr<T>;
    auto& buf = thread_buffers<T>();
    const std::int64_t kc_max = k_block(K);
    const std::int64_t nc_max = std::min((N + NR - 1) / NR * NR, nc_block<T>);
    const std::int64_t mc_max = std::min((M + MR - 1) / MR * MR, mc_block<T>);
    T* const b_buf = prepacked ? nullptr : buf.b.get(kc_max * nc_max);
    T* Ap = buf.a.get(kc_max * mc_max);
    for (std::int64_t jc = 0; jc < N; jc += nc_block<T>) {
        const std::int64_t nc = std::min(nc_block<T>, N - jc);
        for (std::int64_t pc = 0; pc < K; pc += kc_max) {
            const std::int64_t kc = std::min(kc_max, K - pc);
            const bool acc = accumulate || pc > 0;
            const T* Bp = b_buf;
            if (prepacked) Bp = prepacked + packed_b_offset<T>(K, jc, nc, pc);
            else pack_b(view<T>{&B(pc, jc), B.rs, B.cs}, kc, nc, b_buf);
            for (std::int64_t ic = 0; ic < M; ic += mc_block<T>) {
                const std::int64_t mc = std::min(mc_block<T>, M - ic);
                pack_a(view<T>{&A(ic, pc), A.rs, A.cs}, mc, kc, Ap);
                for (std::int64_t jr = 0; jr < nc; jr += NR) {
                    const int cols = static_cast<int>(std::min<std::int64_t>(NR, nc - jr));
                    for (std::int64_t ir = 0; ir < mc; ir += MR) {
                        const int rows = static_cast<int>(std::min<std::int64_t>(MR, mc - ir));
                        micro_tile<T>(kc, Ap + ir * kc, Bp + jr * kc, C + (ic + ir) * ldc + jc + jr, ldc, alpha, acc,
                                        rows, cols);
                    }
                }
            }
        }
    }
}

// Unpacked product for few rows: C rows [0, R) (R <= 4), columns [j, j +
// NV*W), all of K; B's rows contiguous (B.cs == 1).
template <class T, int R, int NV>
void small_tile(std::int64_t K, view<T> A, view<T> B, T* C, std::int64_t ldc, T alpha, bool acc) {
    using Bt = batch<T>;
    Bt s[R][NV];
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < NV; ++v) s[r][v] = Bt(T(0));
    for (std::int64_t k = 0; k < K; ++k) {
        const T* bk = B.p + k * B.rs;
        Bt b[NV];
        for (int v = 0; v < NV; ++v) b[v] = Bt::load_unaligned(bk + v * W<T>);
        for (int r = 0; r < R; ++r) {
            const Bt a(A(r, k));
            for (int v = 0; v < NV; ++v) s[r][v] = xsimd::fma(a, b[v], s[r][v]);
        }
    }
    const Bt al(alpha);
    for (int r = 0; r < R; ++r)
        for (int v = 0; v < NV; ++v) {
            T* cp = C + r * ldc + v * W<T>;
            Bt res = s[r][v] * al;
            if (acc) res += Bt::load_unaligned(cp);
            res.store_unaligned(cp);
        }
}

// Rows [0, R) of C over columns [0, N): wide tiles, then one vector at a
// time, then scalars.
template <class T, int R, int NV>
void small_rows(std::int64_t N, std::int64_t K, view<T> A, view<T> B, T* C, std::int64_t ldc, T alpha, bool acc) {
    constexpr std::int64_t w = W<T>;
    std::int64_t j = 0;
    for (; j + NV * w <= N; j += NV * w) small_tile<T, R, NV>(K, A, view<T>{B.p + j, B.rs, 1}, C + j, ldc, alpha, acc);
    for (; j + w <= N; j += w) small_tile<T, R, 1>(K, A, view<T>{B.p + j, B.rs, 1}, C + j, ldc, alpha, acc);
    if (j == N) return;
    // The last N % w columns in scalars, one accumulator per column so the
    // multiply-adds of a k step do not wait on each other.
    const int nt = static_cast<int>(N - j);
    for (int r = 0; r < R; ++r) {
        T s[w] = {};
        for (std::int64_t k = 0; k < K; ++k) {
            const T a = A(r, k);
            const T* bk = &B(k, j);
            for (int c = 0; c < nt; ++c) s[c] += a * bk[c];
        }
        for (int c = 0; c < nt; ++c) C[r * ldc + j + c] = acc ? C[r * ldc + j + c] + alpha * s[c] : alpha * s[c];
    }
}

template <class T>
void small_gemm(std::int64_t M, std::int64_t N, std::int64_t K, T alpha, view<T> A, view<T> B, bool acc, T* C,
                std::int64_t ldc) {
    std::int64_t i = 0;
    for (; i + 4 <= M; i += 4) small_rows<T, 4, 4>(N, K, view<T>{&A(i, 0), A.rs, A.cs}, B, C + i * ldc, ldc, alpha, acc);
    // A single row takes 16 vectors of columns: long contiguous reads of each
    // row of B, which L2 and L3 stream fastest (the batch-1 case is bound by
    // reading B).
    for (; i < M; ++i) small_rows<T, 1, 16>(N, K, view<T>{&A(i, 0), A.rs, A.cs}, B, C + i * ldc, ldc, alpha, acc);
}

// Handles a product with no rows, columns or depth (C = 0 unless
// accumulating); true when there is nothing more to do.
template <class T>
bool empty_product(std::int64_t M, std::int64_t N, std::int64_t K, bool accumulate, T* C, std::int64_t ldc) {
    if (M <= 0 || N <= 0) return true;
    if (K > 0) return false;
    if (!accumulate)
        for (std::int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, T(0));
    return true;
}

// One thread's share of the product: the small path where it pays, else packed.
template <class T>
void serial_gemm(std::int64_t M, std::int64_t N, std::int64_t K, T alpha, view<T> A, view<T> B, bool acc, T* C,
                 std::int64_t ldc) {
    if (M < small_m && B.cs == 1) small_gemm(M, N, K, alpha, A, B, acc, C, ldc);
    else packed_gemm(M, N, K, alpha, A, B, acc, C, ldc);
}

}  // namespace gemm_detail

// C (M x N, row stride ldc) = alpha * op(A) * op(B) (+ C if `accumulate`).
// A is stored M x K (lda) or, with trans_a, K x M; B is stored K x N (ldb)
// or, with trans_b, N x K. Pointers need no alignment.
template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, T alpha, const T* A,
          std::int64_t lda, const T* B, std::int64_t ldb, bool accumulate, T* C, std::int64_t ldc) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "gemm is for FP32 and FP64");
    if (gemm_detail::empty_product(M, N, K, accumulate, C, ldc)) return;
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
    using namespace gemm_detail;
    const view<T> a = trans_a ? view<T>{A, 1, lda} : view<T>{A, lda, 1};
    const view<T> b = trans_b ? view<T>{B, 1, ldb} : view<T>{B, ldb, 1};
    // Threads take strips of C: columns when there are enough of them,
    // else rows. A strip is at least ~2M multiply-adds (about 10 us), so
    // waking a thread never costs more than it saves.
    const int threads = parallelism();
    int strips = static_cast<int>(std::min<std::int64_t>(threads, M * N * K / (std::int64_t(1) << 21)));
    if (strips <= 1) {
        serial_gemm(M, N, K, alpha, a, b, accumulate, C, ldc);
        return;
    }
    const bool by_cols = N >= strips * nr<T> * 2 || M < strips * mr<T>;
    const std::int64_t unit = by_cols ? nr<T> : mr<T>, extent = by_cols ? N : M;
    const std::int64_t units = (extent + unit - 1) / unit;
    strips = static_cast<int>(std::min<std::int64_t>(strips, units));
    parallel_for(strips, [&](int s) {
        const std::int64_t b0 = units * s / strips * unit, b1 = std::min(extent, units * (s + 1) / strips * unit);
        if (by_cols)
            serial_gemm(M, b1 - b0, K, alpha, a, view<T>{&b(0, b0), b.rs, b.cs}, accumulate, C + b0, ldc);
        else
            serial_gemm(b1 - b0, N, K, alpha, view<T>{&a(b0, 0), a.rs, a.cs}, b, accumulate, C + b0 * ldc, ldc);
    });
#endif
}

// ---- B packed once ------------------------------------------------------------
// A constant B (a weight matrix in inference) can be packed once and reused
// by every product with it: gemm_pack_b writes op(B), K x N, as the packed
// path reads it, and gemm_prepacked multiplies with that instead of packing
// B on each call (about a tenth of a 64 x 784 x 512 product). Worth it only
// where gemm would pack B at all: gemm_prepack_pays(M).

inline bool gemm_prepack_pays(std::int64_t M) {
#ifdef DLGRAPH_USE_CBLAS
    (void)M;
    return false;
#else
    return M >= gemm_detail::small_m;
#endif
}
// Elements of packed B (the buffer must be 64-byte aligned).
template <class T> std::int64_t gemm_packed_b_size(std::int64_t K, std::int64_t N) {
    return gemm_detail::packed_b_size<T>(K, N);
}
template <class T> void gemm_pack_b(bool trans_b, std::int64_t K, std::int64_t N, const T* B, std::int64_t ldb, T* out) {
    using gemm_detail::view;
    gemm_detail::pack_b_whole(trans_b ? view<T>{B, 1, ldb} : view<T>{B, ldb, 1}, K, N, out);
}
// gemm with op(B) given as gemm_pack_b wrote it for these K and N. Threads
// take strips of rows, each reading all of packed B.
template <class T>
void gemm_prepacked(bool trans_a, std::int64_t M, std::int64_t N, std::int64_t K, T alpha, const T* A, std::int64_t lda,
                    const T* packed_b, bool accumulate, T* C, std::int64_t ldc) {
    using namespace gemm_detail;
    if (gemm_detail::empty_product(M, N, K, accumulate, C, ldc)) return;
    const view<T> a = trans_a ? view<T>{A, 1, lda} : view<T>{A, lda, 1};
    const view<T> no_b{nullptr, 0, 0};
    const std::int64_t units = (M + mr<T> - 1) / mr<T>;
    const int strips = static_cast<int>(
        std::min({std::int64_t(parallelism()), M * N * K / (std::int64_t(1) << 21), units}));
    if (strips <= 1) return packed_gemm(M, N, K, alpha, a, no_b, accumulate, C, ldc, packed_b);
    parallel_for(strips, [&](int s) {
        const std::int64_t r0 = units * s / strips * mr<T>, r1 = std::min(M, units * (s + 1) / strips * mr<T>);
        packed_gemm(r1 - r0, N, K, alpha, view<T>{&a(r0, 0), a.rs, a.cs}, no_b, accumulate, C + r0 * ldc, ldc,
                    packed_b);
    });
}

}  // namespace dlgraph
