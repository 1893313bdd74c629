// arg_max and arg_min, cumsum and one_hot / one_hot_v2 (issue 16), against
// references written here from Paddle's definitions: positions of the first
// extreme (ties and NaN), running sums in double (exclusive, reverse,
// flatten, every axis), integer sums exact and wrapping, cumsum's gradient
// by central finite differences, one-hot rows of INT32 and INT64 ids in
// four output dtypes; and the errors by their text, an id out of range at
// run time leaving the session as it was.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <vector>

#include "grad_check.hpp"

using namespace dlgraph;
using grad_check::random;
using P = Program;
using V = std::vector<Var<double>>;

namespace {

template <class T> std::vector<T> values_of(const Tensor& t) {
    REQUIRE(t.dtype() == dtype_of<T>);
    const T* p = t.data<T>();
    return std::vector<T>(p, p + t.numel());
}

// [outer, d, inner] around `axis` of `s`, as the kernels see X.
struct split3 {
    std::int64_t outer = 1, d = 1, inner = 1;
};
split3 split(const Shape& s, std::int64_t axis) {
    const int a = static_cast<int>(axis < 0 ? axis + s.rank() : axis);
    split3 g;
    for (int i = 0; i < s.rank(); ++i) (i < a ? g.outer : i == a ? g.d : g.inner) *= s[i];
    return g;
}

// The first position of the max (min) of each column; NaN beats numbers.
template <class T> std::vector<std::int64_t> ref_arg(const std::vector<T>& x, split3 g, bool max) {
    std::vector<std::int64_t> out;
    for (std::int64_t o = 0; o < g.outer; ++o)
        for (std::int64_t j = 0; j < g.inner; ++j) {
            std::int64_t best = 0;
            auto at = [&](std::int64_t k) { return x[static_cast<std::size_t>((o * g.d + k) * g.inner + j)]; };
            for (std::int64_t k = 1; k < g.d; ++k) {
                const T a = at(k), b = at(best);
                if (b != b) break;  // a NaN is already the answer
                if (a != a || (max ? a > b : a < b)) best = k;
            }
            out.push_back(best);
        }
    return out;
}

// Running sums along the axis in double.
std::vector<double> ref_cumsum(const std::vector<double>& x, split3 g, bool exclusive, bool reverse) {
    std::vector<double> y(x.size());
    for (std::int64_t o = 0; o < g.outer; ++o)
        for (std::int64_t j = 0; j < g.inner; ++j) {
            double acc = 0;
            for (std::int64_t s = 0; s < g.d; ++s) {
                const std::int64_t k = reverse ? g.d - 1 - s : s;
                const auto at = static_cast<std::size_t>((o * g.d + k) * g.inner + j);
                if (exclusive) y[at] = acc;
                acc += x[at];
                if (!exclusive) y[at] = acc;
            }
        }
    return y;
}

template <class T> std::vector<T> random_of(std::size_t n, unsigned seed, double lo, double hi) {
    std::mt19937 g(seed);
    std::uniform_real_distribution<double> d(lo, hi);
    std::vector<T> v(n);
    for (auto& x : v) x = static_cast<T>(std::is_integral_v<T> ? std::floor(d(g)) : d(g));
    return v;
}

}  // namespace

// ---- arg_max, arg_min ----------------------------------------------------------------------

TEST_CASE_TEMPLATE("arg_max / arg_min: every axis, keepdims, flatten, INT64 and INT32 positions", T, float, double,
                   std::int32_t, std::int64_t) {
    unsigned seed = 11;
    for (const Shape& s : {Shape{7}, Shape{3, 5}, Shape{2, 3, 4}, Shape{4, 1, 33}})
        for (std::int64_t axis = -2; axis < s.rank(); ++axis)  // -2: flatten
            for (bool keep : {false, true})
                for (bool max : {false, true}) {
                    const bool flat = axis == -2;
                    INFO("shape " << to_string(s) << " axis " << axis << " keepdims " << keep << (max ? " max" : " min")
                                  << (flat ? " flatten" : ""));
                    // Few distinct values, so ties are common.
                    const auto xv = random_of<T>(static_cast<std::size_t>(s.numel()), seed++, -3, 3);
                    Program p;
                    auto x = p.input<T>("x", s);
                    const std::optional<std::int64_t> ax = flat ? std::nullopt : std::optional<std::int64_t>(axis);
                    auto out64 = max ? arg_max(x, ax, keep) : arg_min(x, ax, keep);
                    auto out32 = max ? arg_max<std::int32_t>(x, ax, keep) : arg_min<std::int32_t>(x, ax, keep);
                    Shape want_shape;
                    if (flat) {
                        want_shape = {1};
                    } else {
                        const int a = static_cast<int>(axis < 0 ? axis + s.rank() : axis);
                        for (int i = 0; i < s.rank(); ++i)
                            if (i != a) want_shape.push_back(s[i]);
                            else if (keep) want_shape.push_back(1);
                        if (want_shape.rank() == 0) want_shape = {1};
                    }
                    CHECK(out64.shape() == want_shape);
                    CHECK(out32.shape() == want_shape);
                    Session<cpu> sess(p);
                    auto got = sess.eval({out64, out32}, {{x.name(), tensor_of<T>(s, xv)}});
                    const auto want = ref_arg(xv, flat ? split3{1, s.numel(), 1} : split(s, axis), max);
                    CHECK(values_of<std::int64_t>(got[0]) == want);
                    const auto w32 = values_of<std::int32_t>(got[1]);
                    CHECK(std::vector<std::int64_t>(w32.begin(), w32.end()) == want);
                }
}

TEST_CASE_TEMPLATE("arg_max / arg_min: the first of ties, the first NaN, infinities", T, float, double) {
    const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
    Program p;
    auto x = p.input<T>("x", {5, 4});
    auto mx = arg_max(x, 1);
    auto mn = arg_min(x, 1);
    Session<cpu> s(p);
    const std::vector<T> xv = {T(2), T(5), T(5), T(1),  // ties: the first
                               T(1), nan, T(9), nan,    // a NaN wins both, the first of them
                               -inf, T(0), inf, T(0),   // infinities are numbers
                               T(-0.0), T(0.0), T(0.0), T(-0.0),
                               T(3), T(3), T(3), T(3)};
    auto got = s.eval({mx, mn}, {{x.name(), tensor_of<T>({5, 4}, xv)}});
    CHECK(values_of<std::int64_t>(got[0]) == std::vector<std::int64_t>{1, 1, 2, 0, 0});
    CHECK(values_of<std::int64_t>(got[1]) == std::vector<std::int64_t>{3, 1, 0, 0, 0});
}

TEST_CASE("arg_max / arg_min: errors name the attribute, the axis and the shape") {
    Program p;
    auto x = p.input<float>("x", {2, 3});
    check_throws<shape_error>([&] { arg_max(x, 2); }, {"dlgraph.shape.axis", "arg_max", "axis 2 is out of range", "[2,3]"});
    check_throws<shape_error>([&] { arg_min(x, -3); }, {"axis -3 is out of range"});
    auto e = p.input<float>("e", {2, 0});
    check_throws<shape_error>([&] { arg_max(e, 1); }, {"arg_max", "X is [2,0]", "nothing to search"});
    check_throws<shape_error>([&] { arg_max(e); }, {"nothing to search"});
    CHECK(arg_max(e, 0).shape() == Shape{0});  // a 0 beside the axis is fine: no outputs
    auto b = p.input<bool>("b", {3});
    check_throws<type_error>([&] { arg_max(b, 0); }, {"arg_max", "X must be FP32 or FP64 or INT32 or INT64"});
    check_throws<shape_error>(
        [&] {
            apply_op<std::int64_t>("arg_max", {{"X", x}}, {Attribute::make_long("axis", 0), Attribute::make_int("dtype", 5)});
        },
        {"dlgraph.shape.attr", "dtype 5 is not an index type"});
    CHECK_FALSE(find_op("arg_max")->differentiable());
}

// ---- cumsum --------------------------------------------------------------------------------

TEST_CASE_TEMPLATE("cumsum: every axis, exclusive, reverse, flatten against double sums", T, float, double) {
    unsigned seed = 31;
    const double tol = std::is_same_v<T, float> ? 1e-6 : 1e-14;
    for (const Shape& s : {Shape{9}, Shape{3, 17}, Shape{2, 3, 5}, Shape{1037, 2}})
        for (std::int64_t axis = -2; axis < s.rank(); ++axis)  // -2: flatten
            for (bool exclusive : {false, true})
                for (bool reverse : {false, true}) {
                    if (axis == -1 && s.rank() == 1) continue;  // the same as axis 0
                    const bool flat = axis == -2;
                    INFO("shape " << to_string(s) << " axis " << axis << (flat ? " (flatten)" : "") << " exclusive "
                                  << exclusive << " reverse " << reverse);
                    const auto xv = random_of<T>(static_cast<std::size_t>(s.numel()), seed++, -1, 1);
                    Program p;
                    auto x = p.input<T>("x", s);
                    auto y = cumsum(x, flat ? std::nullopt : std::optional<std::int64_t>(axis), exclusive, reverse);
                    CHECK(y.shape() == (flat ? Shape{s.numel()} : s));
                    Session<cpu> sess(p);
                    auto got = values_of<T>(sess.eval({y}, {{x.name(), tensor_of<T>(s, xv)}})[0]);
                    std::vector<double> xd(xv.begin(), xv.end()), xa;
                    for (double v : xd) xa.push_back(std::abs(v));
                    const split3 g = flat ? split3{1, s.numel(), 1} : split(s, axis);
                    const auto want = ref_cumsum(xd, g, exclusive, reverse);
                    // Error bound: rounding of each partial sum, scaled by the sum of |terms|.
                    const auto mag = ref_cumsum(xa, g, exclusive, reverse);
                    double worst = 0;
                    for (std::size_t i = 0; i < want.size(); ++i)
                        worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]) / (mag[i] + 1e-300));
                    CHECK(worst <= tol * static_cast<double>(g.d));
                    if (exclusive) {  // the first element of each sum is exactly 0
                        const std::int64_t k = reverse ? g.d - 1 : 0;
                        CHECK(got[static_cast<std::size_t>(k * g.inner)] == T(0));
                    }
                }
}

TEST_CASE_TEMPLATE("cumsum: integers are exact and wrap", T, std::int32_t, std::int64_t) {
    const Shape s{4, 6};
    const auto xv = random_of<T>(24, 5, -1000, 1000);
    for (std::int64_t axis : {0, 1})
        for (bool exclusive : {false, true})
            for (bool reverse : {false, true}) {
                Program p;
                auto x = p.input<T>("x", s);
                auto y = cumsum(x, axis, exclusive, reverse);
                Session<cpu> sess(p);
                auto got = values_of<T>(sess.eval({y}, {{x.name(), tensor_of<T>(s, xv)}})[0]);
                const auto want = ref_cumsum(std::vector<double>(xv.begin(), xv.end()), split(s, axis), exclusive, reverse);
                std::vector<T> wt;
                for (double v : want) wt.push_back(static_cast<T>(v));
                CHECK(got == wt);
            }
    // Past the type's range the sums wrap, modulo 2^bits, as NumPy's do.
    using U = std::make_unsigned_t<T>;
    const T big = std::numeric_limits<T>::max();
    Program p;
    auto x = p.input<T>("x", {3});
    auto y = cumsum(x);
    Session<cpu> sess(p);
    auto got = values_of<T>(sess.eval({y}, {{x.name(), tensor_of<T>({3}, {big, T(1), T(5)})}})[0]);
    CHECK(got == std::vector<T>{big, static_cast<T>(static_cast<U>(big) + U(1)), static_cast<T>(static_cast<U>(big) + U(6))});
}

TEST_CASE("cumsum: gradient matches finite differences") {
    const auto x = random({3, 4, 5}, 41);
    for (std::int64_t axis : {0, 1, -1})
        for (bool exclusive : {false, true})
            for (bool reverse : {false, true}) {
                INFO("axis " << axis << " exclusive " << exclusive << " reverse " << reverse);
                grad_check::check({{"x", x}}, [&](P&, const V& v) { return cumsum(v[0], axis, exclusive, reverse); });
            }
    grad_check::check({{"x", x}}, [&](P&, const V& v) { return cumsum(v[0], std::nullopt, true, false); });
    grad_check::check({{"x", x}}, [&](P&, const V& v) { return cumsum(v[0]); });
}

TEST_CASE("cumsum: errors name the axis and the shape") {
    Program p;
    auto x = p.input<float>("x", {2, 3});
    check_throws<shape_error>([&] { cumsum(x, 2); }, {"dlgraph.shape.axis", "cumsum", "axis 2 is out of range", "[2,3]"});
    auto b = p.input<bool>("b", {3});
    check_throws<type_error>([&] { cumsum(b, 0); }, {"cumsum", "X must be FP32 or FP64 or INT32 or INT64"});
}

// ---- one_hot, one_hot_v2 -------------------------------------------------------------------

template <class T, class I> void check_one_hot(bool v2, bool allow) {
    INFO((v2 ? "one_hot_v2" : "one_hot") << " allow_out_of_range " << allow);
    const std::int64_t depth = 5;
    const std::vector<I> ids = {0, 4, 2, 2, 7, -1, 1, 3};  // 7 and -1 are out of range
    const Shape is = v2 ? Shape{2, 4} : Shape{2, 4, 1};
    Program p;
    auto x = p.input<I>("x", is);
    auto out = apply_op<T>(v2 ? "one_hot_v2" : "one_hot", {{"X", x}},
                           {Attribute::make_int("depth", depth), Attribute::make_int("dtype", static_cast<int>(dtype_of<T>)),
                            Attribute::make_bool("allow_out_of_range", allow)});
    CHECK(out.shape() == Shape{2, 4, depth});
    Session<cpu> s(p);
    auto run = [&] { return s.eval({out}, {{x.name(), tensor_of<I>(is, ids)}}); };
    if (!allow) {
        check_throws<value_error>(run, {"dlgraph.value.id", v2 ? "one_hot_v2" : "one_hot", "id 7 (at 4) is out of range [0, 5)"});
        // The failed run left the session as it was: good ids run.
        auto good = s.eval({out}, {{x.name(), tensor_of<I>(is, {0, 4, 2, 2, 3, 1, 1, 3})}});
        CHECK(values_of<T>(good[0])[static_cast<std::size_t>(4 * depth + 3)] == T(1));
        return;
    }
    auto got = values_of<T>(run()[0]);
    REQUIRE(got.size() == ids.size() * static_cast<std::size_t>(depth));
    for (std::size_t i = 0; i < ids.size(); ++i)
        for (std::int64_t k = 0; k < depth; ++k)
            CHECK(got[i * static_cast<std::size_t>(depth) + static_cast<std::size_t>(k)] == T(ids[i] == k ? 1 : 0));
}

TEST_CASE_TEMPLATE("one_hot / one_hot_v2: rows of INT64 and INT32 ids in four dtypes; out of range", T, float, double,
                   std::int32_t, std::int64_t) {
    for (bool v2 : {false, true})
        for (bool allow : {false, true}) {
            check_one_hot<T, std::int64_t>(v2, allow);
            check_one_hot<T, std::int32_t>(v2, allow);
        }
}

TEST_CASE("one_hot: the builder is paddle.nn.functional.one_hot; errors by their text") {
    Program p;
    auto ids = p.input<std::int64_t>("ids", {-1, 3});
    auto oh = one_hot(ids, 4);
    CHECK(oh.shape() == Shape{-1, 3, 4});
    CHECK(p.desc().blocks[0].ops.back().type == "one_hot_v2");
    auto ohd = one_hot<double>(ids, 2, true);
    CHECK(ohd.shape() == Shape{-1, 3, 2});
    check_throws<shape_error>([&] { one_hot(ids, 0); }, {"dlgraph.shape.attr", "one_hot_v2", "depth is 0"});
    check_throws<shape_error>([&] { one_hot<bool>(ids, 3); }, {"dtype 0 is not supported"});
    auto f = p.input<float>("f", {3});
    check_throws<type_error>([&] { one_hot(f, 3); }, {"one_hot_v2", "X must be INT64 or INT32"});
    check_throws<shape_error>(
        [&] {
            apply_op<float>("one_hot", {{"X", ids}}, {Attribute::make_int("depth", 4)});
        },
        {"dlgraph.shape.one_hot", "X is [-1,3]", "[..., 1]"});
    CHECK_FALSE(find_op("one_hot_v2")->differentiable());
}
