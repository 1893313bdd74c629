// The kernel core of top_k and accuracy (kernels/eval.hpp) called directly
// on raw arrays, no Session: against a stable sort and a plain loop written
// here, for FP32, FP64 and the integer types, with run-time and compile-time
// extents, odd sizes, NaN and ties, and the k-out-of-range fault.
#include <doctest/doctest.h>

#include <dlgraph/kernels/eval.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <type_traits>
#include <vector>

namespace k = dlgraph::kernels;

namespace {

template <std::int64_t N> using fixed = std::integral_constant<std::int64_t, N>;

// Values with many ties (small integers), and for FP some NaN and infinities.
template <class T> std::vector<T> tie_values(std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> d(-6, 6);
    std::vector<T> v(n);
    for (auto& x : v) x = static_cast<T>(d(rng));
    if constexpr (std::is_floating_point_v<T>) {
        for (std::size_t i = 3; i < n; i += 11) v[i] = std::numeric_limits<T>::quiet_NaN();
        for (std::size_t i = 5; i < n; i += 13) v[i] = std::numeric_limits<T>::infinity();
        for (std::size_t i = 7; i < n; i += 17) v[i] = -std::numeric_limits<T>::infinity();
    }
    return v;
}

// The reference order: NaN first, then larger values, ties by lower index
// (a stable sort of the indices).
template <class T> std::vector<std::int64_t> ref_order(const T* row, std::int64_t n) {
    std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
    std::iota(idx.begin(), idx.end(), std::int64_t(0));
    std::stable_sort(idx.begin(), idx.end(), [row](std::int64_t i, std::int64_t j) {
        const double a = static_cast<double>(row[i]), b = static_cast<double>(row[j]);
        if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && !std::isnan(b);
        return a > b;
    });
    return idx;
}

template <class T> bool same_value(T a, T b) {
    if constexpr (std::is_floating_point_v<T>)
        if (std::isnan(a)) return std::isnan(b);
    return a == b;
}

template <class T> void check_top_k(std::int64_t rows, std::int64_t n, std::int64_t kk, unsigned seed) {
    CAPTURE(rows);
    CAPTURE(n);
    CAPTURE(kk);
    const std::vector<T> x = tie_values<T>(static_cast<std::size_t>(rows * n), seed);
    std::vector<T> vals(static_cast<std::size_t>(rows * kk));
    std::vector<std::int64_t> idx(static_cast<std::size_t>(rows * kk));
    CHECK_FALSE(k::top_k(x.data(), vals.data(), idx.data(), rows, n, kk));
    for (std::int64_t r = 0; r < rows; ++r) {
        const std::vector<std::int64_t> want = ref_order(x.data() + r * n, n);
        for (std::int64_t j = 0; j < kk; ++j) {
            const auto at = static_cast<std::size_t>(r * kk + j);
            CHECK(idx[at] == want[static_cast<std::size_t>(j)]);
            CHECK(same_value(vals[at], x[static_cast<std::size_t>(r * n + want[static_cast<std::size_t>(j)])]));
        }
    }
}

}  // namespace

TEST_CASE_TEMPLATE("kernels::top_k against a stable sort: odd sizes, ties, NaN", T, float, double, std::int32_t,
                   std::int64_t) {
    check_top_k<T>(1, 1, 1, 1);
    check_top_k<T>(3, 7, 1, 2);
    check_top_k<T>(3, 7, 3, 3);
    check_top_k<T>(3, 7, 7, 4);
    check_top_k<T>(2, 1023, 5, 5);
    check_top_k<T>(2, 1023, 1023, 6);
    check_top_k<T>(0, 9, 2, 7);
}

TEST_CASE_TEMPLATE("kernels::top_k with compile-time extents", T, float, double) {
    const std::vector<T> x = tie_values<T>(5 * 7, 9);
    std::vector<T> va(15), vb(15);
    std::vector<std::int64_t> ia(15), ib(15);
    CHECK_FALSE(k::top_k(x.data(), va.data(), ia.data(), fixed<5>{}, fixed<7>{}, fixed<3>{}));
    CHECK_FALSE(k::top_k(x.data(), vb.data(), ib.data(), 5, 7, 3));
    CHECK(ia == ib);
    for (std::size_t i = 0; i < va.size(); ++i) CHECK(same_value(va[i], vb[i]));
}

TEST_CASE_TEMPLATE("kernels::top_k: k outside [0, n] is a fault with k and the dim, nothing written", T, float, double) {
    const std::vector<T> x = tie_values<T>(2 * 7, 1);
    std::vector<T> vals(2 * 9, T(-5));
    std::vector<std::int64_t> idx(2 * 9, -5);
    for (std::int64_t kk : {8, 9, -1}) {
        CAPTURE(kk);
        const k::fault f = k::top_k(x.data(), vals.data(), idx.data(), 2, fixed<7>{}, kk);
        CHECK(bool(f));
        CHECK(f.code == k::fault_code::k_out_of_range);
        CHECK(f.a == kk);
        CHECK(f.b == 7);
        CHECK(std::all_of(vals.begin(), vals.end(), [](T v) { return v == T(-5); }));
        CHECK(std::all_of(idx.begin(), idx.end(), [](std::int64_t v) { return v == -5; }));
    }
    CHECK_FALSE(k::top_k(x.data(), vals.data(), idx.data(), 2, 7, 0));  // k = 0: nothing to write
    CHECK(idx[0] == -5);
}

TEST_CASE("kernels::accuracy against a plain loop") {
    for (std::int64_t rows : {0, 1, 7, 1023}) {
        for (std::int64_t kk : {1, 3}) {
            CAPTURE(rows);
            CAPTURE(kk);
            std::mt19937 rng(static_cast<unsigned>(rows * 10 + kk));
            std::uniform_int_distribution<std::int64_t> cls(0, 4);
            std::vector<std::int64_t> idx(static_cast<std::size_t>(rows * kk)), label(static_cast<std::size_t>(rows));
            for (auto& v : idx) v = cls(rng);
            for (auto& v : label) v = cls(rng);
            std::int64_t want = 0;
            for (std::int64_t r = 0; r < rows; ++r) {
                bool hit = false;
                for (std::int64_t j = 0; j < kk; ++j) hit = hit || idx[static_cast<std::size_t>(r * kk + j)] == label[static_cast<std::size_t>(r)];
                want += hit;
            }
            float acc = -1;
            std::int32_t correct = -1, total = -1;
            k::accuracy(idx.data(), label.data(), rows, kk, &acc, &correct, &total);
            CHECK(correct == want);
            CHECK(total == rows);
            CHECK(acc == (rows ? static_cast<float>(static_cast<double>(want) / static_cast<double>(rows)) : 0.0f));
        }
    }
    const std::int64_t idx[6] = {1, 2, 0, 3, 4, 4};
    const std::int32_t label[3] = {2, 1, 4};
    float acc = 0;
    std::int32_t correct = 0, total = 0;
    k::accuracy(idx, label, fixed<3>{}, fixed<2>{}, &acc, &correct, &total);
    CHECK(correct == 2);
    CHECK(total == 3);
    CHECK(acc == static_cast<float>(2.0 / 3.0));
}
