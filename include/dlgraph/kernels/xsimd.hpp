// xsimd, included once for all kernels (through kernels/vec.hpp, where
// DLGRAPH_SIMD is set). GCC 12 reports false
// "-Wuninitialized" warnings inside the AVX-512 intrinsics headers when
// xsimd's exp/pow/shift kernels are inlined; the pragmas cover only those
// headers' text, so warnings in dlgraph's own code still show.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
// Without optimization (__OPTIMIZE__ unset: -O0) GCC defines the AVX-512BW
// masked blends as macros that C-cast their operands, which an xsimd batch
// (a class) does not survive, so xsimd 10's select for AVX-512BW fails to
// compile in Debug builds with -march=native. The functions GCC defines
// when optimizing, which convert their operands, replace them.
#if defined(__GNUC__) && !defined(__clang__) && !defined(__OPTIMIZE__) && defined(__AVX512BW__) && \
    (defined(__x86_64__) || defined(__i386__))
#undef _mm512_mask_blend_epi8
#undef _mm512_mask_blend_epi16
inline __m512i _mm512_mask_blend_epi8(__mmask64 u, __m512i a, __m512i w) {
    return reinterpret_cast<__m512i>(__builtin_ia32_blendmb_512_mask(reinterpret_cast<__v64qi>(a),
                                                                     reinterpret_cast<__v64qi>(w), u));
}
inline __m512i _mm512_mask_blend_epi16(__mmask32 u, __m512i a, __m512i w) {
    return reinterpret_cast<__m512i>(__builtin_ia32_blendmw_512_mask(reinterpret_cast<__v32hi>(a),
                                                                     reinterpret_cast<__v32hi>(w), u));
}
#endif
#include <xsimd/xsimd.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
