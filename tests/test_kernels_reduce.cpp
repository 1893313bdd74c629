// The reductions' kernel core (kernels/reduce.hpp) called directly on raw
// arrays, without a Session: every dim set of several shapes (odd sizes,
// unit dims, longer than a fold leaf), FP32 and FP64 (and integers where the
// ops take them), against plain double-precision loops.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <dlgraph/kernels/reduce.hpp>
#include <dlgraph/ops/reduce.hpp>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

namespace {

namespace k = dlgraph::kernels;
using dims_t = std::vector<std::int64_t>;

template <class T> T* opaque(T* p) {
    T* volatile q = p;
    return q;
}

std::int64_t numel(const dims_t& d) {
    std::int64_t n = 1;
    for (auto v : d) n *= v;
    return n;
}

template <class T> std::vector<T> data(std::int64_t n, std::uint64_t seed) {
    std::mt19937_64 g(seed);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    std::vector<T> v(static_cast<std::size_t>(n));
    for (auto& e : v) {
        if constexpr (std::is_integral_v<T>) e = static_cast<T>(std::llround(u(g) * 1000));
        else e = static_cast<T>(u(g));
    }
    return v;
}

// The reference: for each output element (kept dims, row-major) the sum, the
// sum of magnitudes (for the tolerance), the max and the count, in double.
struct reference {
    std::vector<double> sum, abs_sum, max;
    std::vector<std::int64_t> out_of;  // X's element -> its output element
    std::int64_t count = 1;
};
template <class T> reference reference_of(const std::vector<T>& x, const dims_t& dims, const bool* red) {
    const int r = static_cast<int>(dims.size());
    std::int64_t kept = 1;
    reference ref;
    for (int i = 0; i < r; ++i) (red[i] ? ref.count : kept) *= dims[static_cast<std::size_t>(i)];
    ref.sum.assign(static_cast<std::size_t>(kept), 0.0);
    ref.abs_sum.assign(static_cast<std::size_t>(kept), 0.0);
    ref.max.assign(static_cast<std::size_t>(kept), -INFINITY);
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(x.size()); ++i) {
        std::int64_t rest = i, o = 0, st = 1;
        for (int d = r - 1; d >= 0; --d) {
            const std::int64_t n = dims[static_cast<std::size_t>(d)], at = rest % n;
            rest /= n;
            if (!red[d]) {
                o += at * st;
                st *= n;
            }
        }
        const double v = static_cast<double>(x[static_cast<std::size_t>(i)]);
        ref.sum[static_cast<std::size_t>(o)] += v;
        ref.abs_sum[static_cast<std::size_t>(o)] += std::abs(v);
        ref.max[static_cast<std::size_t>(o)] = std::max(ref.max[static_cast<std::size_t>(o)], v);
        ref.out_of.push_back(o);
    }
    return ref;
}

// Pairwise sums of at most ~20K values of magnitude <= 1.
template <class T> double tol() { return std::is_same_v<T, float> ? 1e-5 : 1e-13; }

// Every dim set of `dims` (reduce_all among them), for T.
template <class T> void check_all_dim_sets(const dims_t& dims, std::uint64_t seed) {
    const int r = static_cast<int>(dims.size());
    const std::int64_t n = numel(dims);
    // One element more, so that X can also sit one element off its alignment.
    std::vector<T> buf = data<T>(n + 1, seed);
    const std::vector<T> x(buf.begin(), buf.begin() + n);
    std::copy(x.begin(), x.end(), buf.begin() + 1);
    for (int mask = 0; mask < (1 << r); ++mask) {
        bool red[k::max_rank];
        for (int i = 0; i < r; ++i) red[i] = (mask >> i) & 1;
        CAPTURE(mask);
        const reference ref = reference_of(x, dims, red);
        const std::size_t kept = ref.sum.size();
        CHECK(k::kept_count(dims.data(), r, red) == static_cast<std::int64_t>(kept));
        CHECK(k::reduced_count(dims.data(), r, red) == ref.count);

        std::vector<T> sum(kept), mean(kept), max(kept), sum_off(kept);
        k::reduce_sum(x.data(), dims.data(), r, red, sum.data());
        k::reduce_max(x.data(), dims.data(), r, red, max.data());
        k::reduce_sum(buf.data() + 1, dims.data(), r, red, sum_off.data());
        // Where X sits never changes a bit.
        CHECK(std::memcmp(sum.data(), sum_off.data(), kept * sizeof(T)) == 0);
        for (std::size_t o = 0; o < kept; ++o) {
            CAPTURE(o);
            if constexpr (std::is_integral_v<T>) CHECK(static_cast<double>(sum[o]) == ref.sum[o]);
            else CHECK(std::abs(static_cast<double>(sum[o]) - ref.sum[o]) <= tol<T>() * (ref.abs_sum[o] + 1));
            if (ref.count == 0) CHECK(max[o] == k::max_identity<T>());
            else CHECK(static_cast<double>(max[o]) == ref.max[o]);
        }
        if constexpr (std::is_floating_point_v<T>) {
            k::reduce_mean(x.data(), dims.data(), r, red, mean.data());
            for (std::size_t o = 0; o < kept; ++o) {
                const double want = ref.sum[o] / static_cast<double>(ref.count);
                if (ref.count == 0) CHECK(std::isnan(mean[o]));
                else CHECK(std::abs(static_cast<double>(mean[o]) - want) <= tol<T>() * (ref.abs_sum[o] / static_cast<double>(ref.count) + 1));
            }

            // Gradients: Out@GRAD back over the reduced dims.
            const std::vector<T> dout = data<T>(static_cast<std::int64_t>(kept), seed + 1);
            std::vector<T> dx(static_cast<std::size_t>(n), T(-7));
            k::reduce_sum_grad(dout.data(), dims.data(), r, red, dx.data());
            for (std::size_t i = 0; i < dx.size(); ++i)
                CHECK(dx[i] == dout[static_cast<std::size_t>(ref.out_of[i])]);
            k::reduce_mean_grad(dout.data(), dims.data(), r, red, dx.data());
            for (std::size_t i = 0; i < dx.size(); ++i) {
                const double want = static_cast<double>(dout[static_cast<std::size_t>(ref.out_of[i])]) / static_cast<double>(ref.count);
                CHECK(std::abs(static_cast<double>(dx[i]) - want) <= tol<T>() * 2);
            }
            k::reduce_extreme_grad(x.data(), max.data(), dout.data(), dims.data(), r, red, dx.data());
            for (std::size_t i = 0; i < dx.size(); ++i) {
                const auto o = static_cast<std::size_t>(ref.out_of[i]);
                CHECK(dx[i] == (static_cast<double>(x[i]) == ref.max[o] ? dout[o] : T(0)));
            }
        }
    }
}

const std::vector<dims_t> shapes = {{1}, {7}, {1023}, {9000}, {1, 1}, {7, 1}, {3, 7}, {1023, 3}, {2, 9000}, {3, 1, 5, 2},
                                    {2, 3, 5, 7}, {1, 7, 1, 1023}, {4, 2, 1, 3, 1, 2}};

}  // namespace

TEST_CASE_TEMPLATE("kernels::reduce_* over every dim set match double loops", T, float, double) {
    std::uint64_t seed = 1;
    for (const auto& dims : shapes) {
        const std::size_t rank = dims.size();
        const std::int64_t elements = numel(dims);
        CAPTURE(rank);
        CAPTURE(elements);
        check_all_dim_sets<T>(dims, seed++);
    }
}

TEST_CASE_TEMPLATE("kernels::reduce_sum and reduce_max on integers are exact", T, std::int32_t, std::int64_t) {
    std::uint64_t seed = 100;
    for (const auto& dims : shapes) check_all_dim_sets<T>(dims, seed++);
}

TEST_CASE_TEMPLATE("kernels::reduce_* with compile-time extents", T, float, double) {
    // A fixed model's call: rank and element count in the type.
    using rank3 = std::integral_constant<int, 3>;
    using n105 = std::integral_constant<std::int64_t, 105>;
    const std::int64_t dims[3] = {3, 7, 5};
    const bool red[3] = {true, false, true};
    const std::vector<T> x = data<T>(105, 7);
    T y[7], y_rt[7];
    k::reduce_sum(x.data(), dims, rank3{}, red, y);
    k::reduce_sum(x.data(), dims, 3, red, y_rt);
    CHECK(std::memcmp(y, y_rt, sizeof y) == 0);
    CHECK(k::kept_count(dims, rank3{}, red) == 7);
    CHECK(k::reduced_count(dims, rank3{}, red) == 15);
    const reference ref = reference_of(x, {3, 7, 5}, red);
    for (int o = 0; o < 7; ++o) CHECK(std::abs(static_cast<double>(y[o]) - ref.sum[static_cast<std::size_t>(o)]) <= tol<T>() * (ref.abs_sum[static_cast<std::size_t>(o)] + 1));

    const T m = k::mean_all(x.data(), n105{});
    double want = 0, mag = 0;
    for (T v : x) {
        want += static_cast<double>(v);
        mag += std::abs(static_cast<double>(v));
    }
    CHECK(std::abs(static_cast<double>(m) - want / 105) <= tol<T>() * (mag / 105 + 1));
    CHECK(m == k::mean_all(x.data(), std::int64_t(105)));

    T dx[105];
    const T d = T(3);
    k::mean_grad(&d, dx, n105{});
    for (T v : dx) CHECK(v == T(3) / T(105));
    T dy[7];
    for (int o = 0; o < 7; ++o) dy[o] = T(o);
    k::reduce_sum_grad(dy, dims, rank3{}, red, dx);
    for (int i = 0; i < 105; ++i) CHECK(dx[i] == T((i / 5) % 7));
}

TEST_CASE_TEMPLATE("kernels::mean_all: odd sizes, and NaN for nothing", T, float, double) {
    for (std::int64_t n : {1, 7, 1023, 4096, 4097, 9000, 70001}) {
        CAPTURE(n);
        const std::vector<T> x = data<T>(n, static_cast<std::uint64_t>(n));
        double want = 0, mag = 0;
        for (T v : x) {
            want += static_cast<double>(v);
            mag += std::abs(static_cast<double>(v));
        }
        const T m = k::mean_all(x.data(), n);
        CHECK(std::abs(static_cast<double>(m) - want / static_cast<double>(n)) <=
              tol<T>() * 4 * (mag / static_cast<double>(n) + 1));
        std::vector<T> dx(static_cast<std::size_t>(n));
        const T d = T(2);
        k::mean_grad(&d, dx.data(), n);
        for (T v : dx) CHECK(v == T(2) / static_cast<T>(n));
    }
    const T none[1] = {T(0)};
    CHECK(std::isnan(k::mean_all(none, 0)));
    k::mean_grad(none, static_cast<T*>(nullptr), 0);  // writes nothing
}

TEST_CASE("kernels::reduce_into: an empty X gives the identity, any functor") {
    // Buffers hidden from the optimiser: with small buffers of known size
    // GCC 12 warns (wrongly) that the vector paths, which these sizes never
    // reach, read past them.
    const dims_t dims = {2, 0, 3};
    const bool red[3] = {false, true, false};
    std::vector<float> y(6);
    k::reduce_max(static_cast<const float*>(nullptr), dims.data(), 3, red, opaque(y.data()));
    for (float v : y) CHECK(v == -INFINITY);
    std::vector<std::int32_t> yi(6);
    k::reduce_max(static_cast<const std::int32_t*>(nullptr), dims.data(), 3, red, opaque(yi.data()));
    for (auto v : yi) CHECK(v == std::numeric_limits<std::int32_t>::lowest());
    std::vector<double> ym(6);
    k::reduce_mean(static_cast<const double*>(nullptr), dims.data(), 3, red, opaque(ym.data()));
    for (double v : ym) CHECK(std::isnan(v));

    // A product, through the general entry point.
    const dims_t d2 = {3, 4};
    const bool r2[2] = {true, false};
    const std::vector<double> x = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    std::vector<double> p(4);
    k::reduce_into(opaque(x.data()), d2.data(), 2, r2, opaque(p.data()), 1.0, k::mul_fn{});
    CHECK(p[0] == 1.0 * 5 * 9);
    CHECK(p[3] == 4.0 * 8 * 12);
}

TEST_CASE("kernels::reduce_geometry_of merges dims of one kind") {
    const std::int64_t dims[6] = {4, 2, 1, 3, 5, 6};
    const bool red[6] = {false, false, true, true, true, false};
    const k::reduce_geometry g = k::reduce_geometry_of(dims, 6, red);
    REQUIRE(g.n == 3);  // [8 kept, 15 reduced, 6 kept]
    CHECK(g.md[0] == 8);
    CHECK(g.md[1] == 15);
    CHECK(g.md[2] == 6);
    CHECK_FALSE(g.contiguous);
    CHECK(g.outer == 1);
    CHECK(g.rows == 15);
    CHECK(g.len == 6);
    CHECK(g.ost[0] == 6);

    const bool red2[6] = {true, false, false, false, true, true};
    const k::reduce_geometry h = k::reduce_geometry_of(dims, 6, red2);
    REQUIRE(h.n == 3);  // [4 reduced, 6 kept, 30 reduced]
    CHECK(h.contiguous);
    CHECK(h.outer == 2);
    CHECK(h.len == 30);
    CHECK(h.ost[0] == 0);
    CHECK(h.ost[1] == 1);
}

TEST_CASE("ops::reduced_dims: dim, negative dims, reduce_all, keep_dim") {
    using dlgraph::Attribute;
    auto attrs = [](std::vector<std::int64_t> dim, bool keep, bool all) {
        return std::vector<Attribute>{Attribute::make_ints("dim", std::move(dim)), Attribute::make_bool("keep_dim", keep),
                                      Attribute::make_bool("reduce_all", all)};
    };
    bool red[4];
    std::int64_t bad = 0;
    bool dup = false;
    for (bool keep : {false, true}) {
        auto a = attrs({-1, 1}, keep, false);
        REQUIRE(dlgraph::ops::reduced_dims(a.data(), 4, red, bad, dup));
        CHECK_FALSE(red[0]);
        CHECK(red[1]);
        CHECK_FALSE(red[2]);
        CHECK(red[3]);
        a = attrs({0}, keep, true);  // reduce_all overrides dim
        REQUIRE(dlgraph::ops::reduced_dims(a.data(), 4, red, bad, dup));
        for (bool b : red) CHECK(b);
    }
    auto a = attrs({1, -3}, false, false);
    CHECK_FALSE(dlgraph::ops::reduced_dims(a.data(), 4, red, bad, dup));
    CHECK(bad == -3);
    CHECK(dup);
    a = attrs({4}, false, false);
    CHECK_FALSE(dlgraph::ops::reduced_dims(a.data(), 4, red, bad, dup));
    CHECK(bad == 4);
    CHECK_FALSE(dup);
}
