// A convolution's product without its column matrix. Where the window has
// stride 1 and the output is as wide as the input (SAME padding: the
// conv_detail::shifted_rows case), row k of the column matrix, tap t of
// channel ci, is the image itself shifted: col[k][j] = image[ci * h * w +
// offset(t) + j] wherever that reads the image, 0 in the padding. The GEMM's
// micro-kernel then reads B from the image, with a mask per tap, tile of
// nr output columns and vector that zeroes the padding's lanes (AVX-512's masked
// loads, which do not touch the lanes they leave out). No column matrix is
// written: im2col was a fifth of a 32 -> 64 channel 3x3 convolution on
// 14x14.
//
// Every output element is the chain of multiply-adds of the packed GEMM
// over im2col's matrix: the same k blocks, the same order, the same zeros.
// So the bits are those of im2col and gemm (tests/test_conv.cpp checks it).
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include "dlgraph/kernels/conv.hpp"
#include "dlgraph/kernels/gemm.hpp"

namespace dlgraph::kernels {

#if DLGRAPH_SIMD && XSIMD_WITH_AVX512F
inline constexpr bool conv_shifted_built = true;
#else
inline constexpr bool conv_shifted_built = false;  // masked loads: AVX-512 only
#endif

// Whether conv_shifted_product computes g's product: stride 1, the output
// as wide as the input, a window that reads more than the image as it is
// (a 1x1 window with stride 1 and no padding is the image itself), and at
// least one channel and output.
template <class T> constexpr bool conv_shifted_serves(const window2d& g) noexcept {
    return conv_shifted_built && simd_type<T> && gemm_detail::W<T> <= 16 && conv_detail::shifted_rows(g) &&
           !g.identity() && g.c > 0 && g.oh > 0 && g.ow > 0;
}

// The tables of g's shifted product: per tap its offset in a channel's
// plane, and per tile of nr output columns, tap and vector of the tile the
// bits of the vector's lanes that read the image (bit l: column tile * nr
// + v * W + l), one 16-bit mask each, which the kernel loads straight
// into a mask register.
struct conv_shifted_tables {
    const std::int64_t* offset;  // [kh * kw]
    const std::uint16_t* mask;   // [tiles][kh * kw][nv]
};

// The lengths of the two tables for g: offsets, masks.
template <class T> constexpr std::int64_t conv_shifted_offsets_size(const window2d& g) noexcept { return g.kh * g.kw; }
template <class T> constexpr std::int64_t conv_shifted_masks_size(const window2d& g) noexcept {
    return (g.col_cols() + gemm_detail::nr<T> - 1) / gemm_detail::nr<T> * g.kh * g.kw * gemm_detail::nv;
}
// Fills them, for a window that conv_shifted_serves.
template <class T>
conv_shifted_tables conv_shifted_tables_make(const window2d& g, std::int64_t* offset, std::uint16_t* mask) noexcept {
    using gemm_detail::nv, gemm_detail::W;
    constexpr int NR = gemm_detail::nr<T>;
    const std::int64_t taps = g.kh * g.kw, ohw = g.col_cols();
    for (std::int64_t i = 0; i < g.kh; ++i)
        for (std::int64_t j = 0; j < g.kw; ++j) {
            const std::int64_t t = i * g.kw + j, dy = i * g.dh - g.pt, dx = j * g.dw - g.pl;
            offset[t] = dy * g.w + dx;
            for (std::int64_t j0 = 0; j0 < ohw; j0 += NR)
                for (int v = 0; v < nv; ++v) {
                    std::uint16_t bits = 0;
                    for (int l = 0; l < W<T> && l < 16; ++l) {
                        const std::int64_t col = j0 + v * W<T> + l;
                        if (col >= ohw) break;
                        const std::int64_t y = col / g.ow + dy, x = col % g.ow + dx;
                        if (y >= 0 && y < g.h && x >= 0 && x < g.w) bits = std::uint16_t(bits | 1u << l);
                    }
                    mask[(j0 / NR * taps + t) * nv + v] = bits;
                }
        }
    return {offset, mask};
}

// Elements of workspace (64-byte aligned) conv_shifted_product needs for
// g: a packed panel of B (a k block of nr columns), and where the last tile
// is taken transposed (below) that tile's buffers.
template <class T> constexpr std::int64_t conv_shifted_workspace_size(const window2d& g) noexcept {
    using namespace gemm_detail;
    return k_block(g.col_rows()) * nr<T> + round_up(k_block(g.col_rows()) * mr<T>, 64 / sizeof(T)) + mr<T> * nr<T>;
}

// The last tile of columns, where it is at most one vector wide (196 =
// 6 x 32 + 4 output columns of a 14 x 14 image), can be computed transposed:
// C[:, e0:c1]^T = col[:, e0:c1]^T x A^T, the few columns' pixels
// broadcast and the filters as vectors, where the tile as it is would
// broadcast every filter for a vector of a few live lanes (4 columns of
// 64 filters took 8% of that convolution's time). Each element is the
// same chain of multiply-adds in the same k blocks, so the same bits.
// A^T comes packed as gemm_pack_b(true, K, m, A, K, ...) writes it.
template <class T> constexpr bool conv_shifted_has_edge(const window2d& g) noexcept {
    const std::int64_t rest = g.col_cols() % gemm_detail::nr<T>;
    return rest > 0 && rest <= gemm_detail::W<T>;
}

#if DLGRAPH_SIMD && XSIMD_WITH_AVX512F
namespace gemm_detail {

// Rows [pc, pc + kc) of the column matrix's tile of nr columns from j0, as
// pack_b packs them (panel[k][nr]), read from the image: row k is tap t of
// channel c, a run of the image with the tile's masks for that tap.
template <class T>
void pack_shifted_panel(const window2d& g, const conv_shifted_tables& tables, const T* image, std::int64_t pc,
                        std::int64_t kc, std::int64_t j0, T* panel) noexcept {
    constexpr int NR = nr<T>;
    const std::int64_t taps = g.kh * g.kw, plane = g.h * g.w;
    const std::uint16_t* const mask = tables.mask + j0 / NR * taps * nv;
    // Addresses are integers here: with the padding's lanes left out, a
    // tap's run may start before the image or end after it.
    const auto base = reinterpret_cast<std::uintptr_t>(image);
    std::int64_t c = pc / taps, t = pc % taps;
    for (std::int64_t k = 0; k < kc; ++k, panel += NR) {
        const std::uintptr_t run = base + static_cast<std::uintptr_t>((c * plane + tables.offset[t] + j0) * std::int64_t(sizeof(T)));
        for (int v = 0; v < nv; ++v) {
            const __mmask16 m = _load_mask16(const_cast<__mmask16*>(mask + t * nv + v));
            const auto at = reinterpret_cast<const void*>(run + static_cast<std::uintptr_t>(v * 64));
            if constexpr (std::is_same_v<T, float>) _mm512_store_ps(panel + v * W<T>, _mm512_maskz_loadu_ps(m, at));
            else _mm512_store_pd(panel + v * W<T>, _mm512_maskz_loadu_pd(static_cast<__mmask8>(m), at));
        }
        if (++t == taps) t = 0, ++c;
    }
}

// Block [pc, pc + kc) of the edge columns [e0, c1) of C (m rows, ldc),
// transposed (A^T packed at packed_at; col and tile: the workspace's
// buffers); acc: add to C.
template <class T>
void shifted_edge_block(const window2d& g, std::int64_t m, const conv_shifted_tables& tables, const T* image,
                        const T* packed_at, T* col, T* tile, std::int64_t pc, std::int64_t kc, T* C, std::int64_t ldc,
                        std::int64_t e0, std::int64_t c1, bool acc) noexcept {
    constexpr int MR = mr<T>, NR = nr<T>;
    static_assert(MR <= 16 && (std::is_same_v<T, float> || MR == 12), "a chunk is at most a mask of 16 lanes");
    const std::int64_t K = g.col_rows(), taps = g.kh * g.kw, plane = g.h * g.w;
    const std::uint16_t* mask = tables.mask + e0 / NR * taps * nv;  // the edge's tile
    for (std::int64_t p0 = e0; p0 < c1; p0 += MR) {  // col [kc][MR]: the chunk's pixels, k by k
        const int px = static_cast<int>(std::min<std::int64_t>(MR, c1 - p0));
        // The chunk's lanes of the edge's first vector (the edge is at most
        // one vector wide), read as the tile would read them, then stored
        // as the k-th row of the chunk's panel.
        const unsigned lanes = (1u << px) - 1u, keep = (1u << MR) - 1u;
        for (std::int64_t k = 0; k < kc; ++k) {
            const std::int64_t t = (pc + k) % taps, run = (pc + k) / taps * plane + tables.offset[t] + p0;
            const unsigned bits = (unsigned(mask[t * nv]) >> (p0 - e0)) & lanes;
            const auto at = reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(image) +
                                                          static_cast<std::uintptr_t>(run * std::int64_t(sizeof(T))));
            if constexpr (std::is_same_v<T, float>)
                _mm512_mask_storeu_ps(col + k * MR, static_cast<__mmask16>(keep),
                                      _mm512_maskz_loadu_ps(static_cast<__mmask16>(bits), at));
            else {  // MR = 12 doubles: the first vector's 8 lanes, then 4 zeros
                _mm512_storeu_pd(col + k * MR, _mm512_maskz_loadu_pd(static_cast<__mmask8>(bits), at));
                _mm256_storeu_pd(col + k * MR + 8, _mm256_setzero_pd());
            }
        }
        for (std::int64_t j0 = 0; j0 < m; j0 += NR) {  // tile [MR][NR]: a tile of C^T
            const std::int64_t jc = j0 / nc_block<T> * nc_block<T>, nc = std::min(nc_block<T>, m - jc);
            const T* b = packed_at + packed_b_offset<T>(K, jc, nc, pc) + (j0 - jc) * kc;
            const int filters = static_cast<int>(std::min<std::int64_t>(NR, m - j0));
            micro_tile<T>(kc, tile_operands<T>{col, MR, b, NR}, tile, NR, T(1), false, px, filters);
            for (int j = 0; j < filters; ++j) {
                T* out = C + (j0 + j) * ldc + p0;
                for (int r = 0; r < px; ++r) out[r] = acc ? tile[r * NR + j] + out[r] : tile[r * NR + j];
            }
        }
    }
}

}  // namespace gemm_detail
#endif

// Columns [c0, c1) of C [m, ohw] (row stride ldc) = A x col, col being
// im2col(g, image) (one group's channels of one image) and A (m x c * kh
// * kw) as gemm_pack_a wrote it. Only where conv_shifted_serves<T>(g),
// with `tables` from conv_shifted_tables_make; c0 must be a multiple of
// gemm_nr<T> (a tile's mask is that of its place among all the tiles).
// Each tile's k block of col is packed from the image into the workspace
// (conv_shifted_workspace_size<T>(g) elements, 64-byte aligned), then
// multiplied by every panel of A: the masked reads of the image happen
// once per tile, not once per panel of A. With packed_at (A^T, where
// conv_shifted_has_edge), the last narrow tile transposed.
template <class T>
void conv_shifted_product(const window2d& g, std::int64_t m, const T* packed_a, const conv_shifted_tables& tables,
                          const T* image, T* C, std::int64_t ldc, std::int64_t c0, std::int64_t c1, T* workspace,
                          const T* packed_at = nullptr) noexcept {
#if DLGRAPH_SIMD && XSIMD_WITH_AVX512F
    using namespace gemm_detail;
    constexpr int MR = mr<T>, NR = nr<T>;
    const std::int64_t K = g.col_rows(), kc_max = k_block(K);
    T* const panel = workspace;
    T* const edge_col = panel + kc_max * NR;
    T* const edge_tile = edge_col + round_up(kc_max * MR, 64 / sizeof(T));
    // Where the columns end in a narrow tile taken transposed, the tiles stop before it.
    const std::int64_t rest = (c1 - c0) % NR, e0 = rest != 0 && rest <= W<T> && packed_at ? c1 - rest : c1;
    for (std::int64_t pc = 0; pc < K; pc += kc_max) {
        const std::int64_t kc = std::min(kc_max, K - pc);
        for (std::int64_t jr = c0; jr < e0; jr += NR) {
            const int cols = static_cast<int>(std::min<std::int64_t>(NR, e0 - jr));
            pack_shifted_panel(g, tables, image, pc, kc, jr, panel);
            for (std::int64_t ic = 0; ic < m; ic += mc_block<T>) {
                const std::int64_t mc = std::min(mc_block<T>, m - ic);
                const T* const Ap = packed_a + packed_a_offset<T>(m, ic, kc, pc);
                for (std::int64_t ir = 0; ir < mc; ir += MR) {
                    const int rows = static_cast<int>(std::min<std::int64_t>(MR, mc - ir));
                    micro_tile<T>(kc, tile_operands<T>{Ap + ir * kc, MR, panel, NR}, C + (ic + ir) * ldc + jr, ldc,
                                  T(1), pc > 0, rows, cols);
                }
            }
        }
        if (e0 < c1) shifted_edge_block(g, m, tables, image, packed_at, edge_col, edge_tile, pc, kc, C, ldc, e0, c1, pc > 0);
    }
#else
    (void)g, (void)m, (void)packed_a, (void)tables, (void)image, (void)C, (void)ldc, (void)c0, (void)c1, (void)workspace;
    (void)packed_at;
#endif
}

// ---- small products straight from the image -----------------------------------------------
// Where the column matrix has few rows (K = c * kh * kw at most
// conv_direct_max_k: the demo's conv1, one channel 3x3, has 9), a tile of
// the product above multiplies 9 rows and stores, and packing its panel
// from the image costs about as much again: conv1 ran at 20-50 GFLOP/s,
// a fifth to a half of this core's FMAs. The direct product loads the K
// shifted vectors of 16 output pixels once (masked as the panels read
// them) and multiplies them by 16 filters at a time, each weight
// broadcast. Every element is the GEMM's chain (0, then one fused
// multiply-add per k in order, times alpha = 1), so the bits are those of
// im2col and the packed GEMM. FP32 (16-lane masks).
inline constexpr std::int64_t conv_direct_max_k = 12;
template <class T> constexpr bool conv_direct_serves(const window2d& g) noexcept {
    return std::is_same_v<T, float> && conv_shifted_serves<T>(g) && gemm_detail::nr<T> % 16 == 0 &&
           g.col_rows() <= conv_direct_max_k;
}
// The filters as conv_direct_product reads them: m rows of K, zero rows
// after them to a multiple of 16.
template <class T> constexpr std::int64_t conv_direct_filters_size(std::int64_t m, const window2d& g) noexcept {
    return (m + 15) / 16 * 16 * g.col_rows();
}
template <class T> void conv_direct_pack_filters(std::int64_t m, const window2d& g, const T* f, T* out) noexcept {
    const std::int64_t K = g.col_rows(), n = conv_direct_filters_size<T>(m, g);
    for (std::int64_t i = 0; i < n; ++i) out[i] = i < m * K ? f[i] : T(0);
}

#if DLGRAPH_SIMD && XSIMD_WITH_AVX512F
namespace gemm_detail {
template <int K>
void direct_columns(const window2d& g, std::int64_t m, const float* f, const conv_shifted_tables& tables,
                    const float* image, float* C, std::int64_t ldc, std::int64_t c0, std::int64_t c1) noexcept {
    constexpr int NR = nr<float>;
    const std::int64_t taps = g.kh * g.kw, plane = g.h * g.w;
    std::int64_t offset[K];  // row k of the column matrix: tap k % taps of channel k / taps
    for (int k = 0; k < K; ++k) offset[k] = k / taps * plane + tables.offset[k % taps];
    // Addresses are integers: with the padding's lanes left out, a run may
    // start before the image or end after it.
    const auto base = reinterpret_cast<std::uintptr_t>(image);
    for (std::int64_t j = c0; j < c1; j += 16) {
        // The vector's masks: tile j / NR, vector (j % NR) / 16, per tap.
        const std::uint16_t* const mask = tables.mask + j / NR * taps * nv + j % NR / 16;
        __m512 x[K];
        DLGRAPH_UNROLL(16)
        for (int k = 0; k < K; ++k) {
            const __mmask16 mk = _load_mask16(const_cast<__mmask16*>(mask + k % taps * nv));
            x[k] = _mm512_maskz_loadu_ps(mk, reinterpret_cast<const void*>(
                                                 base + static_cast<std::uintptr_t>((offset[k] + j) * std::int64_t(4))));
        }
        const std::int64_t n = std::min<std::int64_t>(16, c1 - j);
        const __mmask16 keep = static_cast<__mmask16>(n == 16 ? 0xffffu : (1u << n) - 1u);
        for (std::int64_t m0 = 0; m0 < m; m0 += 16) {
            const float* const fm = f + m0 * K;
            __m512 acc[16];
            DLGRAPH_UNROLL(16)
            for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
            // The k loop is left rolled: unrolled, GCC 12 emitted each
            // accumulator's chain of K multiply-adds one after the other
            // (latency-bound, 3.5x slower) and copied the weights to the stack.
            for (int k = 0; k < K; ++k) {
                DLGRAPH_UNROLL(16)
                for (int i = 0; i < 16; ++i) acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(fm[i * K + k]), x[k], acc[i]);
            }
            const int rows = static_cast<int>(std::min<std::int64_t>(16, m - m0));
            DLGRAPH_UNROLL(16)
            for (int i = 0; i < 16; ++i) {
                if (i >= rows) break;
                _mm512_mask_storeu_ps(C + (m0 + i) * ldc + j, keep, acc[i]);
            }
        }
    }
}
template <int... Ks>
void direct_columns_of(std::integer_sequence<int, Ks...>, int K, const window2d& g, std::int64_t m, const float* f,
                       const conv_shifted_tables& tables, const float* image, float* C, std::int64_t ldc,
                       std::int64_t c0, std::int64_t c1) noexcept {
    ((K == Ks + 1 ? direct_columns<Ks + 1>(g, m, f, tables, image, C, ldc, c0, c1) : void()), ...);
}
}  // namespace gemm_detail
#endif

// Columns [c0, c1) of C [m, ohw] (row stride ldc) = F x col, col being
// im2col(g, image) and F the filters as conv_direct_pack_filters wrote
// them; `tables` from conv_shifted_tables_make. Only where
// conv_direct_serves<T>(g); c0 a multiple of 16.
template <class T>
void conv_direct_product(const window2d& g, std::int64_t m, const T* filters, const conv_shifted_tables& tables,
                         const T* image, T* C, std::int64_t ldc, std::int64_t c0, std::int64_t c1) noexcept {
#if DLGRAPH_SIMD && XSIMD_WITH_AVX512F
    if constexpr (std::is_same_v<T, float>)
        gemm_detail::direct_columns_of(std::make_integer_sequence<int, int(conv_direct_max_k)>{}, int(g.col_rows()), g, m,
                                       filters, tables, image, C, ldc, c0, c1);
#else
    (void)g, (void)m, (void)filters, (void)tables, (void)image, (void)C, (void)ldc, (void)c0, (void)c1;
#endif
}

// ---- filters as vectors, the image's pixels broadcast ------------------------------------------
// The products above take the image's pixels as vectors and broadcast the
// filters. With stride 1 the transpose serves as well: C^T = col^T x F^T,
// a tile of R pixels along an output row times 2 vectors of 16 filters,
// each pixel broadcast from a zero-padded copy of the image (the padding is
// written once, so no masks and no packed panel per tile), the filters
// packed once per op as [K][mp] (mp: m rounded up to 16, zeros past m).
// A tile's pixels are a run of one padded row, so row k of col^T is the
// run at offset[k] (channel k / taps, tap k % taps) from the tile's first
// pixel. Output rows are made a band at a time (the band's padded rows in
// the workspace, conv_rows_band rows of output), each row in C^T as
// [ow][mp] and then transposed into C with 16 x 16 transposes.
// 32 -> 64 channels on 14x14 ran at 105 GFLOP/s this way where the
// shifted product ran at 95, and 64 -> 64 on 56x56 at 95 where im2col and
// the GEMM ran at 74-85 (one thread, the kernel core alone).
// Every element is the packed GEMM's chain: the same k blocks
// (gemm_detail::k_block), each a chain of fused multiply-adds from 0 in k
// order, the first block stored and each later one added to it (s + C), so
// the bits are those of im2col and the GEMM. FP32 (16-lane vectors).
#if DLGRAPH_SIMD && XSIMD_WITH_AVX512F
inline constexpr bool conv_rows_built = true;
#else
inline constexpr bool conv_rows_built = false;
#endif
// Pixels per tile (with 2 vectors of filters, 28 accumulators).
inline constexpr int conv_rows_tile = 14;
template <class T> constexpr bool conv_rows_serves(const window2d& g) noexcept {
    return conv_rows_built && std::is_same_v<T, float> && g.sh == 1 && g.sw == 1 && !g.identity() && g.c > 0 &&
           g.oh > 0 && g.ow > 0;
}
// The filters padded to a multiple of 16.
constexpr std::int64_t conv_rows_filters_padded(std::int64_t m) noexcept { return (m + 15) / 16 * 16; }
template <class T> constexpr std::int64_t conv_rows_filters_size(std::int64_t m, const window2d& g) noexcept {
    return g.col_rows() * conv_rows_filters_padded(m);
}
// f [m][K] as the product reads it, [K][mp].
template <class T> void conv_rows_pack_filters(std::int64_t m, const window2d& g, const T* f, T* out) noexcept {
    const std::int64_t K = g.col_rows(), mp = conv_rows_filters_padded(m);
    for (std::int64_t k = 0; k < K; ++k)
        for (std::int64_t i = 0; i < mp; ++i) out[k * mp + i] = i < m ? f[i * K + k] : T(0);
}
// Output rows per band: as many as keep the band's padded rows within
// conv_rows_band_bytes (at least one).
inline constexpr std::int64_t conv_rows_band_bytes = std::int64_t(256) << 10;
constexpr std::int64_t conv_rows_padded_width(const window2d& g) noexcept { return g.ow + (g.kw - 1) * g.dw; }
template <class T> constexpr std::int64_t conv_rows_band(const window2d& g) noexcept {
    const std::int64_t row = std::max<std::int64_t>(g.c * conv_rows_padded_width(g) * std::int64_t(sizeof(T)), 1);
    return std::clamp<std::int64_t>(conv_rows_band_bytes / row - (g.kh - 1) * g.dh, 1, std::max<std::int64_t>(g.oh, 1));
}
// The offsets of col^T's rows for bands of `band` output rows (K of them).
template <class T> constexpr std::int64_t conv_rows_offsets_size(const window2d& g) noexcept { return g.col_rows(); }
template <class T> void conv_rows_offsets_make(const window2d& g, std::int64_t band, std::int64_t* offset) noexcept {
    const std::int64_t wp = conv_rows_padded_width(g), plane = (band + (g.kh - 1) * g.dh) * wp, taps = g.kh * g.kw;
    for (std::int64_t k = 0; k < g.col_rows(); ++k) {
        const std::int64_t t = k % taps;
        offset[k] = k / taps * plane + t / g.kw * g.dh * wp + t % g.kw * g.dw;
    }
}
// Elements of workspace (64-byte aligned) for bands of `band` rows: one
// output row of C^T, then the band's padded rows.
template <class T> constexpr std::int64_t conv_rows_workspace_size(const window2d& g, std::int64_t m, std::int64_t band) noexcept {
    return g.ow * conv_rows_filters_padded(m) + g.c * (band + (g.kh - 1) * g.dh) * conv_rows_padded_width(g);
}

#if DLGRAPH_SIMD && XSIMD_WITH_AVX512F
namespace gemm_detail {
// ct [R][mp] (+)= col^T's R pixels from src (row k at src + offset[k]) x
// NV vectors of the packed filters from F, over kc rows of col^T.
template <int R, int NV>
void rows_tile(std::int64_t kc, const std::int64_t* offset, const float* src, const float* F, std::int64_t mp,
               float* ct, bool acc) noexcept {
    __m512 s[R][NV];
    DLGRAPH_UNROLL(16)
    for (int r = 0; r < R; ++r) {
        DLGRAPH_UNROLL(2)
        for (int v = 0; v < NV; ++v) s[r][v] = _mm512_setzero_ps();
    }
    for (std::int64_t k = 0; k < kc; ++k) {
        const float* const p = src + offset[k];
        __m512 f[NV];
        DLGRAPH_UNROLL(2)
        for (int v = 0; v < NV; ++v) f[v] = _mm512_load_ps(F + k * mp + v * 16);
        DLGRAPH_UNROLL(16)
        for (int r = 0; r < R; ++r) {
            const __m512 b = _mm512_set1_ps(p[r]);
            DLGRAPH_UNROLL(2)
            for (int v = 0; v < NV; ++v) s[r][v] = _mm512_fmadd_ps(b, f[v], s[r][v]);
        }
    }
    DLGRAPH_UNROLL(16)
    for (int r = 0; r < R; ++r) {
        DLGRAPH_UNROLL(2)
        for (int v = 0; v < NV; ++v) {
            float* const c = ct + r * mp + v * 16;
            _mm512_store_ps(c, acc ? _mm512_add_ps(s[r][v], _mm512_load_ps(c)) : s[r][v]);
        }
    }
}
template <int NV, int... Rs>
void rows_tile_of(std::integer_sequence<int, Rs...>, int R, std::int64_t kc, const std::int64_t* offset,
                  const float* src, const float* F, std::int64_t mp, float* ct, bool acc) noexcept {
    ((R == Rs + 1 ? rows_tile<Rs + 1, NV>(kc, offset, src, F, mp, ct, acc) : void()), ...);
}
}  // namespace gemm_detail
#endif

// Output rows [y0, y1) of C [m, oh * ow] (a filter's plane ldc apart) = F x
// im2col(g, image), F as conv_rows_pack_filters wrote it, `offset` from
// conv_rows_offsets_make(g, band), a workspace of
// conv_rows_workspace_size(g, m, band) elements. Only where
// conv_rows_serves<T>(g).
template <class T>
void conv_rows_product(const window2d& g, std::int64_t m, const T* filters, const std::int64_t* offset,
                       std::int64_t band, const T* image, T* C, std::int64_t ldc, std::int64_t y0, std::int64_t y1,
                       T* workspace) noexcept {
#if DLGRAPH_SIMD && XSIMD_WITH_AVX512F
    if constexpr (std::is_same_v<T, float>) {
        using gemm_detail::k_block;
        constexpr int R = conv_rows_tile;
        const std::int64_t K = g.col_rows(), kc_max = k_block(K), mp = conv_rows_filters_padded(m);
        const std::int64_t wp = conv_rows_padded_width(g), halo = (g.kh - 1) * g.dh;
        const std::int64_t plane = (band + halo) * wp;
        float* const ct = workspace;
        float* const pad = workspace + g.ow * mp;
        for (std::int64_t b0 = y0; b0 < y1; b0 += band) {
            const std::int64_t b1 = std::min(y1, b0 + band), rows = b1 - b0 + halo;
            // The band's padded rows: padded row r is input row b0 + r - pt,
            // padded column x input column x - pl; zeros outside the image.
            for (std::int64_t c = 0; c < g.c; ++c)
                for (std::int64_t r = 0; r < rows; ++r) {
                    float* const dst = pad + c * plane + r * wp;
                    const std::int64_t iy = b0 + r - g.pt;
                    if (iy < 0 || iy >= g.h) {
                        std::fill(dst, dst + wp, 0.0f);
                        continue;
                    }
                    // Columns [x0, x1) read the image: input columns from x0 - pl.
                    const std::int64_t x0 = std::min(g.pl, wp), x1 = std::clamp<std::int64_t>(g.pl + g.w, x0, wp);
                    std::fill(dst, dst + x0, 0.0f);
                    if (x1 > x0) std::copy_n(image + (c * g.h + iy) * g.w + (x0 - g.pl), x1 - x0, dst + x0);
                    std::fill(dst + x1, dst + wp, 0.0f);
                }
            for (std::int64_t y = b0; y < b1; ++y) {
                const float* const row = pad + (y - b0) * wp;
                for (std::int64_t pc = 0; pc < K; pc += kc_max) {
                    const std::int64_t kc = std::min(kc_max, K - pc);
                    for (std::int64_t x0 = 0; x0 < g.ow; x0 += R) {
                        const int px = static_cast<int>(std::min<std::int64_t>(R, g.ow - x0));
                        std::int64_t f0 = 0;
                        for (; f0 + 32 <= mp; f0 += 32)
                            gemm_detail::rows_tile_of<2>(std::make_integer_sequence<int, R>{}, px, kc, offset + pc,
                                                         row + x0, filters + pc * mp + f0, mp, ct + x0 * mp + f0, pc > 0);
                        if (f0 < mp)
                            gemm_detail::rows_tile_of<1>(std::make_integer_sequence<int, R>{}, px, kc, offset + pc,
                                                         row + x0, filters + pc * mp + f0, mp, ct + x0 * mp + f0, pc > 0);
                    }
                }
                // Row y of C^T [ow][mp] into C: 16 pixels x 16 filters at a time.
                for (std::int64_t x0 = 0; x0 < g.ow; x0 += 16) {
                    const int live = static_cast<int>(std::min<std::int64_t>(16, g.ow - x0));
                    const __mmask16 keep = gemm_detail::avx512::first(live);
                    for (std::int64_t m0 = 0; m0 < m; m0 += 16) {
                        __m512 t[16];
                        for (int l = 0; l < 16; ++l)
                            t[l] = l < live ? _mm512_load_ps(ct + (x0 + l) * mp + m0) : _mm512_setzero_ps();
                        gemm_detail::avx512::transpose16(t);
                        const int filters_here = static_cast<int>(std::min<std::int64_t>(16, m - m0));
                        for (int l = 0; l < filters_here; ++l) _mm512_mask_storeu_ps(C + (m0 + l) * ldc + y * g.ow + x0, keep, t[l]);
                    }
                }
            }
        }
        return;
    }
#endif
    (void)g, (void)m, (void)filters, (void)offset, (void)band, (void)image, (void)C, (void)ldc, (void)y0, (void)y1;
    (void)workspace;
}

// ---- the column matrix transposed and packed, for Filter@GRAD ----------------------------
// Filter@GRAD is dOut_g x col^T: the GEMM packs col^T, which it reads
// across its rows, with 16 x 16 transposes, from a column matrix im2col has
// just written. Where conv_shifted_serves, col's rows are masked runs of
// the image, so the packed col^T can be made from the image directly: 16
// rows (taps) at a time, each a masked load of 16 pixels, transposed in
// registers. The same values in the same places, so the product's bits
// are those of im2col and the packed GEMM; im2col's pass over the column
// matrix is gone: 5.9 µs an image against 10.9 for im2col and packing (32
// channels of 14 x 14, 3x3). FP32 only (the AVX-512 transpose is FP32's),
// and a column matrix of at least a panel's rows: conv1's 9 (one channel)
// would transpose mostly zeros, 4.4 µs against 2.5.
template <class T> constexpr bool conv_packs_columns(const window2d& g) noexcept {
    return std::is_same_v<T, float> && conv_shifted_serves<T>(g) && gemm_detail::nr<T> % 16 == 0 &&
           g.kh * g.kw <= 64 && g.col_rows() >= gemm_detail::nr<T>;
}

// Writes what gemm_pack_b(true, ohw, K, col, ohw, out) writes, col being
// im2col(g, image): gemm_packed_b_size<T>(ohw, K) elements, 64-byte
// aligned. Only where conv_packs_columns<T>(g).
template <class T> void conv_packed_columns(const window2d& g, const T* image, T* out) noexcept {
#if DLGRAPH_SIMD && XSIMD_WITH_AVX512F
    if constexpr (std::is_same_v<T, float>) {
        using namespace gemm_detail;
        constexpr int NR = nr<T>;
        const std::int64_t K = g.col_cols(), N = g.col_rows(), kc_max = k_block(K), taps = g.kh * g.kw;
        const std::int64_t plane = g.h * g.w;
        const auto base = reinterpret_cast<std::uintptr_t>(image);
        const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        std::int64_t offset[64];  // per tap, in a channel's plane
        for (std::int64_t t = 0; t < taps; ++t) offset[t] = (t / g.kw * g.dh - g.pt) * g.w + t % g.kw * g.dw - g.pl;
        for (std::int64_t jc = 0; jc < N; jc += nc_block<T>) {
            const std::int64_t nc = std::min(nc_block<T>, N - jc);
            for (std::int64_t pc = 0; pc < K; pc += kc_max) {
                const std::int64_t kc = std::min(kc_max, K - pc);
                T* const block = out + packed_b_offset<T>(K, jc, nc, pc);
                for (std::int64_t p0 = pc; p0 < pc + kc; p0 += 16) {
                    // Pixels p0 .. p0 + 15 (those before pc + kc): per tap, the lanes that read the image.
                    const int live = static_cast<int>(std::min<std::int64_t>(16, pc + kc - p0));
                    alignas(64) std::int32_t ys[16];
                    for (int l = 0; l < 16; ++l) ys[l] = static_cast<std::int32_t>((p0 + l) / g.ow);
                    const __m512i y = _mm512_load_si512(ys);
                    const __m512i x = _mm512_sub_epi32(_mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(p0)), lane),
                                                       _mm512_mullo_epi32(y, _mm512_set1_epi32(static_cast<int>(g.ow))));
                    __mmask16 reads[64];
                    for (std::int64_t t = 0; t < taps; ++t) {
                        const __m512i yy = _mm512_add_epi32(y, _mm512_set1_epi32(static_cast<int>(t / g.kw * g.dh - g.pt)));
                        const __m512i xx = _mm512_add_epi32(x, _mm512_set1_epi32(static_cast<int>(t % g.kw * g.dw - g.pl)));
                        reads[t] = avx512::first(live) & _mm512_cmpge_epi32_mask(yy, _mm512_setzero_si512()) &
                                   _mm512_cmplt_epi32_mask(yy, _mm512_set1_epi32(static_cast<int>(g.h))) &
                                   _mm512_cmpge_epi32_mask(xx, _mm512_setzero_si512()) &
                                   _mm512_cmplt_epi32_mask(xx, _mm512_set1_epi32(static_cast<int>(g.w)));
                    }
                    for (std::int64_t j0 = jc; j0 < jc + nc; j0 += 16) {  // 16 rows of col: half a panel
                        __m512 r[16];
                        std::int64_t ci = j0 / taps, t = j0 % taps;  // row j0 + l: tap t of channel ci
                        for (int l = 0; l < 16; ++l) {
                            if (j0 + l >= jc + nc) {
                                r[l] = _mm512_setzero_ps();
                                continue;
                            }
                            const std::int64_t at = ci * plane + offset[t] + p0;  // may lie outside: masked
                            r[l] = _mm512_maskz_loadu_ps(
                                reads[t], reinterpret_cast<const void*>(base + static_cast<std::uintptr_t>(at * 4)));
                            if (++t == taps) t = 0, ++ci;
                        }
                        avx512::transpose16(r);
                        // Panel (j0 - jc) / NR, its columns (j0 - jc) % NR .. + 15.
                        T* const dst = block + (j0 - jc) / NR * NR * kc + (j0 - jc) % NR + (p0 - pc) * NR;
                        for (int l = 0; l < live; ++l) _mm512_store_ps(dst + l * NR, r[l]);
                    }
                    // A last panel narrower than NR: its columns past N are zeros.
                    if (const std::int64_t rest = nc % NR; rest != 0 && rest <= NR - 16) {
                        T* const dst = block + nc / NR * NR * kc + (NR - 16) + (p0 - pc) * NR;
                        for (int l = 0; l < live; ++l) _mm512_store_ps(dst + l * NR, _mm512_setzero_ps());
                    }
                }
            }
        }
        return;
    }
#endif
    (void)g, (void)image, (void)out;
}

}  // namespace dlgraph::kernels
