// arg_max and arg_min, cumsum and one_hot / one_hot_v2 (issue 16), against
// references written here from Paddle's definitions: positions of the first
// extreme (ties and NaN), running sums in double (exclusive, reverse,
// flatten, every axis), integer sums exact and wrapping, cumsum's gradient
// by central finite differences, one-hot rows of INT32 and INT64 ids in
// four output dtypes; and the errors by their text, an id out of range at
// run time leaving the session as it was. Paddle's own test classes for
// cumsum and arg_min / arg_max are ported at the end.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "grad_check.hpp"

using namespace dlgraph;
using grad_check::random;
using P = Program;
using V = std::vector<Var<double>>;

namespace {


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

TEST_CASE_TEMPLATE("one_hot / one_hot_v2: rows of INT64 and INT32 ids in four dtypes, out of range", T, float, double,
                   std::int32_t, std::int64_t) {
    for (bool v2 : {false, true})
        for (bool allow : {false, true}) {
            check_one_hot<T, std::int64_t>(v2, allow);
            check_one_hot<T, std::int32_t>(v2, allow);
        }
}

TEST_CASE("one_hot: the builder is paddle.nn.functional.one_hot, errors by their text") {
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

// ---- Paddle's own configurations -------------------------------------------------------------
//
// The OpTest classes of Paddle's python/paddle/fluid/tests/unittests
// test_cumsum_op.py and test_arg_min_max_op.py, each as its op with the
// class's attributes (only those it sets: the rest take the op's defaults),
// shape, dtype and input range (np.random.random, times 1000 for the arg
// tests), against the class's NumPy formula, written here as the references
// above.

namespace {
struct paddle_case {
    const char* paddle_class;
    const char* op;
    Shape shape;
    std::vector<Attribute> attrs;
    const char* deviation = nullptr;  // where dlgraph follows another definition on purpose
};
Attribute axis_long(std::int64_t a) { return Attribute::make_long("axis", a); }
Attribute axis_int(std::int64_t a) { return Attribute::make_int("axis", a); }
Attribute flag(const char* name) { return Attribute::make_bool(name, true); }
std::int64_t int_attr(const std::vector<Attribute>& attrs, const char* name, std::int64_t otherwise) {
    for (auto& a : attrs)
        if (a.name == name) return a.i;
    return otherwise;
}
bool bool_attr(const std::vector<Attribute>& attrs, const char* name) {
    for (auto& a : attrs)
        if (a.name == name) return a.b;
    return false;
}
}  // namespace

TEST_CASE_TEMPLATE("Paddle's test_cumsum_op.py classes", T, float, double) {
    const std::vector<paddle_case> cases = {
        {"TestSumOp1", "cumsum", {5, 6, 10}, {axis_int(2)}},
        {"TestSumOp2", "cumsum", {5, 6, 10}, {axis_int(-1), flag("reverse")}},
        {"TestSumOp3", "cumsum", {5, 6, 10}, {axis_int(1)}},
        {"TestSumOp4", "cumsum", {5, 6, 10}, {axis_int(0)}},
        {"TestSumOp5", "cumsum", {5, 20}, {}},
        {"TestSumOp7", "cumsum", {100}, {}},
        {"TestSumOpExclusive1", "cumsum", {4, 5, 65}, {axis_int(2), flag("exclusive")}},
        {"TestSumOpExclusive2", "cumsum", {1, 1, 888}, {axis_int(2), flag("exclusive")}},
        {"TestSumOpExclusive3", "cumsum", {4, 5, 888}, {axis_int(2), flag("exclusive")}},
        {"TestSumOpExclusive4", "cumsum", {1, 1, 3049}, {axis_int(2), flag("exclusive")}},
        {"TestSumOpExclusive5", "cumsum", {4, 5, 3096}, {axis_int(2), flag("exclusive")}},
        {"TestSumOpReverseExclusive", "cumsum", {4, 5, 6}, {axis_int(2), flag("reverse"), flag("exclusive")}},
    };
    unsigned seed = 61;
    for (const auto& pc : cases) {
        INFO(pc.paddle_class);
        const auto xv = random_of<T>(static_cast<std::size_t>(pc.shape.numel()), seed++, 0, 1);
        Program p;
        auto x = p.input<T>("x", pc.shape);
        auto y = apply_op<T>(pc.op, {{"X", x}}, pc.attrs);
        CHECK(y.shape() == pc.shape);
        Session<cpu> s(p);
        const auto got = values_of<T>(s.eval({y}, {{x.name(), tensor_of<T>(pc.shape, xv)}})[0]);
        const auto want = ref_cumsum(std::vector<double>(xv.begin(), xv.end()), split(pc.shape, int_attr(pc.attrs, "axis", -1)),
                                     bool_attr(pc.attrs, "exclusive"), bool_attr(pc.attrs, "reverse"));
        // Paddle's check_output: atol 1e-5 (its default), relative to the sums here.
        double worst = 0;
        for (std::size_t i = 0; i < want.size(); ++i)
            worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]) / std::max(1.0, std::abs(want[i])));
        CHECK(worst <= (std::is_same_v<T, float> ? 1e-6 : 1e-14) * static_cast<double>(pc.shape.numel()));
    }
    // TestSumOp1..7 check the gradient too (check_grad): cumsum's is checked
    // by finite differences above, on every axis, exclusive and reverse.
}

TEST_CASE("Paddle's test_arg_min_max_op.py classes") {
    const std::vector<paddle_case> cases = {
        {"TestCase0", "arg_max", {3, 4, 5}, {axis_long(0)}},
        {"TestCase1", "arg_min", {3, 4}, {axis_long(1)}},
        {"TestCase2", "arg_max", {3, 4}, {axis_long(0)}},
        {"TestCase2_1", "arg_max", {3, 4}, {axis_long(-1)}},
        {"TestCase3", "arg_max", {3}, {axis_long(0)}, "Out is [1], not NumPy's 0-D scalar"},
        {"TestCase4", "arg_min", {1}, {axis_long(0)}, "Out is [1], not NumPy's 0-D scalar"},
        {"TestCase3_", "arg_max", {3}, {axis_long(0)}, "Out is [1], not NumPy's 0-D scalar"},
    };
    // Each class's dtype: float32, float64, int64, int64, int64, int32, float32.
    const DataType dtypes[] = {DataType::FP32, DataType::FP64, DataType::INT64, DataType::INT64,
                               DataType::INT64, DataType::INT32, DataType::FP32};
    unsigned seed = 71;
    for (std::size_t c = 0; c < cases.size(); ++c) {
        const auto& pc = cases[c];
        INFO(pc.paddle_class << (pc.deviation ? std::string(" (deviation: ") + pc.deviation + ")" : std::string()));
        visit_dtype(dtypes[c], [&]<class T>(type_tag<T>) {
            if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int32_t> ||
                          std::is_same_v<T, std::int64_t>) {
                // (1000 * np.random.random(dims)).astype(dtype): integers truncate, so ties are possible.
                std::vector<T> xv;
                for (double v : random_of<double>(static_cast<std::size_t>(pc.shape.numel()), seed++, 0, 1000))
                    xv.push_back(static_cast<T>(v));
                Program p;
                auto x = p.input<T>("x", pc.shape);
                auto y = apply_op<std::int64_t>(pc.op, {{"X", x}}, pc.attrs);
                Shape want_shape;
                const std::int64_t axis = int_attr(pc.attrs, "axis", 0);
                const int a = static_cast<int>(axis < 0 ? axis + pc.shape.rank() : axis);
                for (int i = 0; i < pc.shape.rank(); ++i)
                    if (i != a) want_shape.push_back(pc.shape[i]);
                if (want_shape.rank() == 0) want_shape = {1};
                CHECK(y.shape() == want_shape);
                Session<cpu> s(p);
                const auto got = values_of<std::int64_t>(s.eval({y}, {{x.name(), tensor_of<T>(pc.shape, xv)}})[0]);
                CHECK(got == ref_arg(xv, split(pc.shape, axis), std::string_view(pc.op) == "arg_max"));
            }
        });
    }
    // Not ported: BaseTestComplex1_1 .. 2_2 overwrite their attrs dict
    // (only the last assignment survives) and call the nonexistent
    // ndarray.asdtype, so they test nothing as written; TestCase*FP16 run on
    // GPUs only (dlgraph has no FP16 kernels); the *TensorAxis classes take
    // the axis as a tensor, which dlgraph's attribute-only arg_max does not.
}

// test_one_hot_v2_op.py: X of 11 INT32 ids (its LoD [[4, 1, 3, 3]] has no
// meaning to dlgraph: the ids are a plain tensor), depth 10.
TEST_CASE("Paddle's test_one_hot_v2_op.py classes") {
    std::mt19937 g(5);
    auto ids = [&](std::vector<std::int32_t> choices) {
        std::vector<std::int32_t> v(11);
        for (auto& x : v) x = choices.empty() ? static_cast<std::int32_t>(g() % 9) : choices[g() % choices.size()];
        return v;  // np.random.randint(0, depth - 1): 0..8
    };
    auto run = [&](const char* paddle_class, const Shape& xs, std::vector<Attribute> attrs, const std::vector<std::int32_t>& xv,
                   const std::string& type = "one_hot_v2") {
        INFO(paddle_class);
        Program p;
        auto x = p.input<std::int32_t>("x", xs);
        auto out = apply_op<float>(type, {{"X", x}}, std::move(attrs));
        Session<cpu> s(p);
        return std::pair{out.shape(), values_of<float>(s.eval({out}, {{x.name(), tensor_of<std::int32_t>(xs, xv)}})[0])};
    };
    for (const char* cls : {"TestOneHotOp_attr", "TestOneHotOp_default_dtype_attr"}) {
        const auto xv = ids({});
        std::vector<Attribute> attrs{Attribute::make_int("depth", 10)};
        if (std::string_view(cls) == "TestOneHotOp_attr") attrs.push_back(Attribute::make_int("dtype", 5));  // FP32
        auto [shape, got] = run(cls, {11, 1}, attrs, xv);
        CHECK(shape == Shape{11, 1, 10});
        for (std::size_t i = 0; i < 11; ++i)
            for (std::size_t k = 0; k < 10; ++k) CHECK(got[i * 10 + k] == (static_cast<std::size_t>(xv[i]) == k ? 1.f : 0.f));
    }
    {
        auto [shape, got] = run("TestOneHotOp_out_of_range", {11},
                                {Attribute::make_int("depth", 10), Attribute::make_bool("allow_out_of_range", true)},
                                ids({-1, 10}));
        CHECK(shape == Shape{11, 10});
        CHECK(std::all_of(got.begin(), got.end(), [](float v) { return v == 0.f; }));
    }
    // TestOneHotOp_exception: one_hot (v1) with ids 11..19 and depth 10 fails when it runs.
    std::vector<std::int32_t> big(11);
    for (auto& x : big) x = 11 + static_cast<std::int32_t>(g() % 9);
    check_throws<value_error>([&] { run("TestOneHotOp_exception", {11, 1}, {Attribute::make_int("depth", 10)}, big, "one_hot"); },
                              {"dlgraph.value.id", "is out of range [0, 10)"});
    // BadInputTestOnehotV2: FP32 ids are refused.
    Program p;
    auto label = p.input<float>("label", {4});
    check_throws<type_error>([&] { one_hot(label, 4); }, {"X must be INT64 or INT32"});
    // Not ported: TestOneHotOp and TestOneHotOp_default_dtype give the depth as
    // the depth_tensor input, which dlgraph does not support (the attribute only).
}
