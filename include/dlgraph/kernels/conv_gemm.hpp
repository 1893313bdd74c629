// A convolution's product without its column matrix. Where the window has
// stride 1 and the output is as wide as the input (SAME padding: the
// conv_detail::shifted_rows case), row k of the column matrix, tap t of
// channel ci, is the image itself shifted: col[k][j] = image[ci * h * w +
// offset(t) + j] wherever that reads the image, 0 in the padding. The GEMM's
// micro-kernel then reads B from the image, with a mask per tap and tile of
// nr output columns that zeroes the padding's lanes (AVX-512's masked
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
    return conv_shifted_built && simd_type<T> && gemm_detail::nr<T> <= 32 && conv_detail::shifted_rows(g) &&
           !g.identity() && g.c > 0 && g.oh > 0 && g.ow > 0;
}

// The tables of g's shifted product: per tap its offset in a channel's
// plane, and per tile of nr output columns and tap the bits of the tile's
// columns that read the image (bit l: column tile * nr + l).
struct conv_shifted_tables {
    const std::int64_t* offset;  // [kh * kw]
    const std::uint32_t* mask;   // [tiles][kh * kw]
};

// The lengths of the two tables for g: offsets, masks.
template <class T> constexpr std::int64_t conv_shifted_offsets_size(const window2d& g) noexcept { return g.kh * g.kw; }
template <class T> constexpr std::int64_t conv_shifted_masks_size(const window2d& g) noexcept {
    return (g.col_cols() + gemm_detail::nr<T> - 1) / gemm_detail::nr<T> * g.kh * g.kw;
}
// Fills them, for a window that conv_shifted_serves.
template <class T>
conv_shifted_tables conv_shifted_tables_make(const window2d& g, std::int64_t* offset, std::uint32_t* mask) noexcept {
    constexpr int NR = gemm_detail::nr<T>;
    const std::int64_t taps = g.kh * g.kw, ohw = g.col_cols();
    for (std::int64_t i = 0; i < g.kh; ++i)
        for (std::int64_t j = 0; j < g.kw; ++j) {
            const std::int64_t t = i * g.kw + j, dy = i * g.dh - g.pt, dx = j * g.dw - g.pl;
            offset[t] = dy * g.w + dx;
            for (std::int64_t j0 = 0; j0 < ohw; j0 += NR) {
                std::uint32_t bits = 0;
                for (int l = 0; l < NR && l < 32 && j0 + l < ohw; ++l) {
                    const std::int64_t y = (j0 + l) / g.ow + dy, x = (j0 + l) % g.ow + dx;
                    if (y >= 0 && y < g.h && x >= 0 && x < g.w) bits |= std::uint32_t(1) << l;
                }
                mask[j0 / NR * taps + t] = bits;
            }
        }
    return {offset, mask};
}

#if DLGRAPH_SIMD && XSIMD_WITH_AVX512F
namespace gemm_detail {

// A tile's operands where B is a convolution's column matrix read from the
// image. The cursor `b` starts at the tile's first column j0 and the k
// block's first row, channel ci0's tap t; row k + 1 is the next tap, or
// the next channel's first after the last tap.
template <class T> struct shifted_operands {
    struct rows {
        // The address of channel ci0's plane, plus j0 elements. Addresses
        // are integers here: with the padding's lanes left out, a tap's
        // run may start before the image or end after it.
        std::uintptr_t p;
        std::int64_t plane, taps, t;  // plane: bytes of a channel
        const std::int64_t* offset;
        const std::uint32_t* mask;  // the tile's, per tap
        batch<T> load(int v) const noexcept {  // vector v of tap t's run, 0 in the padding's lanes
            const unsigned bits = static_cast<unsigned>(mask[t] >> (v * W<T>));
            const auto at = reinterpret_cast<const void*>(
                p + static_cast<std::uintptr_t>((offset[t] + v * W<T>) * std::int64_t(sizeof(T))));
            if constexpr (std::is_same_v<T, float>) return _mm512_maskz_loadu_ps(static_cast<__mmask16>(bits), at);
            else return _mm512_maskz_loadu_pd(static_cast<__mmask8>(bits), at);
        }
        void next() noexcept {
            if (++t == taps) {
                t = 0;
                p += static_cast<std::uintptr_t>(plane);
            }
        }
    };
    const T* a;
    std::int64_t as;
    rows b;
    rows b_rows() const noexcept { return b; }
};

}  // namespace gemm_detail
#endif

// Columns [c0, c1) of C [m, ohw] (row stride ldc) = A x col, col being
// im2col(g, image) (one group's channels of one image) and A (m x c * kh
// * kw) as gemm_pack_a wrote it. Only where conv_shifted_serves<T>(g),
// with `tables` from conv_shifted_tables_make; c0 must be a multiple of
// gemm_nr<T> (a tile's mask is that of its place among all the tiles).
template <class T>
void conv_shifted_product(const window2d& g, std::int64_t m, const T* packed_a, const conv_shifted_tables& tables,
                          const T* image, T* C, std::int64_t ldc, std::int64_t c0, std::int64_t c1) noexcept {
#if DLGRAPH_SIMD && XSIMD_WITH_AVX512F
    using namespace gemm_detail;
    constexpr int MR = mr<T>, NR = nr<T>;
    const std::int64_t K = g.col_rows(), kc_max = k_block(K), taps = g.kh * g.kw, plane = g.h * g.w;
    const std::int64_t bytes = sizeof(T);
    const auto base = reinterpret_cast<std::uintptr_t>(image);
    for (std::int64_t pc = 0; pc < K; pc += kc_max) {
        const std::int64_t kc = std::min(kc_max, K - pc);
        for (std::int64_t ic = 0; ic < m; ic += mc_block<T>) {
            const std::int64_t mc = std::min(mc_block<T>, m - ic);
            const T* const Ap = packed_a + packed_a_offset<T>(m, ic, kc, pc);
            for (std::int64_t jr = c0; jr < c1; jr += NR) {
                const int cols = static_cast<int>(std::min<std::int64_t>(NR, c1 - jr));
                const typename shifted_operands<T>::rows b{
                    base + static_cast<std::uintptr_t>((pc / taps * plane + jr) * bytes), plane * bytes, taps, pc % taps,
                    tables.offset, tables.mask + jr / NR * taps};
                for (std::int64_t ir = 0; ir < mc; ir += MR) {
                    const int rows = static_cast<int>(std::min<std::int64_t>(MR, mc - ir));
                    const shifted_operands<T> p{Ap + ir * kc, MR, b};
                    micro_tile<T>(kc, p, C + (ic + ir) * ldc + jr, ldc, T(1), pc > 0, rows, cols);
                }
            }
        }
    }
#else
    (void)g, (void)m, (void)packed_a, (void)tables, (void)image, (void)C, (void)ldc, (void)c0, (void)c1;
#endif
}

}  // namespace dlgraph::kernels
