// Evaluating a classifier over raw rows, the kernel core of ops/eval_ops.hpp:
// top_k (the k largest values of each row and where they are; no scratch
// memory) and accuracy (the share of rows whose label is in their top k).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "dlgraph/kernels/config.hpp"

namespace dlgraph::kernels {

// Whether element i of a row ranks before element j: a larger value first,
// NaN above everything, and equal values by lower index. A strict total
// order, so the heap and the sort below are well defined on any input.
template <class T> struct topk_before {
    const T* row;
    DLGRAPH_HD bool operator()(std::int64_t i, std::int64_t j) const noexcept {
        const T a = row[i], b = row[j];
        if constexpr (std::is_floating_point_v<T>) {
            const bool na = std::isnan(a), nb = std::isnan(b);
            if (na != nb) return na;
            if (na) return i < j;
        }
        if (a != b) return a > b;
        return i < j;
    }
};

// For each of `rows` rows of n values in x: values[r, :k] and indices[r, :k]
// = the k best (topk_before) values of the row and their positions, best
// first. Per row the k best indices are kept as a heap in indices itself
// (worst on top), then sorted best first; O(n log k). A k outside [0, n]
// writes nothing and returns fault{k_out_of_range, k, n}.
template <class T, class R, class N, class K>
inline fault top_k(const T* x, T* values, std::int64_t* indices, R rows_, N n_, K k_) noexcept {
    const std::int64_t rows = extent(rows_), n = extent(n_), kk = extent(k_);
    if (kk < 0 || kk > n) return fault{fault_code::k_out_of_range, kk, n};
    if (kk == 0) return {};
    for (std::int64_t r = 0; r < rows; ++r) {
        const topk_before<T> before{x + r * n};
        std::int64_t* ir = indices + r * kk;
        for (std::int64_t j = 0; j < kk; ++j) ir[j] = j;
        std::make_heap(ir, ir + kk, before);  // ir[0] is the worst kept
        for (std::int64_t j = kk; j < n; ++j) {
            if (!before(j, ir[0])) continue;
            std::pop_heap(ir, ir + kk, before);
            ir[kk - 1] = j;
            std::push_heap(ir, ir + kk, before);
        }
        std::sort(ir, ir + kk, before);
        for (std::int64_t j = 0; j < kk; ++j) values[r * kk + j] = before.row[ir[j]];
    }
    return {};
}

// Over `rows` rows of k indices (top_k's) and one label per row: *correct =
// the rows whose label is among their indices, *total = rows, *accuracy =
// correct / rows (0 for no rows), divided in double precision.
template <class I, class R, class K>
inline void accuracy(const std::int64_t* indices, const I* label, R rows_, K k_, float* accuracy,
                     std::int32_t* correct, std::int32_t* total) noexcept {
    static_assert(std::is_integral_v<I>, "labels are class indices");
    const std::int64_t rows = extent(rows_), kk = extent(k_);
    std::int64_t hits = 0;
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t j = 0; j < kk; ++j)
            if (indices[r * kk + j] == static_cast<std::int64_t>(label[r])) {
                ++hits;
                break;
            }
    *accuracy = rows ? static_cast<float>(static_cast<double>(hits) / static_cast<double>(rows)) : 0.0f;
    *correct = static_cast<std::int32_t>(hits);
    *total = static_cast<std::int32_t>(rows);
}

}  // namespace dlgraph::kernels
