// Gradient checks against central finite differences in FP64: the graph
// under test is built from parameters (so append_backward differentiates
// with respect to them), reduced to a scalar by a random weighting, and each
// analytic gradient element is compared with (L(x+e) - L(x-e)) / 2e.
#pragma once

#include <functional>

#include "test_helpers.hpp"

namespace grad_check {

struct input {
    std::string name;
    xt::xarray<double> value;
};

// Extra feeds the graph needs that are not differentiated (labels, ...).
struct extra_feed {
    std::string name;
    dlgraph::Tensor value;
};

using builder = std::function<dlgraph::Var<double>(dlgraph::Program&, const std::vector<dlgraph::Var<double>>&)>;

// Checks every element of every input's gradient. `rtol` is relative to
// max(1, |analytic|, |numeric|).
inline void check(const std::vector<input>& inputs, const builder& build, const std::vector<extra_feed>& extra = {},
                  double eps = 1e-6, double rtol = 1e-6, unsigned seed = 1) {
    using namespace dlgraph;
    Program p;
    std::vector<Var<double>> xs;
    for (auto& in : inputs)
        xs.push_back(p.parameter<double>(in.name, Shape(in.value.shape().begin(), in.value.shape().end()), init::constant(0)));
    Var<double> out = build(p, xs);
    const Shape out_shape = out.shape();
    REQUIRE_MESSAGE(out_shape.known(), "the output shape must be known: " << to_string(out_shape));
    auto weights = p.input<double>("grad_check_weights", out_shape);
    auto loss = reduce_sum(out * weights);
    auto grads = append_backward(loss);

    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(0.5, 1.5);
    xt::xarray<double> wv = xt::xarray<double>::from_shape(std::vector<std::size_t>(out_shape.begin(), out_shape.end()));
    for (auto& v : wv) v = u(rng) * (rng() % 2 ? 1 : -1);

    Session<cpu> s(p);
    std::vector<xt::xarray<double>> values;
    for (auto& in : inputs) values.push_back(in.value);
    auto feeds_for = [&](std::vector<Feed>& f) {
        f.clear();
        for (std::size_t k = 0; k < inputs.size(); ++k) f.emplace_back(std::string_view(inputs[k].name), values[k]);
        f.emplace_back(std::string_view(weights.name()), wv);
        for (auto& e : extra) f.emplace_back(std::string_view(e.name), e.value);
    };
    std::vector<Feed> feeds;
    auto loss_at = [&]() {
        feeds_for(feeds);
        return s.eval(std::vector<TargetRef>{loss}, feeds)[0].item<double>();
    };

    for (std::size_t k = 0; k < inputs.size(); ++k) {
        INFO("input " << inputs[k].name);
        const Var<double>* grad = nullptr;
        for (auto& [param, g] : grads)
            if (param.name() == inputs[k].name) grad = &g;
        REQUIRE_MESSAGE(grad, "no gradient for " << inputs[k].name);
        feeds_for(feeds);
        Tensor analytic = s.eval(std::vector<TargetRef>{*grad}, feeds)[0];
        REQUIRE(analytic.shape() == Shape(inputs[k].value.shape().begin(), inputs[k].value.shape().end()));
        auto a = analytic.values<double>();
        for (std::size_t j = 0; j < values[k].size(); ++j) {
            const double x0 = values[k].data()[j];
            values[k].data()[j] = x0 + eps;
            const double lp = loss_at();
            values[k].data()[j] = x0 - eps;
            const double lm = loss_at();
            values[k].data()[j] = x0;
            const double numeric = (lp - lm) / (2 * eps);
            const double scale = std::max({1.0, std::abs(a[j]), std::abs(numeric)});
            INFO("element " << j << ": analytic " << a[j] << ", numeric " << numeric);
            CHECK(std::abs(a[j] - numeric) <= rtol * scale);
        }
    }
}

// Uniform random values in [lo, hi] of the given shape.
inline xt::xarray<double> random(std::vector<std::size_t> shape, unsigned seed, double lo = -1, double hi = 1) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> u(lo, hi);
    xt::xarray<double> x = xt::xarray<double>::from_shape(shape);
    for (auto& v : x) v = u(rng);
    return x;
}

}  // namespace grad_check
