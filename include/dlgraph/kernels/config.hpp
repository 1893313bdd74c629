// The kernel core's ground rules. Under every device and the fixed models
// sits one layer of functions on raw pointers, extents and strides: noexcept,
// no exceptions, no heap, no threads, no containers, no xtensor. An extent is
// a plain integer or a std::integral_constant, so one function serves a
// Session (run-time shapes) and a fixed model (shapes in the type). Bad data
// is reported through a KernelFault (op.hpp), never thrown.
//
// Vector code goes through kernels/vec.hpp: xsimd's batches where xsimd has
// an instruction set for the target (x86, ARM NEON) and DLGRAPH_NO_SIMD is
// not defined, else a portable array type with the same interface, so every
// kernel has one body and a portable build of it.
#pragma once

#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define DLGRAPH_HD __host__ __device__
#else
#define DLGRAPH_HD
#endif

#if !defined(DLGRAPH_NO_SIMD) && !defined(__CUDACC__) && \
    (defined(__x86_64__) || defined(__i386__) || defined(__aarch64__) || defined(__ARM_NEON))
#define DLGRAPH_SIMD 1
#else
#define DLGRAPH_SIMD 0
#endif

// DLGRAPH_UNROLL(n) before a loop unrolls it fully (up to n iterations)
// where the build optimizes for speed, and does nothing at -Os, where code
// size counts: the GEMM's micro-kernels unrolled took a Cortex-M4 model's
// code from 7.7 to 9.9 KiB.
#define DLGRAPH_PRAGMA(x) _Pragma(#x)
#if defined(__OPTIMIZE_SIZE__)
#define DLGRAPH_UNROLL(n)
#else
#define DLGRAPH_UNROLL(n) DLGRAPH_PRAGMA(GCC unroll n)
#endif

// Bytes of the portable vector type (DLGRAPH_SIMD == 0): 64 gives the same
// lanes as AVX-512, so a portable build sums in the same order.
#ifndef DLGRAPH_VECTOR_BYTES
#define DLGRAPH_VECTOR_BYTES 64
#endif

namespace dlgraph::kernels {

// The value of an extent: a plain integer, or a compile-time constant
// (std::integral_constant<std::int64_t, N>) of a fixed model.
template <class E> constexpr std::int64_t extent(E e) noexcept { return static_cast<std::int64_t>(e); }

// Bad data a kernel met. Kernels never throw: a core function that can meet
// bad data returns a `fault` (code none when all was well), and its caller
// records it (KernelFault in op.hpp) for the session to throw after the step.
enum class fault_code : int { none = 0, div_by_zero, label_out_of_range, k_out_of_range, id_out_of_range, prob_out_of_range };
struct fault {
    fault_code code = fault_code::none;
    std::int64_t a = 0, b = 0, c = 0;  // the facts: a label, its row, the class count; k and the dim; an id, its
                                       // position, the table's rows; a probability's position and its
                                       // value's FP64 bits
    constexpr explicit operator bool() const noexcept { return code != fault_code::none; }
};

// Element types with vector kernels.
template <class T> inline constexpr bool simd_type = std::is_same_v<T, float> || std::is_same_v<T, double>;

}  // namespace dlgraph::kernels
