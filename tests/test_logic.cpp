// Comparisons, logical ops and where (Paddle's slots and attributes): each
// against the C++ operator element by element with broadcasting, NaN and
// signed zeros; the logical ops' truth tables over BOOL and over numbers;
// where's values and its gradient by central finite differences in FP64, a
// masked softmax as attention uses it; and the errors by message.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "grad_check.hpp"

using namespace dlgraph;
using grad_check::random;
using P = Program;
using V = std::vector<Var<double>>;

namespace {

std::vector<bool> bools(const Tensor& t) {
    REQUIRE(t.dtype() == DataType::BOOL);
    const bool* p = t.data<bool>();
    return std::vector<bool>(p, p + t.numel());
}

using compare_builder = std::function<Var<bool>(const Var<double>&, const Var<double>&)>;

}  // namespace

TEST_CASE("comparisons: each against the C++ operator, broadcast, with NaN and signed zeros") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    // X [2, 4] against Y [4] (broadcast along rows).
    const std::vector<double> xv = {1, 2, nan, 0.0, -1, 2, 3, -0.0};
    const std::vector<double> yv = {1, 3, 1, -0.0};
    struct one {
        const char* name;
        compare_builder build;
        std::function<bool(double, double)> ref;
    };
    const std::vector<one> ops = {
        {"less_than", [](auto& a, auto& b) { return less_than(a, b); }, std::less<double>{}},
        {"less_equal", [](auto& a, auto& b) { return less_equal(a, b); }, std::less_equal<double>{}},
        {"greater_than", [](auto& a, auto& b) { return greater_than(a, b); }, std::greater<double>{}},
        {"greater_equal", [](auto& a, auto& b) { return greater_equal(a, b); }, std::greater_equal<double>{}},
        {"equal", [](auto& a, auto& b) { return equal(a, b); }, std::equal_to<double>{}},
        {"not_equal", [](auto& a, auto& b) { return not_equal(a, b); }, std::not_equal_to<double>{}},
    };
    for (const one& o : ops) {
        INFO(o.name);
        Program p;
        auto x = p.input<double>("x", {2, 4});
        auto y = p.input<double>("y", {4});
        auto out = o.build(x, y);
        CHECK(out.shape() == Shape{2, 4});
        CHECK(p.desc().blocks[0].ops.back().type == o.name);
        Session<cpu> s(p);
        auto got = bools(s.eval(std::vector<TargetRef>{out}, {{"x", tensor_of<double>({2, 4}, xv)},
                                                               {"y", tensor_of<double>({4}, yv)}})[0]);
        for (std::size_t i = 0; i < xv.size(); ++i) CHECK(got[i] == o.ref(xv[i], yv[i % 4]));
    }
}

TEST_CASE("comparisons: integers with ties, Paddle's axis, a scalar side") {
    Program p;
    auto x = p.input<std::int64_t>("x", {3, 2});
    auto y = p.input<std::int64_t>("y", {3});
    auto le = less_equal(x, y, 0);  // Y along X's dim 0
    auto eq = equal(x, p.input<std::int64_t>("one", {1}));
    Session<cpu> s(p);
    auto got = s.eval(std::vector<TargetRef>{le, eq}, {{"x", tensor_of<std::int64_t>({3, 2}, {1, 2, 3, 4, 5, 6})},
                                                       {"y", tensor_of<std::int64_t>({3}, {2, 3, 5})},
                                                       {"one", tensor_of<std::int64_t>({1}, {3})}});
    CHECK(bools(got[0]) == std::vector<bool>{true, true, true, false, true, false});
    CHECK(bools(got[1]) == std::vector<bool>{false, false, true, false, false, false});
}

TEST_CASE("logical ops: truth tables over BOOL and over numbers (nonzero, NaN included, is true)") {
    Program p;
    auto a = p.input<bool>("a", {4});
    auto b = p.input<bool>("b", {4});
    auto f = p.input<float>("f", {2, 3});
    auto g = p.input<float>("g", {3});
    auto outs = std::vector<TargetRef>{logical_and(a, b), logical_or(a, b), logical_xor(a, b), logical_not(a),
                                       logical_and(f, g), logical_or(f, g), logical_xor(f, g), logical_not(f)};
    const float nanf = std::numeric_limits<float>::quiet_NaN();
    Session<cpu> s(p);
    auto got = s.eval(outs, {{"a", tensor_of<bool>({4}, {false, false, true, true})},
                             {"b", tensor_of<bool>({4}, {false, true, false, true})},
                             {"f", tensor_of<float>({2, 3}, {0.0f, -0.0f, 2.5f, nanf, 0.0f, -1.0f})},
                             {"g", tensor_of<float>({3}, {1.0f, 0.0f, 0.5f})}});
    CHECK(bools(got[0]) == std::vector<bool>{false, false, false, true});
    CHECK(bools(got[1]) == std::vector<bool>{false, true, true, true});
    CHECK(bools(got[2]) == std::vector<bool>{false, true, true, false});
    CHECK(bools(got[3]) == std::vector<bool>{true, true, false, false});
    // f as truths: F F T / T F T; g: T F T.
    CHECK(bools(got[4]) == std::vector<bool>{false, false, true, true, false, true});
    CHECK(bools(got[5]) == std::vector<bool>{true, false, true, true, false, true});
    CHECK(bools(got[6]) == std::vector<bool>{true, false, false, false, false, false});
    CHECK(bools(got[7]) == std::vector<bool>{true, true, false, false, true, false});
}

TEST_CASE_TEMPLATE("where: Out is X where Condition holds, else Y", T, float, double, std::int32_t, std::int64_t) {
    Program p;
    auto c = p.input<bool>("c", {2, 3});
    auto x = p.input<T>("x", {2, 3});
    auto y = p.input<T>("y", {-1, 3});
    auto out = where(c, x, y);
    CHECK(out.shape() == Shape{2, 3});
    Session<cpu> s(p);
    auto got = s.eval(std::vector<TargetRef>{out}, {{"c", tensor_of<bool>({2, 3}, {true, false, false, true, true, false})},
                                                    {"x", tensor_of<T>({2, 3}, {1, 2, 3, 4, 5, 6})},
                                                    {"y", tensor_of<T>({2, 3}, {-1, -2, -3, -4, -5, -6})}});
    auto v = got[0].template values<T>();
    CHECK(std::vector<T>(v.begin(), v.end()) == std::vector<T>{1, -2, -3, 4, 5, -6});
}

TEST_CASE("where: gradients of X and Y match finite differences, a masked softmax") {
    const auto cond = tensor_of<bool>({3, 4}, {true, false, true, true, false, false, true, false, true, true, true, false});
    grad_check::check({{"x", random({3, 4}, 51)}, {"y", random({3, 4}, 52)}},
                      [](P& p, const V& v) { return where(p.input<bool>("c", {3, 4}), v[0], v[1]); }, {{"c", cond}});
    // Attention's mask: masked scores get a large negative value, so their
    // probability is 0 and the gradient flows only to the kept scores.
    grad_check::check({{"s", random({3, 4}, 53, -2, 2)}}, [](P& p, const V& v) {
        auto neg = p.constant<double>(-1e9, {3, 4});
        return softmax(where(p.input<bool>("c", {3, 4}), v[0], neg));
    }, {{"c", cond}});

    Program p;
    auto s = p.input<double>("s", {3, 4});
    auto c = p.input<bool>("c", {3, 4});
    auto probs = softmax(where(c, s, p.constant<double>(-1e9, {3, 4})));
    Session<cpu> sess(p);
    const auto res = sess.eval(std::vector<TargetRef>{probs}, {{"s", random({3, 4}, 54)}, {"c", cond}});
    const auto got = res[0].values<double>();
    const bool* cv = cond.data<bool>();
    for (std::size_t i = 0; i < 12; ++i)
        if (!cv[i]) CHECK(got[i] == 0.0);
        else CHECK(got[i] > 0.0);
}

TEST_CASE("comparisons, logical ops and where: errors name the op, the dtypes and the shapes") {
    Program p;
    auto x = p.input<float>("x", {2, 3});
    auto y = p.input<float>("y", {4});
    auto d = p.input<double>("d", {2, 3});
    check_throws<shape_error>([&] { (void)less_than(x, y); },
                              {"[dlgraph.shape.broadcast]", "less_than", "X is [2,3] but Y is [4]"});
    check_throws<type_error>([&] { (void)apply_op<bool>("equal", {{"X", x}, {"Y", d}}); }, {"equal", "FP32", "FP64"});
    check_throws<type_error>([&] { (void)logical_not(p.input<std::int16_t>("h", {2})); }, {"logical_not", "INT16"});
    auto c = p.input<bool>("c", {2, 3});
    check_throws<shape_error>([&] { (void)where(c, x, p.input<float>("y3", {3})); },
                              {"[dlgraph.shape.where]", "Condition is [2,3], X [2,3] and Y [3]", "one shape"});
    check_throws<type_error>([&] { (void)apply_op<float>("where", {{"Condition", x}, {"X", x}, {"Y", x}}); },
                             {"where", "Condition must be BOOL, not FP32"});
    check_throws<type_error>([&] { (void)apply_op<float>("where", {{"Condition", c}, {"X", x}, {"Y", d}}); },
                             {"where", "FP32", "FP64"});
}
