// xsimd, included once for all kernels. GCC 12 reports false
// "-Wuninitialized" warnings inside the AVX-512 intrinsics headers when
// xsimd's exp/pow/shift kernels are inlined; the pragmas cover only those
// headers' text, so warnings in dlgraph's own code still show.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#include <xsimd/xsimd.hpp>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
