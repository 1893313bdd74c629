// Vectors for the kernel core. `batch<T>` is the widest vector of T: xsimd's
// batch when DLGRAPH_SIMD, else `vec<T, W>`, a portable array with the same
// interface (load/store, arithmetic, comparisons to a mask). The functions
// in `vm` (max, select, exp, fma, ...) take scalars, vecs and xsimd batches
// alike, so an element-wise functor is written once for all three, and a
// scalar functor runs on a device (DLGRAPH_HD).
//
// A portable build gives the same bits as a SIMD build of the same lane
// count for the arithmetic (+ - * /, sqrt, fma, max, min, select, abs) and
// therefore for sums, products and GEMM done in the same order; exp, log,
// tanh and pow follow the C library there, whose last bit can differ from
// xsimd's polynomials, and a horizontal add (hadd) folds halves, which may
// differ from an instruction set's own order.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <type_traits>

#include "dlgraph/kernels/config.hpp"

#if DLGRAPH_SIMD
#include "dlgraph/kernels/xsimd.hpp"
#endif

namespace dlgraph::kernels {

// Integer arithmetic that wraps around (two's complement, as NumPy and the
// vector instructions do) where C++ would leave an overflow undefined; other
// types use the plain operators. Unsigned arithmetic of the promoted width
// is defined modulo 2^n, and converting back is defined since C++20.
template <class T> using wide_unsigned = std::make_unsigned_t<decltype(+T())>;
template <class T> DLGRAPH_HD inline T wrap_add(T a, T b) noexcept {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(wide_unsigned<T>(a) + wide_unsigned<T>(b));
    else return a + b;
}
template <class T> DLGRAPH_HD inline T wrap_sub(T a, T b) noexcept {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(wide_unsigned<T>(a) - wide_unsigned<T>(b));
    else return a - b;
}
template <class T> DLGRAPH_HD inline T wrap_mul(T a, T b) noexcept {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(wide_unsigned<T>(a) * wide_unsigned<T>(b));
    else return a * b;
}
template <class T> DLGRAPH_HD inline T wrap_neg(T a) noexcept {
    if constexpr (std::is_integral_v<T>) return static_cast<T>(wide_unsigned<T>(0) - wide_unsigned<T>(a));
    else return -a;
}

// A number as type T, defined for every input: a floating-point value
// going to an integer type (not bool) truncates toward zero, saturates at
// T's limits and gives 0 for NaN (a plain cast is undefined for those);
// every other conversion is the plain cast (bool: nonzero is true).
template <class T, class F> DLGRAPH_HD inline T convert(F x) noexcept {
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool> && std::is_floating_point_v<F>) {
        if (x != x) return T(0);
        // The limits as F: min is a power of two (exact); max + 1 is too.
        constexpr F lo = static_cast<F>(std::numeric_limits<T>::min());
        constexpr F hi = static_cast<F>(std::numeric_limits<T>::max() / 2 + 1) * F(2);
        if (x <= lo) return std::numeric_limits<T>::min();
        if (x >= hi) return std::numeric_limits<T>::max();
        return static_cast<T>(x);
    } else {
        return static_cast<T>(x);
    }
}

template <class T, int W> struct vec_mask {
    bool m[W];
};

template <class T, int W> struct vec {
    static_assert(W > 0 && (W & (W - 1)) == 0, "lanes must be a power of two");
    using value_type = T;
    static constexpr std::size_t size = W;
    T v[W];

    vec() noexcept = default;
    vec(T s) noexcept {  // broadcast, as xsimd's batch(T)
        for (int i = 0; i < W; ++i) v[i] = s;
    }
    static vec load_unaligned(const T* p) noexcept {
        vec r;
        for (int i = 0; i < W; ++i) r.v[i] = p[i];
        return r;
    }
    static vec load_aligned(const T* p) noexcept { return load_unaligned(p); }
    void store_unaligned(T* p) const noexcept {
        for (int i = 0; i < W; ++i) p[i] = v[i];
    }
    void store_aligned(T* p) const noexcept { store_unaligned(p); }

    template <class F> static vec map(const vec& a, const vec& b, F f) noexcept {
        vec r;
        for (int i = 0; i < W; ++i) r.v[i] = f(a.v[i], b.v[i]);
        return r;
    }
    template <class F> static vec_mask<T, W> test(const vec& a, const vec& b, F f) noexcept {
        vec_mask<T, W> r;
        for (int i = 0; i < W; ++i) r.m[i] = f(a.v[i], b.v[i]);
        return r;
    }
    friend vec operator+(const vec& a, const vec& b) noexcept { return map(a, b, [](T x, T y) { return wrap_add(x, y); }); }
    friend vec operator-(const vec& a, const vec& b) noexcept { return map(a, b, [](T x, T y) { return wrap_sub(x, y); }); }
    friend vec operator*(const vec& a, const vec& b) noexcept { return map(a, b, [](T x, T y) { return wrap_mul(x, y); }); }
    friend vec operator/(const vec& a, const vec& b) noexcept { return map(a, b, [](T x, T y) { return x / y; }); }
    friend vec operator-(const vec& a) noexcept { return map(a, a, [](T x, T) { return wrap_neg(x); }); }
    vec& operator+=(const vec& b) noexcept { return *this = *this + b; }
    vec& operator*=(const vec& b) noexcept { return *this = *this * b; }
    friend vec_mask<T, W> operator>(const vec& a, const vec& b) noexcept { return test(a, b, [](T x, T y) { return x > y; }); }
    friend vec_mask<T, W> operator<(const vec& a, const vec& b) noexcept { return test(a, b, [](T x, T y) { return x < y; }); }
    friend vec_mask<T, W> operator>=(const vec& a, const vec& b) noexcept { return test(a, b, [](T x, T y) { return x >= y; }); }
    friend vec_mask<T, W> operator<=(const vec& a, const vec& b) noexcept { return test(a, b, [](T x, T y) { return x <= y; }); }
};

#if DLGRAPH_SIMD
template <class T> using batch = xsimd::batch<T>;
template <class V> inline constexpr bool is_batch = xsimd::is_batch<V>::value;
#else
template <class T> using batch = vec<T, DLGRAPH_VECTOR_BYTES / static_cast<int>(sizeof(T))>;
template <class V> inline constexpr bool is_batch = false;
template <class T, int W> inline constexpr bool is_batch<vec<T, W>> = true;
#endif

// Math on scalars, portable vecs and xsimd batches. The scalar forms are the
// expressions dlgraph's kernels have always used (so their bits stay).
namespace vm {

template <class T>
    requires std::is_arithmetic_v<T>
DLGRAPH_HD inline T max(T a, T b) noexcept { return a > b ? a : b; }
template <class T>
    requires std::is_arithmetic_v<T>
DLGRAPH_HD inline T min(T a, T b) noexcept { return a < b ? a : b; }
template <class T>
    requires std::is_arithmetic_v<T>
DLGRAPH_HD inline T select(bool c, T a, T b) noexcept { return c ? a : b; }
// Floating-point: the sign bit cleared (-0 gives +0), as vector abs does.
template <class T>
    requires std::is_arithmetic_v<T>
DLGRAPH_HD inline T abs(T a) noexcept {
    if constexpr (std::is_floating_point_v<T>) return std::fabs(a);
    else return a < T(0) ? wrap_neg(a) : a;  // |INT_MIN| wraps to INT_MIN, as in NumPy
}
template <class T>
    requires std::is_floating_point_v<T>
DLGRAPH_HD inline T exp(T a) noexcept { return std::exp(a); }
template <class T>
    requires std::is_floating_point_v<T>
DLGRAPH_HD inline T log(T a) noexcept { return std::log(a); }
template <class T>
    requires std::is_floating_point_v<T>
DLGRAPH_HD inline T tanh(T a) noexcept { return std::tanh(a); }
template <class T>
    requires std::is_floating_point_v<T>
DLGRAPH_HD inline T sqrt(T a) noexcept { return std::sqrt(a); }
// Further floating-point math (activations of issue 16): the C library's.
#define DLGRAPH_VM_SCALAR(name) \
    template <class T>          \
        requires std::is_floating_point_v<T> \
    DLGRAPH_HD inline T name(T a) noexcept { return std::name(a); }
DLGRAPH_VM_SCALAR(erf)
DLGRAPH_VM_SCALAR(sin)
DLGRAPH_VM_SCALAR(cos)
DLGRAPH_VM_SCALAR(floor)
DLGRAPH_VM_SCALAR(ceil)
DLGRAPH_VM_SCALAR(round)
#undef DLGRAPH_VM_SCALAR
template <class T>
    requires std::is_arithmetic_v<T>
DLGRAPH_HD inline T pow(T a, T b) noexcept {
    if constexpr (std::is_integral_v<T>) {
        // By squaring, wrapping as NumPy's integer power does. A negative
        // exponent truncates 1 / a^|b| toward zero.
        if (b < T(0)) return a == T(1) ? T(1) : a == T(-1) ? ((b % 2) ? T(-1) : T(1)) : T(0);
        T r = 1;
        for (; b > T(0); b = static_cast<T>(b / 2)) {
            if (b % 2) r = wrap_mul(r, a);
            a = wrap_mul(a, a);
        }
        return r;
    } else {
        return std::pow(a, b);
    }
}
template <class T>
    requires std::is_floating_point_v<T>
DLGRAPH_HD inline T fma(T a, T b, T c) noexcept { return std::fma(a, b, c); }

template <class T, int W> inline vec<T, W> max(const vec<T, W>& a, const vec<T, W>& b) noexcept {
    return vec<T, W>::map(a, b, [](T x, T y) { return max(x, y); });
}
template <class T, int W> inline vec<T, W> min(const vec<T, W>& a, const vec<T, W>& b) noexcept {
    return vec<T, W>::map(a, b, [](T x, T y) { return min(x, y); });
}
template <class T, int W>
inline vec<T, W> select(const vec_mask<T, W>& c, const vec<T, W>& a, const vec<T, W>& b) noexcept {
    vec<T, W> r;
    for (int i = 0; i < W; ++i) r.v[i] = c.m[i] ? a.v[i] : b.v[i];
    return r;
}
template <class T, int W> inline vec<T, W> abs(const vec<T, W>& a) noexcept {
    return vec<T, W>::map(a, a, [](T x, T) { return abs(x); });
}
template <class T, int W> inline vec<T, W> exp(const vec<T, W>& a) noexcept {
    return vec<T, W>::map(a, a, [](T x, T) { return std::exp(x); });
}
template <class T, int W> inline vec<T, W> log(const vec<T, W>& a) noexcept {
    return vec<T, W>::map(a, a, [](T x, T) { return std::log(x); });
}
template <class T, int W> inline vec<T, W> tanh(const vec<T, W>& a) noexcept {
    return vec<T, W>::map(a, a, [](T x, T) { return std::tanh(x); });
}
template <class T, int W> inline vec<T, W> sqrt(const vec<T, W>& a) noexcept {
    return vec<T, W>::map(a, a, [](T x, T) { return std::sqrt(x); });
}
#define DLGRAPH_VM_PORTABLE(name)                                        \
    template <class T, int W> inline vec<T, W> name(const vec<T, W>& a) noexcept { \
        return vec<T, W>::map(a, a, [](T x, T) { return std::name(x); });            \
    }
DLGRAPH_VM_PORTABLE(erf)
DLGRAPH_VM_PORTABLE(sin)
DLGRAPH_VM_PORTABLE(cos)
DLGRAPH_VM_PORTABLE(floor)
DLGRAPH_VM_PORTABLE(ceil)
DLGRAPH_VM_PORTABLE(round)
#undef DLGRAPH_VM_PORTABLE
template <class T, int W> inline vec<T, W> pow(const vec<T, W>& a, const vec<T, W>& b) noexcept {
    return vec<T, W>::map(a, b, [](T x, T y) { return std::pow(x, y); });
}
template <class T, int W> inline vec<T, W> fma(const vec<T, W>& a, const vec<T, W>& b, const vec<T, W>& c) noexcept {
    vec<T, W> r;
    for (int i = 0; i < W; ++i) r.v[i] = std::fma(a.v[i], b.v[i], c.v[i]);
    return r;
}
// The sum of the lanes, folding halves: (lo + hi) until one lane is left.
template <class T, int W> inline T hadd(const vec<T, W>& a) noexcept {
    T t[W];
    for (int i = 0; i < W; ++i) t[i] = a.v[i];
    for (int w = W / 2; w > 0; w /= 2)
        for (int i = 0; i < w; ++i) t[i] = wrap_add(t[i], t[i + w]);
    return t[0];
}

#if DLGRAPH_SIMD
template <class T, class A> inline xsimd::batch<T, A> max(const xsimd::batch<T, A>& a, const xsimd::batch<T, A>& b) noexcept {
    return xsimd::max(a, b);
}
template <class T, class A> inline xsimd::batch<T, A> min(const xsimd::batch<T, A>& a, const xsimd::batch<T, A>& b) noexcept {
    return xsimd::min(a, b);
}
template <class T, class A>
inline xsimd::batch<T, A> select(const xsimd::batch_bool<T, A>& c, const xsimd::batch<T, A>& a,
                                 const xsimd::batch<T, A>& b) noexcept {
    return xsimd::select(c, a, b);
}
template <class T, class A> inline xsimd::batch<T, A> abs(const xsimd::batch<T, A>& a) noexcept { return xsimd::abs(a); }
// xsimd's exp returns inf from its `maxlog` on (88.376 in FP32, 709.436 in
// FP64), short of where exp overflows (88.7228, 709.7827), where the C
// library and CUDA still give finite values. There exp(x) = exp(x - h) * e^h
// with h = ln 2 rounded to few bits (Cody and Waite's ln2_hi), so that
// x - h is exact, and e^h rounded: within 2 ulp of the C library.
template <class T> struct exp_near_overflow;
template <> struct exp_near_overflow<float> {
    static constexpr float from = 88.0f, ln2_hi = 0x1.62e4p-1f, exp_ln2_hi = 0x1.ffffd0p+0f;
};
template <> struct exp_near_overflow<double> {
    static constexpr double from = 709.0, ln2_hi = 0x1.62e42feep-1, exp_ln2_hi = 0x1.fffffffe5c611p+0;
};
template <class T, class A> inline xsimd::batch<T, A> exp(const xsimd::batch<T, A>& a) noexcept {
    using B = xsimd::batch<T, A>;
    using E = exp_near_overflow<T>;
    const B r = xsimd::exp(a);
    const auto near = a > B(E::from);
    if (!xsimd::any(near)) return r;
    return xsimd::select(near, xsimd::exp(a - B(E::ln2_hi)) * B(E::exp_ln2_hi), r);
}
template <class T, class A> inline xsimd::batch<T, A> log(const xsimd::batch<T, A>& a) noexcept { return xsimd::log(a); }
template <class T, class A> inline xsimd::batch<T, A> tanh(const xsimd::batch<T, A>& a) noexcept { return xsimd::tanh(a); }
template <class T, class A> inline xsimd::batch<T, A> sqrt(const xsimd::batch<T, A>& a) noexcept { return xsimd::sqrt(a); }
#define DLGRAPH_VM_XSIMD(name) \
    template <class T, class A> inline xsimd::batch<T, A> name(const xsimd::batch<T, A>& a) noexcept { return xsimd::name(a); }
DLGRAPH_VM_XSIMD(erf)
DLGRAPH_VM_XSIMD(sin)
DLGRAPH_VM_XSIMD(cos)
DLGRAPH_VM_XSIMD(floor)
DLGRAPH_VM_XSIMD(ceil)
DLGRAPH_VM_XSIMD(round)  // half away from zero, as std::round
#undef DLGRAPH_VM_XSIMD
template <class T, class A> inline xsimd::batch<T, A> pow(const xsimd::batch<T, A>& a, const xsimd::batch<T, A>& b) noexcept {
    return xsimd::pow(a, b);
}
// xsimd 8.1 (Debian 12) has no AVX-512 fma: its generic one multiplies and
// then adds, rounding twice, where every other path (std::fma, the portable
// vec, AVX2's fma3) rounds once. So 64-byte batches use the instruction.
template <class T, class A>
inline xsimd::batch<T, A> fma(const xsimd::batch<T, A>& a, const xsimd::batch<T, A>& b, const xsimd::batch<T, A>& c) noexcept {
#if XSIMD_WITH_AVX512F
    if constexpr (std::is_same_v<T, float> && sizeof(xsimd::batch<T, A>) == 64) return _mm512_fmadd_ps(a, b, c);
    else if constexpr (std::is_same_v<T, double> && sizeof(xsimd::batch<T, A>) == 64) return _mm512_fmadd_pd(a, b, c);
    else
#endif
        return xsimd::fma(a, b, c);
}
template <class T, class A> inline T hadd(const xsimd::batch<T, A>& a) noexcept { return xsimd::hadd(a); }
#endif

}  // namespace vm

}  // namespace dlgraph::kernels
