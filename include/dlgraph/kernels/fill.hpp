// Filling a range, the kernel core of the ops that create values
// (fill_constant, fill_any_like, uniform_random, gaussian_random). The random
// fills draw from std::mt19937_64 through the standard distributions in
// double precision: no heap, and a seed gives the same values on every run
// and machine (the seed itself is the caller's to choose).
#pragma once

#include <algorithm>
#include <cstdint>
#include <random>
#include <type_traits>

#include "dlgraph/kernels/config.hpp"

namespace dlgraph::kernels {

// y[i] = v for i < n.
template <class T, class N> inline void fill_constant(T* y, N n, T v) noexcept { std::fill(y, y + extent(n), v); }

// y[i] = start + i * step for i < n (range; NumPy's arange): integers in
// two's complement, so any step reaching within the type is exact; floats
// in double, rounded to T once (not a running sum).
template <class T, class N> inline void fill_range(T* y, N n, T start, T step) noexcept {
    const std::int64_t m = extent(n);
    if constexpr (std::is_integral_v<T>) {
        using U = std::make_unsigned_t<T>;
        for (std::int64_t i = 0; i < m; ++i)
            y[i] = static_cast<T>(static_cast<U>(static_cast<U>(start) + static_cast<U>(static_cast<U>(i) * static_cast<U>(step))));
    } else {
        for (std::int64_t i = 0; i < m; ++i) y[i] = static_cast<T>(static_cast<double>(start) + static_cast<double>(i) * static_cast<double>(step));
    }
}

// y[i] = a uniform draw from [lo, hi) (lo <= hi), rounded to T, in order.
template <class T, class N>
inline void fill_uniform(T* y, N n, std::uint64_t seed, double lo, double hi) noexcept {
    std::mt19937_64 gen(seed);
    std::uniform_real_distribution<double> dist(lo, hi);
    for (std::int64_t i = 0, m = extent(n); i < m; ++i) y[i] = static_cast<T>(dist(gen));
}

// y[i] = a normal draw with `mean` and standard deviation `sd` (sd >= 0),
// rounded to T, in order.
template <class T, class N>
inline void fill_gaussian(T* y, N n, std::uint64_t seed, double mean, double sd) noexcept {
    if (!(sd > 0)) {  // std::normal_distribution needs sd > 0; a zero spread is the mean
        for (std::int64_t i = 0, m = extent(n); i < m; ++i) y[i] = static_cast<T>(mean);
        return;
    }
    std::mt19937_64 gen(seed);
    std::normal_distribution<double> dist(mean, sd);
    for (std::int64_t i = 0, m = extent(n); i < m; ++i) y[i] = static_cast<T>(dist(gen));
}

}  // namespace dlgraph::kernels
