// The GEMM of the kernel core: C = alpha * op(A) * op(B) (+ C), row-major,
// FP32 and FP64, on one thread over any rectangle of C, with its packing
// buffers in a workspace the caller provides (no heap, no threads).
//
// Large products follow the GotoBLAS / BLIS scheme. B is packed one kc x nc
// block at a time into panels nr columns wide and A one mc x kc block at a
// time into panels mr rows tall, both zero-padded to whole panels; a
// micro-kernel then keeps an mr x nr tile of C in registers while it
// streams one A panel (from L2) against one B panel (from L1). Packing reads
// a transposed operand in place, so all four transpose cases share one
// kernel and nothing is copied beyond the packed blocks. Where a packed copy
// would be read too few times to repay the copy (a row-major B when C has
// few rows, a transposed A when C's columns fit in one panel), the kernel
// reads the operand's full panels where they lie (see direct_b_rows).
//
// Products with a few rows (M < gemm_small_m, the batch-1 inference case)
// skip packing, which would cost as much as the product: each k adds a
// broadcast A(i, k) times a row of B to a tile of C kept in registers, wide
// enough for the FMA units to overlap.
//
// Each element of C is computed from its row of op(A) and its column of
// op(B) alone, in an order set by K and by the path its rectangle takes
// (unpacked: fewer than gemm_small_m rows and B untransposed; else packed),
// never by where the rectangle sits. So C may be split into rectangles
// (cpu/gemm.hpp's strips, one per thread) without changing a bit wherever
// each takes the path the whole would.
#pragma once

#include <algorithm>
#include <cstdint>

#include "dlgraph/kernels/config.hpp"
#include "dlgraph/kernels/vec.hpp"

namespace dlgraph::kernels {

namespace gemm_detail {

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

// An operand as a matrix view: element (r, c) is at p[r * rs + c * cs].
template <class T> struct view {
    const T* p;
    std::int64_t rs, cs;
    const T& operator()(std::int64_t r, std::int64_t c) const noexcept { return p[r * rs + c * cs]; }
};

template <class T> constexpr view<T> operand(bool trans, const T* p, std::int64_t ld) noexcept {
    return trans ? view<T>{p, 1, ld} : view<T>{p, ld, 1};
}

#if DLGRAPH_SIMD && XSIMD_WITH_AVX512F
// AVX-512 packing of FP32 operands that the panels read across their
// storage order (a row-major A, a transposed B): 16 x 16 blocks
// transposed in registers (four rounds of 16 shuffles) instead of one
// scalar move per element, about three times faster; a transposed A's
// 12-row columns move as one masked vector. Packing moves values only, so
// the product's bits do not depend on which packing ran.
// GCC 12's shuffles start from _mm512_undefined_ps(), which it reports as
// "may be used uninitialized" wherever <immintrin.h> came in before
// kernels/xsimd.hpp's pragmas; the pragmas here cover these functions only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
namespace avx512 {

// Rows r[0..16) become the columns: afterwards r[c] holds element c of
// every input row, in row order.
inline void transpose16(__m512 r[16]) noexcept {
    __m512 t[16];
    for (int i = 0; i < 8; ++i) {  // pairs of rows interleaved in 32-bit elements
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    auto lo = [](__m512 a, __m512 b) {
        return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
    };
    auto hi = [](__m512 a, __m512 b) {
        return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b)));
    };
    for (int i = 0; i < 4; ++i) {  // r[4i + j], 128-bit lane L: element 4L + j of rows 4i..4i+3
        r[4 * i] = lo(t[4 * i], t[4 * i + 2]);
        r[4 * i + 1] = hi(t[4 * i], t[4 * i + 2]);
        r[4 * i + 2] = lo(t[4 * i + 1], t[4 * i + 3]);
        r[4 * i + 3] = hi(t[4 * i + 1], t[4 * i + 3]);
    }
    for (int j = 0; j < 4; ++j) {  // gather lane L of r[j], r[4 + j], r[8 + j], r[12 + j]
        const __m512 u0 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x44);
        const __m512 u1 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x44);
        const __m512 u2 = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xEE);
        const __m512 u3 = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xEE);
        t[j] = _mm512_shuffle_f32x4(u0, u1, 0x88);
        t[4 + j] = _mm512_shuffle_f32x4(u0, u1, 0xDD);
        t[8 + j] = _mm512_shuffle_f32x4(u2, u3, 0x88);
        t[12 + j] = _mm512_shuffle_f32x4(u2, u3, 0xDD);
    }
    for (int c = 0; c < 16; ++c) r[c] = t[c];
}

// The first n lanes (none for n <= 0, all for n >= 16).
inline __mmask16 first(std::int64_t n) noexcept {
    return static_cast<__mmask16>(n <= 0 ? 0 : n >= 16 ? 0xFFFF : (1u << n) - 1);
}

// Lines [0, lines) (zero past `rows`) x elements [0, kc) of a matrix whose
// line l starts at src + l * ld, transposed: element k of line l goes to
// out[k * stride + l] for l < lines (a masked store, which needs no
// alignment).
inline void transpose_lines(const float* src, std::int64_t ld, int rows, int lines, std::int64_t kc, float* out,
                            std::int64_t stride) noexcept {
    const __mmask16 keep = first(lines);
    for (std::int64_t k = 0; k < kc; k += 16) {
        const __mmask16 km = first(kc - k);
        __m512 r[16];
        for (int l = 0; l < 16; ++l)
            r[l] = l < rows ? _mm512_maskz_loadu_ps(km, src + l * ld + k) : _mm512_setzero_ps();
        transpose16(r);
        const int kn = static_cast<int>(std::min<std::int64_t>(16, kc - k));
        for (int kk = 0; kk < kn; ++kk) _mm512_mask_storeu_ps(out + (k + kk) * stride, keep, r[kk]);
    }
}

}  // namespace avx512
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

// Packs rows [0, m) x k-range [0, kc) of A into panels of mr rows:
// panel q holds A(q*mr + r, k) at [q*mr*kc + k*mr + r], rows past m zero.
template <class T> void pack_a(view<T> A, std::int64_t m, std::int64_t kc, T* out) noexcept {
    constexpr int MR = mr<T>;
    for (std::int64_t i0 = 0; i0 < m; i0 += MR, out += MR * kc) {
        const int rows = static_cast<int>(std::min<std::int64_t>(MR, m - i0));
#if DLGRAPH_SIMD && XSIMD_WITH_AVX512F
        if constexpr (std::is_same_v<T, float> && MR <= 16) {
            if (A.cs == 1) {
                avx512::transpose_lines(&A(i0, 0), A.rs, rows, MR, kc, out, MR);
                continue;
            }
            if (A.rs == 1) {  // a panel's column is contiguous: one masked move per k
                const __mmask16 rm = avx512::first(rows), keep = avx512::first(MR);
                for (std::int64_t k = 0; k < kc; ++k)
                    _mm512_mask_storeu_ps(out + k * MR, keep, _mm512_maskz_loadu_ps(rm, &A(i0, k)));
                continue;
            }
        }
#endif
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
template <class T> void pack_b(view<T> B, std::int64_t kc, std::int64_t n, T* out) noexcept {
    constexpr int NR = nr<T>;
    for (std::int64_t j0 = 0; j0 < n; j0 += NR, out += NR * kc) {
        const int cols = static_cast<int>(std::min<std::int64_t>(NR, n - j0));
#if DLGRAPH_SIMD && XSIMD_WITH_AVX512F
        if constexpr (std::is_same_v<T, float> && NR % 16 == 0) {
            if (B.rs == 1 && B.cs != 1) {  // a transposed B: each column contiguous, 16 at a time
                for (int c = 0; c < NR; c += 16) {
                    const int live = std::max(0, std::min(16, cols - c));  // columns past n are zeros
                    avx512::transpose_lines(live ? &B(0, j0 + c) : B.p, B.cs, live, 16, kc, out + c, NR);
                }
                continue;
            }
        }
#endif
        if (B.cs == 1 && cols == NR) {
            for (std::int64_t k = 0; k < kc; ++k) {
                const T* src = &B(k, j0);
                for (int v = 0; v < nv; ++v) batch<T>::load_unaligned(src + v * W<T>).store_aligned(out + k * NR + v * W<T>);
            }
        } else if (B.cs == 1) {
#if DLGRAPH_SIMD && XSIMD_WITH_AVX512F
            if constexpr (std::is_same_v<T, float> && NR % 16 == 0) {  // masked loads; zeros past the columns
                for (std::int64_t k = 0; k < kc; ++k)
                    for (int c = 0; c < NR; c += 16)
                        _mm512_store_ps(out + k * NR + c, _mm512_maskz_loadu_ps(avx512::first(cols - c),
                                                                               &B(k, j0) + std::min(c, cols)));
                continue;
            }
#endif
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

// Where a tile's operands are read: A's rows at k = 0 are a[0..R), and a
// advances by `as` per k (mr in a packed panel; lda for a transposed A read
// in place); B's columns at k = 0 are b[0..), advancing by `bs` (nr packed,
// ldb in place). The kernel reads B through b_rows(): load(v) is vector v
// of the current row of B, next() moves to the next k (kernels/conv_gemm.hpp
// has operands whose B is a convolution's column matrix, never written).
template <class T> struct tile_operands {
    const T* a;
    std::int64_t as;
    const T* b;
    std::int64_t bs;

    struct rows {
        const T* p;
        std::int64_t s;
        batch<T> load(int v) const noexcept { return batch<T>::load_unaligned(p + v * W<T>); }
        void next() noexcept { p += s; }
    };
    rows b_rows() const noexcept { return {b, bs}; }
};

// Stores the first n lanes of v at p (adding to what is there when acc).
template <class T> inline void store_first(T* p, const batch<T>& v, int n, bool acc) noexcept {
#if DLGRAPH_SIMD && XSIMD_WITH_AVX512F
    if constexpr (std::is_same_v<T, float> && W<T> == 16) {
        const __mmask16 m = avx512::first(n);
        const __m512 x = acc ? _mm512_add_ps(_mm512_maskz_loadu_ps(m, p), v) : __m512(v);
        return _mm512_mask_storeu_ps(p, m, x);
    }
    if constexpr (std::is_same_v<T, double> && W<T> == 8) {
        const __mmask8 m = static_cast<__mmask8>(avx512::first(n));
        const __m512d x = acc ? _mm512_add_pd(_mm512_maskz_loadu_pd(m, p), v) : __m512d(v);
        return _mm512_mask_storeu_pd(p, m, x);
    }
#endif
    alignas(64) T lanes[W<T>];
    v.store_aligned(lanes);
    for (int c = 0; c < n; ++c) p[c] = acc ? p[c] + lanes[c] : lanes[c];
}

// C tile (R x NV vectors, row stride ldc) = alpha * A * B (+ C when acc)
// over depth kc, R <= mr, NV <= nv (A's panels are mr tall and B's nr wide;
// a short last panel uses a smaller kernel rather than multiplying
// padding). `rows` x `cols` of the tile are real and stored. Every element
// of C is the same chain of multiply-adds over k whichever kernel computes
// it and wherever its operands are read from.
// The operands are taken by reference (a struct passed by value goes
// through memory, and loading it stalled on store forwarding once a tile).
template <class T, int R, int NV = nv, class Operands = tile_operands<T>>
void micro_kernel(std::int64_t kc, const Operands& p, T* C, std::int64_t ldc, T alpha, bool acc, int rows,
                  int cols) noexcept {
    // Every loop over r and v is unrolled before GCC's scalar replacement
    // (DLGRAPH_UNROLL; not at -Os), so s[][] lives in registers only: with
    // the runtime `rows` as the epilogue's bound, s was zeroed on the stack,
    // stored there after the k loop and reloaded (48 vector stores a tile,
    // 3-4% at kc = 144).
    using B = batch<T>;
    const T* __restrict Ap = p.a;
    const std::int64_t as = p.as;
    auto Bk = p.b_rows();
    B s[R][NV];
    DLGRAPH_UNROLL(16)
    for (int r = 0; r < R; ++r) {
        DLGRAPH_UNROLL(4)
        for (int v = 0; v < NV; ++v) s[r][v] = B(T(0));
    }
    for (std::int64_t k = 0; k < kc; ++k, Ap += as, Bk.next()) {
        B b[NV];
        DLGRAPH_UNROLL(4)
        for (int v = 0; v < NV; ++v) b[v] = Bk.load(v);
        DLGRAPH_UNROLL(16)
        for (int r = 0; r < R; ++r) {
            const B a(Ap[r]);
            DLGRAPH_UNROLL(4)
            for (int v = 0; v < NV; ++v) s[r][v] = vm::fma(a, b[v], s[r][v]);
        }
    }
    const B al(alpha);
    DLGRAPH_UNROLL(16)
    for (int r = 0; r < R; ++r) {
        if (r >= rows) break;
        DLGRAPH_UNROLL(4)
        for (int v = 0; v < NV; ++v) {
            T* cp = C + r * ldc + v * W<T>;
            const B res = s[r][v] * al;
            const int n = std::min(cols - v * W<T>, W<T>);
            if (n == W<T>) (acc ? res + B::load_unaligned(cp) : res).store_unaligned(cp);
            else if (n > 0) store_first(cp, res, n, acc);
        }
    }
}

// Runs the kernel for a tile of `rows` x `cols` real elements: full height,
// or the smallest of 2/3 or 1/3 of it that covers the rows; one vector wide
// when the columns fit in one (N = 10 logits: 16 lanes computed, not 32).
template <class T, int NV, class Operands>
void micro_tile_nv(std::int64_t kc, const Operands& p, T* C, std::int64_t ldc, T alpha, bool acc, int rows,
                   int cols) noexcept {
    constexpr int MR = mr<T>;
    if (rows > 2 * MR / 3) micro_kernel<T, MR, NV>(kc, p, C, ldc, alpha, acc, rows, cols);
    else if (rows > MR / 3) micro_kernel<T, 2 * MR / 3, NV>(kc, p, C, ldc, alpha, acc, rows, cols);
    else micro_kernel<T, MR / 3, NV>(kc, p, C, ldc, alpha, acc, rows, cols);
}
template <class T, class Operands = tile_operands<T>>
void micro_tile(std::int64_t kc, const Operands& p, T* C, std::int64_t ldc, T alpha, bool acc, int rows,
                int cols) noexcept {
    if (nv > 1 && cols <= W<T>) micro_tile_nv<T, 1>(kc, p, C, ldc, alpha, acc, rows, cols);
    else micro_tile_nv<T, nv>(kc, p, C, ldc, alpha, acc, rows, cols);
}

// K in equal blocks of at most kc_block: 784 = 4 x 196, not 3 x 256 + 16
// (a thin last block pays the C updates and packing of a full one).
constexpr std::int64_t k_block(std::int64_t K) noexcept {
    const std::int64_t blocks = (K + kc_block - 1) / kc_block;
    return (K + blocks - 1) / blocks;
}

constexpr std::int64_t round_up(std::int64_t n, std::int64_t unit) noexcept { return (n + unit - 1) / unit * unit; }

// The packed path's buffers in a workspace: the kc x nc block of B (unless
// B comes prepacked), then the mc x kc block of A, each 64-byte aligned when
// the workspace is. Elements for an M x N product of depth K.
template <class T> constexpr std::int64_t packed_b_block(std::int64_t N, std::int64_t K) noexcept {
    return k_block(K) * std::min(round_up(N, nr<T>), nc_block<T>);
}
template <class T> constexpr std::int64_t packed_a_block(std::int64_t M, std::int64_t K) noexcept {
    return k_block(K) * std::min(round_up(M, mr<T>), mc_block<T>);
}
template <class T> constexpr std::int64_t aligned_elements(std::int64_t n) noexcept {
    return round_up(n, static_cast<std::int64_t>(64 / sizeof(T)));
}

// B packed whole, block after block as packed_gemm packs it: the block of
// columns [jc, jc + nc) and depths [pc, pc + kc) starts at K * jc +
// pc * round_up(nc, nr). K * round_up(N, nr) elements in all.
template <class T> constexpr std::int64_t packed_b_size(std::int64_t K, std::int64_t N) noexcept {
    return K * round_up(N, nr<T>);
}
template <class T>
constexpr std::int64_t packed_b_offset(std::int64_t K, std::int64_t jc, std::int64_t nc, std::int64_t pc) noexcept {
    return K * jc + pc * round_up(nc, nr<T>);
}
template <class T> void pack_b_whole(view<T> B, std::int64_t K, std::int64_t N, T* out) noexcept {
    const std::int64_t kc_max = k_block(K);
    for (std::int64_t jc = 0; jc < N; jc += nc_block<T>) {
        const std::int64_t nc = std::min(nc_block<T>, N - jc);
        for (std::int64_t pc = 0; pc < K; pc += kc_max)
            pack_b(view<T>{&B(pc, jc), B.rs, B.cs}, std::min(kc_max, K - pc), nc,
                   out + packed_b_offset<T>(K, jc, nc, pc));
    }
}

// A packed whole, block after block as packed_gemm packs it: the block of
// rows [ic, ic + mc) and depths [pc, pc + kc) starts at
// pc * round_up(M, mr) + ic * kc. round_up(M, mr) * K elements in all.
template <class T> constexpr std::int64_t packed_a_size(std::int64_t M, std::int64_t K) noexcept {
    return round_up(M, mr<T>) * K;
}
template <class T>
constexpr std::int64_t packed_a_offset(std::int64_t M, std::int64_t ic, std::int64_t kc, std::int64_t pc) noexcept {
    return pc * round_up(M, mr<T>) + ic * kc;
}
template <class T> void pack_a_whole(view<T> A, std::int64_t M, std::int64_t K, T* out) noexcept {
    const std::int64_t kc_max = k_block(K);
    for (std::int64_t pc = 0; pc < K; pc += kc_max) {
        const std::int64_t kc = std::min(kc_max, K - pc);
        for (std::int64_t ic = 0; ic < M; ic += mc_block<T>)
            pack_a(view<T>{&A(ic, pc), A.rs, A.cs}, std::min(mc_block<T>, M - ic), kc,
                   out + packed_a_offset<T>(M, ic, kc, pc));
    }
}

#ifndef DLGRAPH_GEMM_DIRECT_B_ROWS
#define DLGRAPH_GEMM_DIRECT_B_ROWS 128
#endif
// Operands read in place rather than packed, where a packed copy would be
// read too few times to pay for itself:
// - a row-major B when C has at most direct_b_rows rows (each B panel then
//   serves few tiles of A: a 64 x 784 x 512 product spent an eighth of its
//   time packing W);
// - a transposed A when C's columns fit in one B panel (each A panel is
//   then used once: dW = Xᵀ dY of a 10-class layer spent a third packing).
// Full panels are read where they lie; a last, narrower one is still
// packed, so the kernel never reads past the matrix.
inline constexpr std::int64_t direct_b_rows = DLGRAPH_GEMM_DIRECT_B_ROWS;

// An operand packed whole before the product (by pack_b_whole or
// pack_a_whole), or null: packed block by block.
template <class T> struct prepacked_operands {
    const T* b = nullptr;
    const T* a = nullptr;  // all M rows of A: C's block is all of its rows
};

// The packed product of an M x N block of C into buffers b_buf (kc x nc,
// unused with a prepacked B, which is then not read) and a_buf (mc x kc,
// likewise for A).
template <class T>
void packed_gemm(std::int64_t M, std::int64_t N, std::int64_t K, T alpha, view<T> A, view<T> B, bool accumulate, T* C,
                 std::int64_t ldc, prepacked_operands<T> prepacked, T* b_buf, T* a_buf) noexcept {
    constexpr int MR = mr<T>, NR = nr<T>;
    const std::int64_t kc_max = k_block(K);
    const bool direct_b = !prepacked.b && B.cs == 1 && M <= direct_b_rows;
    const bool direct_a = !prepacked.a && A.rs == 1 && A.cs != 1 && N <= NR;
    for (std::int64_t jc = 0; jc < N; jc += nc_block<T>) {
        const std::int64_t nc = std::min(nc_block<T>, N - jc);
        const std::int64_t b_full = direct_b ? nc / NR * NR : 0;  // columns of B read in place
        for (std::int64_t pc = 0; pc < K; pc += kc_max) {
            const std::int64_t kc = std::min(kc_max, K - pc);
            const bool acc = accumulate || pc > 0;
            const T* Bp = b_buf;
            if (prepacked.b) Bp = prepacked.b + packed_b_offset<T>(K, jc, nc, pc);
            else if (b_full < nc) pack_b(view<T>{&B(pc, jc + b_full), B.rs, B.cs}, kc, nc - b_full, b_buf);
            for (std::int64_t ic = 0; ic < M; ic += mc_block<T>) {
                const std::int64_t mc = std::min(mc_block<T>, M - ic);
                const std::int64_t a_full = direct_a ? mc / MR * MR : 0;  // rows of A read in place
                const T* const Ap = prepacked.a ? prepacked.a + packed_a_offset<T>(M, ic, kc, pc) : a_buf;
                if (!prepacked.a && a_full < mc) pack_a(view<T>{&A(ic + a_full, pc), A.rs, A.cs}, mc - a_full, kc, a_buf);
                for (std::int64_t jr = 0; jr < nc; jr += NR) {
                    const int cols = static_cast<int>(std::min<std::int64_t>(NR, nc - jr));
                    const T* bp = jr < b_full ? &B(pc, jc + jr) : Bp + (jr - b_full) * kc;
                    const std::int64_t bs = jr < b_full ? B.rs : NR;
                    for (std::int64_t ir = 0; ir < mc; ir += MR) {
                        const int rows = static_cast<int>(std::min<std::int64_t>(MR, mc - ir));
                        const tile_operands<T> p =
                            ir < a_full ? tile_operands<T>{&A(ic + ir, pc), A.cs, bp, bs}
                                        : tile_operands<T>{Ap + (ir - a_full) * kc, MR, bp, bs};
                        micro_tile<T>(kc, p, C + (ic + ir) * ldc + jc + jr, ldc, alpha, acc, rows, cols);
                    }
                }
            }
        }
    }
}

// Unpacked product for few rows: C rows [0, R) (R <= 4), columns [j, j +
// NV*W), all of K; B's rows contiguous (B.cs == 1).
template <class T, int R, int NV>
void small_tile(std::int64_t K, view<T> A, view<T> B, T* C, std::int64_t ldc, T alpha, bool acc) noexcept {
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
            for (int v = 0; v < NV; ++v) s[r][v] = vm::fma(a, b[v], s[r][v]);
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
void small_rows(std::int64_t N, std::int64_t K, view<T> A, view<T> B, T* C, std::int64_t ldc, T alpha,
                bool acc) noexcept {
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
                std::int64_t ldc) noexcept {
    std::int64_t i = 0;
    for (; i + 4 <= M; i += 4) small_rows<T, 4, 4>(N, K, view<T>{&A(i, 0), A.rs, A.cs}, B, C + i * ldc, ldc, alpha, acc);
    // A single row takes 16 vectors of columns: long contiguous reads of each
    // row of B, which L2 and L3 stream fastest (the batch-1 case is bound by
    // reading B).
    for (; i < M; ++i) small_rows<T, 1, 16>(N, K, view<T>{&A(i, 0), A.rs, A.cs}, B, C + i * ldc, ldc, alpha, acc);
}

// Whether an M-row product with B's rows contiguous (B.cs == 1) takes the
// unpacked path.
constexpr bool takes_small_path(std::int64_t M, bool b_rows_contiguous) noexcept {
    return M < small_m && b_rows_contiguous;
}

inline bool aligned64(const void* p) noexcept { return reinterpret_cast<std::uintptr_t>(p) % 64 == 0; }

}  // namespace gemm_detail

// ---- the core's GEMM --------------------------------------------------------------------

// The register tile (gemm_mr rows x gemm_nr columns of C), the unit in
// which a caller splits C into strips; and the rows below which a product
// is not packed.
template <class T> inline constexpr int gemm_mr = gemm_detail::mr<T>;
template <class T> inline constexpr int gemm_nr = gemm_detail::nr<T>;
inline constexpr std::int64_t gemm_small_m = gemm_detail::small_m;
// Whether an M-row product takes the unpacked path (fewer than gemm_small_m
// rows, B's rows contiguous: B not transposed).
constexpr bool gemm_takes_small_path(std::int64_t M, bool b_rows_contiguous) noexcept {
    return gemm_detail::takes_small_path(M, b_rows_contiguous);
}

// A rectangle of C: rows [r0, r1), columns [c0, c1).
struct gemm_range {
    std::int64_t r0 = 0, r1 = 0, c0 = 0, c1 = 0;
};

// Handles a product with no rows, columns or depth (C = 0 unless
// accumulating); true when there is nothing more to do.
template <class T>
bool gemm_empty(std::int64_t M, std::int64_t N, std::int64_t K, bool accumulate, T* C, std::int64_t ldc) noexcept {
    if (M <= 0 || N <= 0) return true;
    if (K > 0) return false;
    if (!accumulate)
        for (std::int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, T(0));
    return true;
}

// Elements of workspace (64-byte aligned) that gemm_block needs for a
// rectangle of `rows` x `cols` of C at depth K; 0 when it packs nothing.
template <class T, class ER, class EC, class EK>
constexpr std::int64_t gemm_workspace_size(bool trans_b, ER rows, EC cols, EK K) noexcept {
    using namespace gemm_detail;
    const std::int64_t m = extent(rows), n = extent(cols), k = extent(K);
    if (m <= 0 || n <= 0 || k <= 0 || takes_small_path(m, !trans_b)) return 0;
    return aligned_elements<T>(packed_b_block<T>(n, k)) + packed_a_block<T>(m, k);
}

// The rectangle `r` of C = alpha * op(A) * op(B) (+ C if `accumulate`), on
// the calling thread. A is stored M x K (lda) or, with trans_a, K x M; B is
// stored K x N (ldb) or, with trans_b, N x K; A, B and C point at the whole
// matrices (element (0, 0)), and need no alignment. `workspace` holds
// `workspace_size` elements, 64-byte aligned; false (and C untouched) when
// that is less than gemm_workspace_size(trans_b, r.r1 - r.r0, r.c1 - r.c0, K)
// or misaligned.
template <class T, class EK>
[[nodiscard]] bool gemm_block(bool trans_a, bool trans_b, EK K, T alpha, const T* A, std::int64_t lda, const T* B,
                              std::int64_t ldb, bool accumulate, T* C, std::int64_t ldc, gemm_range r, T* workspace,
                              std::int64_t workspace_size) noexcept {
    static_assert(simd_type<T>, "gemm is for FP32 and FP64");
    using namespace gemm_detail;
    const std::int64_t m = r.r1 - r.r0, n = r.c1 - r.c0, k = extent(K);
    if (m <= 0 || n <= 0) return true;
    T* const c = C + r.r0 * ldc + r.c0;
    if (gemm_empty(m, n, k, accumulate, c, ldc)) return true;
    const view<T> a = operand(trans_a, A, lda), b = operand(trans_b, B, ldb);
    const view<T> ar{&a(r.r0, 0), a.rs, a.cs}, br{&b(0, r.c0), b.rs, b.cs};
    if (takes_small_path(m, br.cs == 1)) {
        small_gemm(m, n, k, alpha, ar, br, accumulate, c, ldc);
        return true;
    }
    const std::int64_t b_size = aligned_elements<T>(packed_b_block<T>(n, k));
    if (workspace_size < b_size + packed_a_block<T>(m, k) || !aligned64(workspace)) return false;
    packed_gemm(m, n, k, alpha, ar, br, accumulate, c, ldc, prepacked_operands<T>{}, workspace, workspace + b_size);
    return true;
}

// All of C = alpha * op(A) * op(B) (+ C), M x N, on the calling thread:
// gemm_block over the whole, with a workspace of
// gemm_workspace_size(trans_b, M, N, K) elements.
template <class T, class EM, class EN, class EK>
[[nodiscard]] bool gemm_serial(bool trans_a, bool trans_b, EM M, EN N, EK K, T alpha, const T* A, std::int64_t lda,
                               const T* B, std::int64_t ldb, bool accumulate, T* C, std::int64_t ldc, T* workspace,
                               std::int64_t workspace_size) noexcept {
    return gemm_block(trans_a, trans_b, K, alpha, A, lda, B, ldb, accumulate, C, ldc,
                      gemm_range{0, extent(M), 0, extent(N)}, workspace, workspace_size);
}

// ---- B packed once ------------------------------------------------------------------------
// A constant B (a weight matrix in inference) can be packed once and reused
// by every product with it: gemm_pack_b writes op(B), K x N, as the packed
// path reads it, and gemm_prepacked_block multiplies with that instead of
// packing B on each call (about a tenth of a 64 x 784 x 512 product). Worth
// it only where the product would be packed at all: M >= gemm_small_m.

// Elements of packed B (the buffer must be 64-byte aligned).
template <class T> constexpr std::int64_t gemm_packed_b_size(std::int64_t K, std::int64_t N) noexcept {
    return gemm_detail::packed_b_size<T>(K, N);
}
template <class T>
void gemm_pack_b(bool trans_b, std::int64_t K, std::int64_t N, const T* B, std::int64_t ldb, T* out) noexcept {
    static_assert(simd_type<T>, "gemm is for FP32 and FP64");
    gemm_detail::pack_b_whole(gemm_detail::operand(trans_b, B, ldb), K, N, out);
}

// Elements of workspace (64-byte aligned) that gemm_prepacked_block needs
// for `rows` rows of C at depth K.
template <class T, class ER, class EK> constexpr std::int64_t gemm_prepacked_workspace_size(ER rows, EK K) noexcept {
    const std::int64_t m = extent(rows), k = extent(K);
    return m <= 0 || k <= 0 ? 0 : gemm_detail::packed_a_block<T>(m, k);
}

// Rows [r0, r1) of C = alpha * op(A) * op(B) (+ C), with op(B) (K x N) as
// gemm_pack_b wrote it for these K and N. Always the packed path, even on
// fewer than gemm_small_m rows, so its bits are those of gemm_block on a
// product that packs. Workspace as gemm_block's, of
// gemm_prepacked_workspace_size(r1 - r0, K) elements.
template <class T, class EN, class EK>
[[nodiscard]] bool gemm_prepacked_block(bool trans_a, EN N, EK K, T alpha, const T* A, std::int64_t lda,
                                        const T* packed_b, bool accumulate, T* C, std::int64_t ldc, std::int64_t r0,
                                        std::int64_t r1, T* workspace, std::int64_t workspace_size) noexcept {
    static_assert(simd_type<T>, "gemm is for FP32 and FP64");
    using namespace gemm_detail;
    const std::int64_t m = r1 - r0, n = extent(N), k = extent(K);
    if (m <= 0 || n <= 0) return true;
    T* const c = C + r0 * ldc;
    if (gemm_empty(m, n, k, accumulate, c, ldc)) return true;
    if (workspace_size < packed_a_block<T>(m, k) || !aligned64(workspace)) return false;
    const view<T> a = operand(trans_a, A, lda);
    packed_gemm(m, n, k, alpha, view<T>{&a(r0, 0), a.rs, a.cs}, view<T>{nullptr, 0, 0}, accumulate, c, ldc,
                prepacked_operands<T>{packed_b, nullptr}, static_cast<T*>(nullptr), workspace);
    return true;
}

// ---- A packed once ------------------------------------------------------------------------
// Likewise a constant A (a convolution's filters, the same for every image):
// gemm_pack_a writes op(A), M x K, as the packed path reads it, and
// gemm_prepacked_a_block multiplies with that, a strip of C's columns at a
// time. Worth it where the product would be packed: M >= gemm_small_m.

template <class T> constexpr std::int64_t gemm_packed_a_size(std::int64_t M, std::int64_t K) noexcept {
    return gemm_detail::packed_a_size<T>(M, K);
}
template <class T>
void gemm_pack_a(bool trans_a, std::int64_t M, std::int64_t K, const T* A, std::int64_t lda, T* out) noexcept {
    static_assert(simd_type<T>, "gemm is for FP32 and FP64");
    gemm_detail::pack_a_whole(gemm_detail::operand(trans_a, A, lda), M, K, out);
}

// Elements of workspace (64-byte aligned) that gemm_prepacked_a_block needs
// for `cols` columns of C at depth K.
template <class T, class EC, class EK> constexpr std::int64_t gemm_prepacked_a_workspace_size(EC cols, EK K) noexcept {
    const std::int64_t n = extent(cols), k = extent(K);
    return n <= 0 || k <= 0 ? 0 : gemm_detail::packed_b_block<T>(n, k);
}

// Columns [c0, c1) of C = alpha * op(A) * op(B) (+ C), M x N, with op(A)
// (M x K) as gemm_pack_a wrote it for these M and K; B as gemm_block's.
// Always the packed path, even on fewer than gemm_small_m rows, so its
// bits are those of gemm_block on a product that packs. Workspace of
// gemm_prepacked_a_workspace_size(c1 - c0, K) elements.
template <class T, class EM, class EK>
[[nodiscard]] bool gemm_prepacked_a_block(EM M, bool trans_b, EK K, T alpha, const T* packed_a, const T* B,
                                          std::int64_t ldb, bool accumulate, T* C, std::int64_t ldc, std::int64_t c0,
                                          std::int64_t c1, T* workspace, std::int64_t workspace_size) noexcept {
    static_assert(simd_type<T>, "gemm is for FP32 and FP64");
    using namespace gemm_detail;
    const std::int64_t m = extent(M), n = c1 - c0, k = extent(K);
    if (m <= 0 || n <= 0) return true;
    if (gemm_empty(m, n, k, accumulate, C + c0, ldc)) return true;
    if (workspace_size < packed_b_block<T>(n, k) || !aligned64(workspace)) return false;
    const view<T> b = operand(trans_b, B, ldb);
    packed_gemm(m, n, k, alpha, view<T>{nullptr, 0, 0}, view<T>{&b(0, c0), b.rs, b.cs}, accumulate, C + c0, ldc,
                prepacked_operands<T>{nullptr, packed_a}, workspace, static_cast<T*>(nullptr));
    return true;
}

}  // namespace dlgraph::kernels
