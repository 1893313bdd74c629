// layer_norm (Paddle's slots and attributes): Y, Mean and Variance against a
// double-precision reference, gradients of X, Scale and Bias by central
// finite differences in FP64, the builder's named parameters, and the
// errors by message.
#include <doctest/doctest.h>

#include <cmath>
#include <optional>
#include <set>

#include "grad_check.hpp"

using namespace dlgraph;
using grad_check::random;
using P = Program;
using V = std::vector<Var<double>>;

namespace {

struct ln_ref {
    std::vector<double> y, mean, var;
};

// rows of n: (x - mean) / sqrt(var + eps) * scale + bias, var biased.
ln_ref reference(const std::vector<double>& x, std::size_t rows, std::size_t n, const std::vector<double>* scale,
                 const std::vector<double>* bias, double eps) {
    ln_ref r;
    for (std::size_t i = 0; i < rows; ++i) {
        double m = 0, v = 0;
        for (std::size_t k = 0; k < n; ++k) m += x[i * n + k];
        m /= static_cast<double>(n);
        for (std::size_t k = 0; k < n; ++k) v += (x[i * n + k] - m) * (x[i * n + k] - m);
        v /= static_cast<double>(n);
        r.mean.push_back(m);
        r.var.push_back(v);
        for (std::size_t k = 0; k < n; ++k) {
            double h = (x[i * n + k] - m) / std::sqrt(v + eps);
            if (scale) h *= (*scale)[k];
            if (bias) h += (*bias)[k];
            r.y.push_back(h);
        }
    }
    return r;
}

template <class T> std::vector<double> values(const xt::xarray<T>& a) {
    return std::vector<double>(a.begin(), a.end());
}

template <class T> void close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol).scale(1.0));
}

}  // namespace

TEST_CASE_TEMPLATE("layer_norm: Y, Mean and Variance against a double reference", T, float, double) {
    const double tol = std::is_same_v<T, float> ? 2e-5 : 1e-12;
    struct shape_case {
        Shape x;
        int axis;
        bool scale, bias;
    };
    unsigned seed = 3;
    for (const shape_case& sc : {shape_case{{4, 7}, 1, true, true}, shape_case{{2, 3, 5}, 1, true, false},
                                 shape_case{{2, 3, 5}, 2, false, true}, shape_case{{3, 1030}, 1, false, false},
                                 shape_case{{1, 1}, 1, true, true}, shape_case{{300, 260}, 1, true, true}}) {
        INFO("X " << to_string(sc.x) << " axis " << sc.axis << " scale " << sc.scale << " bias " << sc.bias);
        std::size_t rows = 1, n = 1;
        for (int i = 0; i < sc.x.rank(); ++i) (i < sc.axis ? rows : n) *= static_cast<std::size_t>(sc.x[i]);
        Program p;
        auto x = p.input<T>("x", sc.x);
        std::optional<Var<T>> s, b;
        if (sc.scale) s = p.input<T>("s", {static_cast<std::int64_t>(n)});
        if (sc.bias) b = p.input<T>("b", {static_cast<std::int64_t>(n)});
        auto y = layer_norm(x, s, b, sc.axis, 1e-5);
        CHECK(y.shape() == sc.x);
        const OpDesc& op = p.desc().blocks[0].ops.back();
        REQUIRE(op.type == "layer_norm");
        const std::string mean = op.output("Mean")->arguments[0], var = op.output("Variance")->arguments[0];
        CHECK(p.desc().blocks[0].find_var(mean)->dims == std::vector<std::int64_t>{static_cast<std::int64_t>(rows)});

        // Rows shifted away from 0 so that the variance is not tiny against the mean.
        const xt::xarray<T> xv = xt::cast<T>(random(std::vector<std::size_t>(sc.x.begin(), sc.x.end()), seed++, -2.0, 3.0));
        const xt::xarray<T> sv = xt::cast<T>(random({n}, seed++, 0.5, 1.5)), bv = xt::cast<T>(random({n}, seed++, -1.0, 1.0));
        std::vector<Feed> feeds{{x.name(), xv}};
        if (s) feeds.emplace_back(s->name(), sv);
        if (b) feeds.emplace_back(b->name(), bv);
        Session<cpu> sess(p);
        auto got = sess.eval(std::vector<TargetRef>{y, TargetRef(mean), TargetRef(var)}, feeds);
        const std::vector<double> sd = values(sv), bd = values(bv);
        const ln_ref want = reference(values(xv), rows, n, sc.scale ? &sd : nullptr, sc.bias ? &bd : nullptr, 1e-5);
        close<T>(values(to_xarray<T>(got[0])), want.y, tol);
        close<T>(values(to_xarray<T>(got[1])), want.mean, tol);
        close<T>(values(to_xarray<T>(got[2])), want.var, tol);
    }
}

TEST_CASE("layer_norm: gradients of X, Scale and Bias match finite differences") {
    auto ln = [](const Var<double>& x, std::optional<Var<double>> s, std::optional<Var<double>> b, int axis) {
        return layer_norm(x, s, b, axis, 1e-5);
    };
    auto x = random({3, 6}, 11, -2, 2);
    grad_check::check({{"x", x}, {"s", random({6}, 12, 0.5, 1.5)}, {"b", random({6}, 13)}},
                      [&](P&, const V& v) { return ln(v[0], v[1], v[2], 1); });
    // No Scale, no Bias; rank 3 normalized from dim 1 and from dim 2.
    grad_check::check({{"x", x}}, [&](P&, const V& v) { return ln(v[0], std::nullopt, std::nullopt, 1); });
    auto x3 = random({2, 3, 4}, 14, -2, 2);
    grad_check::check({{"x", x3}, {"s", random({12}, 15, 0.5, 1.5)}},
                      [&](P&, const V& v) { return ln(v[0], v[1], std::nullopt, 1); });
    grad_check::check({{"x", x3}, {"s", random({4}, 16, 0.5, 1.5)}, {"b", random({4}, 17)}},
                      [&](P&, const V& v) { return ln(v[0], v[1], v[2], 2); });
    // In a chain, as a transformer block uses it: the output is read twice.
    grad_check::check({{"x", random({4, 5}, 18, -2, 2)}, {"s", random({5}, 19, 0.5, 1.5)}, {"b", random({5}, 20)}},
                      [&](P&, const V& v) {
                          auto h = ln(v[0], v[1], v[2], 1);
                          return tanh(h) * h + v[0];
                      });
}

TEST_CASE("layer_norm: named parameters, shared by name, and trained") {
    Program p;
    auto x = p.input<double>("x", {-1, 3, 4});
    auto y = layer_norm(x, "ln", LayerNorm{.begin_norm_axis = 1});
    auto y2 = layer_norm(x, "ln", LayerNorm{.begin_norm_axis = 1});  // the same parameters
    CHECK(p.desc().blocks[0].find_var("ln.scale")->dims == std::vector<std::int64_t>{12});
    CHECK(p.desc().blocks[0].find_var("ln.bias")->dims == std::vector<std::int64_t>{12});
    auto grads = append_backward(reduce_sum(y * y2));
    std::set<std::string> got;
    for (auto& [param, g] : grads) got.insert(param.name());
    CHECK(got == std::set<std::string>{"ln.bias", "ln.scale"});
    CHECK_THROWS_CONTAINING(layer_norm(x, "ln", LayerNorm{.begin_norm_axis = 2}), graph_error, "ln.scale", "[4]");
    CHECK_THROWS_CONTAINING(layer_norm(x, "bad", LayerNorm{.begin_norm_axis = 0}), shape_error,
                            "[dlgraph.shape.layer_norm]", "begin_norm_axis 0 must be in [1, rank)");
}

TEST_CASE("layer_norm: errors name the slot and the shapes") {
    Program p;
    auto x = p.input<float>("x", {2, 3, 4});
    auto s12 = p.input<float>("s12", {12});
    auto s5 = p.input<float>("s5", {5});
    check_throws<shape_error>([&] { (void)layer_norm(x, s5, std::nullopt, 1); },
                              {"[dlgraph.shape.layer_norm]", "Scale is [5] but X is [2,3,4] normalized from dim 1",
                               "it must be [12]"});
    check_throws<shape_error>([&] { (void)layer_norm(x, std::nullopt, s12, 2); },
                              {"Bias is [12] but X is [2,3,4] normalized from dim 2", "it must be [4]"});
    check_throws<shape_error>([&] { (void)layer_norm(x, s12, std::nullopt, 3); },
                              {"X is [2,3,4]: begin_norm_axis must be in [1, 3), not 3"});
    check_throws<shape_error>([&] { (void)layer_norm<float>(x, std::nullopt, std::nullopt, 1, 0.5); },
                              {"epsilon must be in [0, 0.001]"});
    CHECK(layer_norm(p.input<float>("u", {-1, 3, 4}), s12, std::nullopt, 1).shape() == Shape{-1, 3, 4});
}
