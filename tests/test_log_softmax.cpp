// log_softmax (Paddle's slots and attribute): Out against a double-precision
// reference for rows and strided axes, where softmax underflows, against
// softmax_with_cross_entropy's loss, the gradient by central finite
// differences in FP64, and the errors by message.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "grad_check.hpp"

using namespace dlgraph;
using grad_check::random;
using P = Program;
using V = std::vector<Var<double>>;

namespace {

// log_softmax along `axis` of a row-major array of shape s, in double.
std::vector<double> reference(const std::vector<double>& x, const Shape& s, int axis) {
    std::int64_t outer = 1, inner = 1;
    for (int i = 0; i < axis; ++i) outer *= s[i];
    for (int i = axis + 1; i < s.rank(); ++i) inner *= s[i];
    const std::int64_t d = s[axis];
    std::vector<double> y(x.size());
    for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t j = 0; j < inner; ++j) {
            auto at = [&](std::int64_t k) { return static_cast<std::size_t>((o * d + k) * inner + j); };
            double m = -std::numeric_limits<double>::infinity();
            for (std::int64_t k = 0; k < d; ++k) m = std::max(m, x[at(k)]);
            double sum = 0;
            for (std::int64_t k = 0; k < d; ++k) sum += std::exp(x[at(k)] - m);
            for (std::int64_t k = 0; k < d; ++k) y[at(k)] = x[at(k)] - m - std::log(sum);
        }
    return y;
}

template <class T> std::vector<double> values(const xt::xarray<T>& a) { return std::vector<double>(a.begin(), a.end()); }

}  // namespace

TEST_CASE_TEMPLATE("log_softmax: Out against a double reference, rows and strided axes", T, float, double) {
    const double tol = std::is_same_v<T, float> ? 1e-6 : 1e-14;
    struct shape_case {
        Shape x;
        int axis;
        double lo, hi;
    };
    unsigned seed = 5;
    for (const shape_case& sc : {shape_case{{4, 7}, -1, -5, 5}, shape_case{{3, 1030}, 1, -5, 5},
                                 shape_case{{2, 5, 7}, 1, -5, 5}, shape_case{{5, 3, 20}, 0, -5, 5},
                                 shape_case{{3, 4, 33}, -2, -5, 5}, shape_case{{6, 1}, -1, -5, 5},
                                 // Logits 1000 apart: softmax is 0 in most places, log_softmax stays finite.
                                 shape_case{{4, 37}, -1, -1000, 1000}, shape_case{{2, 9, 17}, 1, -1000, 1000}}) {
        const int axis = sc.axis < 0 ? sc.axis + sc.x.rank() : sc.axis;
        INFO("X " << to_string(sc.x) << " axis " << sc.axis << " range " << sc.lo << ".." << sc.hi);
        Program p;
        auto x = p.input<T>("x", sc.x);
        auto y = log_softmax(x, sc.axis);
        CHECK(y.shape() == sc.x);
        const xt::xarray<T> xv =
            xt::cast<T>(random(std::vector<std::size_t>(sc.x.begin(), sc.x.end()), seed++, sc.lo, sc.hi));
        Session<cpu> s(p);
        const auto got = values(to_xarray<T>(s.eval(std::vector<TargetRef>{y}, {{x.name(), xv}})[0]));
        const auto want = reference(values(xv), sc.x, axis);
        REQUIRE(got.size() == want.size());
        for (std::size_t i = 0; i < got.size(); ++i) {
            REQUIRE(std::isfinite(got[i]));
            CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol).scale(1.0));
        }
    }
}

TEST_CASE("log_softmax: minus Out at the label is softmax_with_cross_entropy's loss") {
    Program p;
    auto x = p.input<double>("x", {5, 11});
    auto label = p.input<std::int64_t>("label", {5, 1});
    auto ls = log_softmax(x);
    auto [sm, loss] = softmax_with_cross_entropy(x, label);
    xt::xarray<std::int64_t> lv = xt::xarray<std::int64_t>::from_shape({5, 1});
    const std::int64_t labels[] = {3, 0, 10, 7, 3};
    std::copy(std::begin(labels), std::end(labels), lv.begin());
    Session<cpu> s(p);
    auto got = s.eval(std::vector<TargetRef>{ls, loss, sm}, {{x.name(), random({5, 11}, 31, -8, 8)}, {label.name(), lv}});
    const auto lsv = got[0].values<double>(), lossv = got[1].values<double>(), smv = got[2].values<double>();
    for (std::size_t r = 0; r < 5; ++r) {
        CHECK(-lsv[r * 11 + static_cast<std::size_t>(lv(r, 0))] == doctest::Approx(lossv[r]).epsilon(1e-14));
        for (std::size_t k = 0; k < 11; ++k) CHECK(std::exp(lsv[r * 11 + k]) == doctest::Approx(smv[r * 11 + k]).epsilon(1e-14));
    }
}

TEST_CASE("log_softmax: gradient matches finite differences") {
    grad_check::check({{"x", random({3, 6}, 41, -3, 3)}}, [](P&, const V& v) { return log_softmax(v[0]); });
    grad_check::check({{"x", random({2, 4, 5}, 42, -3, 3)}}, [](P&, const V& v) { return log_softmax(v[0], 1); });
    grad_check::check({{"x", random({4, 3, 2}, 43, -3, 3)}}, [](P&, const V& v) { return log_softmax(v[0], 0); });
    // Rows of 1 (Out is 0, the gradient 0) and a chain that reads Out twice.
    grad_check::check({{"x", random({4, 1}, 44)}}, [](P&, const V& v) { return log_softmax(v[0]) + v[0]; });
    grad_check::check({{"x", random({3, 5}, 45, -3, 3)}}, [](P&, const V& v) {
        auto h = log_softmax(v[0]);
        return exp(h) * h;  // -entropy terms
    });
}

TEST_CASE("log_softmax: errors name the axis, the shape and the dtype") {
    Program p;
    auto x = p.input<float>("x", {2, 3});
    check_throws<shape_error>([&] { (void)log_softmax(x, 2); },
                              {"[dlgraph.shape.axis]", "log_softmax", "axis 2 is out of range for X of shape [2,3] (rank 2)"});
    check_throws<shape_error>([&] { (void)log_softmax(x, -3); }, {"axis -3 is out of range"});
    auto xi = p.input<std::int32_t>("xi", {2, 3});
    check_throws<type_error>([&] { (void)log_softmax(xi); }, {"log_softmax", "X must be", "FP32", "not INT32"});
    CHECK(log_softmax(p.input<float>("u", {-1, 3})).shape() == Shape{-1, 3});
}
