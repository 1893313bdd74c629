// The element-wise math and activations of issue 16 (softsign, sin, cos,
// reciprocal, rsqrt, floor, ceil, round, sign, gelu, leaky_relu, elu, relu6,
// hard_sigmoid, hard_swish, softplus, swish, clip, pow): each against a double
// formula written here from Paddle's definitions (activation_op.h), in FP64
// and FP32, with their attributes' defaults and other values; each gradient
// against central finite differences in FP64; attributes carried into the
// grad ops and through JSON.
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

using ref_fn = std::function<double(double)>;

struct act_case {
    const char* name;                  // for messages
    std::function<Var<double>(const Var<double>&)> build64;
    std::function<Var<float>(const Var<float>&)> build32;
    ref_fn ref;
};

#define ACT(label, call, ref_expr)                                                                \
    act_case {                                                                                    \
        label, [](const Var<double>& x) { return call; }, [](const Var<float>& x) { return call; }, \
            [](double v) { return ref_expr; }                                                     \
    }

double ref_sigmoid(double v) { return 1 / (1 + std::exp(-v)); }

std::vector<act_case> cases() {
    const double k = std::sqrt(2 / M_PI);
    return {
        ACT("softsign", softsign(x), v / (1 + std::fabs(v))),
        ACT("sin", sin(x), std::sin(v)),
        ACT("cos", cos(x), std::cos(v)),
        ACT("reciprocal", reciprocal(x), 1 / v),
        ACT("rsqrt", rsqrt(abs(x)), 1 / std::sqrt(std::fabs(v))),
        ACT("floor", floor(x), std::floor(v)),
        ACT("ceil", ceil(x), std::ceil(v)),
        ACT("round", round(x), std::round(v)),
        ACT("sign", sign(x), v > 0 ? 1.0 : v < 0 ? -1.0 : v),
        ACT("gelu", gelu(x), 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))),
        act_case{"gelu approximate", [](const Var<double>& x) { return gelu(x, true); },
                 [](const Var<float>& x) { return gelu(x, true); },
                 [k](double v) { return 0.5 * v * (1 + std::tanh(k * (v + 0.044715 * v * v * v))); }},
        ACT("leaky_relu", leaky_relu(x), v < 0 ? 0.02 * v : v),
        ACT("leaky_relu alpha 0.3", leaky_relu(x, 0.3), v < 0 ? 0.3 * v : v),
        ACT("elu", elu(x), v < 0 ? std::exp(v) - 1 : v),
        ACT("elu alpha 0.5", elu(x, 0.5), v < 0 ? 0.5 * (std::exp(v) - 1) : v),
        ACT("relu6", relu6(x), std::min(std::max(v, 0.0), 6.0)),
        ACT("relu6 threshold 1.5", relu6(x, 1.5), std::min(std::max(v, 0.0), 1.5)),
        ACT("hard_sigmoid", hard_sigmoid(x), std::min(std::max(0.2 * v + 0.5, 0.0), 1.0)),
        ACT("hard_sigmoid 0.5 0.25", hard_sigmoid(x, 0.5, 0.25), std::min(std::max(0.5 * v + 0.25, 0.0), 1.0)),
        ACT("hard_swish", hard_swish(x), v * std::min(std::max(v + 3, 0.0), 6.0) / 6),
        ACT("hard_swish 4 5 2", hard_swish(x, 4.0, 5.0, 2.0), v * std::min(std::max(v + 2, 0.0), 4.0) / 5),
        ACT("softplus", softplus(x), v > 20 ? v : std::log1p(std::exp(v))),
        ACT("softplus beta 2 threshold 3", softplus(x, 2.0, 3.0), 2 * v > 3 ? v : std::log1p(std::exp(2 * v)) / 2),
        ACT("swish", swish(x), v * ref_sigmoid(v)),
        ACT("swish beta 1.7", swish(x, 1.7), v * ref_sigmoid(1.7 * v)),
        ACT("clip -1.5 2.25", clip(x, -1.5, 2.25), std::min(std::max(v, -1.5), 2.25)),
        ACT("pow 3", pow(x, 3.0), v * v * v),
        ACT("pow 1.7 of |x|", pow(abs(x), 1.7), std::pow(std::fabs(v), 1.7)),
    };
}
#undef ACT

// Inputs: a spread over [-7, 7] (both sides of every attribute's breakpoint),
// exact halves and integers (round's ties, the steps), zeros of both signs,
// and values past softplus's threshold; 1023 of them, so SIMD bodies and
// tails both run.
std::vector<double> inputs() {
    std::vector<double> v;
    for (int i = 0; i < 1000; ++i) v.push_back(-7.0 + 14.0 * (i + 0.37) / 1000);
    for (double h : {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -3.0, 3.0, 6.0, 0.0, -0.0, 1e-8, -1e-8, 25.0, -25.0, 11.0, 1.0,
                     -1.0, 2.0, -2.0, 4.0, -4.0, 0.1})
        v.push_back(h);
    return v;
}

template <class T>
void check_forward(const act_case& c, const std::function<Var<T>(const Var<T>&)>& build, double rtol) {
    const std::vector<double> in = inputs();
    Program p;
    auto x = p.input<T>("x", {static_cast<std::int64_t>(in.size())});
    auto y = build(x);
    xt::xarray<T> xv = xt::xarray<T>::from_shape({in.size()});
    for (std::size_t i = 0; i < in.size(); ++i) xv(i) = static_cast<T>(in[i]);
    Session<cpu> s(p);
    const xt::xarray<T> got = s.eval(y, {{x, xv}});
    REQUIRE(got.size() == in.size());
    int bad = 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
        const double v = static_cast<double>(xv(i));  // the input as rounded to T
        const double want = c.ref(v), g = static_cast<double>(got(i));
        const bool ok = (std::isnan(want) && std::isnan(g)) || want == g ||
                        std::fabs(g - want) <= rtol * std::max(1.0, std::fabs(want));
        if (!ok && bad++ < 5) FAIL_CHECK(c.name << " at " << v << ": got " << g << ", want " << want);
    }
    CHECK(bad == 0);
}

}  // namespace

TEST_CASE("activations: FP64 and FP32 against double formulas") {
    for (const act_case& c : cases()) {
        INFO(c.name);
        check_forward<double>(c, c.build64, 1e-13);
        check_forward<float>(c, c.build32, 2e-6);
    }
}

TEST_CASE("activations: gradients match finite differences in FP64") {
    // Away from every breakpoint (0, the attributes' kinks, the steps'
    // jumps) by far more than the difference step, as finite differences
    // need: a grid at odd multiples of 0.0625 plus 0.01, over [-7, 7].
    xt::xarray<double> x = xt::xarray<double>::from_shape({112});
    for (std::size_t i = 0; i < x.size(); ++i) x(i) = -7.0 + 0.125 * static_cast<double>(i) + 0.0725;
    for (const act_case& c : cases()) {
        INFO(c.name);
        const std::string n = c.name;
        if (n == "reciprocal" || n == "rsqrt") continue;  // below, away from 0
        grad_check::check({{"x", x}}, [&](P&, const V& v) { return c.build64(v[0]); });
    }
    // 1 / x and 1 / sqrt(x) on [0.3, 3] and its negative (reciprocal).
    auto pos = random({40}, 5, 0.3, 3.0);
    grad_check::check({{"x", pos}}, [](P&, const V& v) { return rsqrt(v[0]); });
    grad_check::check({{"x", pos}}, [](P&, const V& v) { return reciprocal(v[0]); });
    grad_check::check({{"x", xt::xarray<double>(-pos)}}, [](P&, const V& v) { return reciprocal(v[0]); });
    // In a chain, as a network uses them (the grads' attributes carried along).
    grad_check::check({{"x", random({4, 6}, 6)}},
                      [](P&, const V& v) { return hard_swish(leaky_relu(v[0], 0.1) * 3.0, 4.0, 5.0, 2.0); });
}

TEST_CASE("activations: the grad op takes the forward op's attributes and reads what Paddle's reads") {
    struct want {
        const char* type;
        std::function<Var<double>(const Var<double>&)> build;
        bool reads_x;  // else only Out (Paddle's kDepOut)
    };
    const want wants[] = {
        {"leaky_relu", [](const Var<double>& x) { return leaky_relu(x, 0.3); }, true},
        {"elu", [](const Var<double>& x) { return elu(x, 0.5); }, true},
        {"relu6", [](const Var<double>& x) { return relu6(x, 1.5); }, false},
        {"hard_sigmoid", [](const Var<double>& x) { return hard_sigmoid(x, 0.5, 0.25); }, false},
        {"hard_swish", [](const Var<double>& x) { return hard_swish(x, 4.0, 5.0, 2.0); }, true},
        {"softplus", [](const Var<double>& x) { return softplus(x, 2.0, 3.0); }, true},
        {"swish", [](const Var<double>& x) { return swish(x, 1.7); }, true},
        {"clip", [](const Var<double>& x) { return clip(x, -1.0, 2.0); }, true},
        {"pow", [](const Var<double>& x) { return pow(x, 2.5); }, true},
        {"gelu", [](const Var<double>& x) { return gelu(x, true); }, true},
        {"reciprocal", [](const Var<double>& x) { return reciprocal(x); }, false},
        {"rsqrt", [](const Var<double>& x) { return rsqrt(x); }, false},
        {"sin", [](const Var<double>& x) { return sin(x); }, true},
        {"cos", [](const Var<double>& x) { return cos(x); }, true},
        {"softsign", [](const Var<double>& x) { return softsign(x); }, true},
        {"floor", [](const Var<double>& x) { return floor(x); }, false},
        {"sign", [](const Var<double>& x) { return sign(x); }, false},
    };
    for (const want& w : wants) {
        INFO(w.type);
        Program p;
        auto x = p.parameter<double>("x", {3}, init::constant(0.5));
        append_backward(reduce_sum(w.build(x)));
        const OpDesc* fwd = nullptr;
        const OpDesc* grad = nullptr;
        for (const OpDesc& op : p.desc().blocks[0].ops) {
            if (op.type == w.type) fwd = &op;
            if (op.type == std::string(w.type) + "_grad") grad = &op;
        }
        REQUIRE(fwd);
        REQUIRE(grad);
        CHECK(bool(grad->input("X")) == w.reads_x);
        CHECK(bool(grad->input("Out")));  // as in Paddle's grad ops
        CHECK(grad->attrs == fwd->attrs);
    }
}

TEST_CASE("activations: attributes survive JSON and a wrong attribute type is refused") {
    Program p;
    auto x = p.input<double>("x", {5});
    auto z = gelu(hard_swish(softplus(x, 2.0, 3.0), 4.0, 5.0, 2.0), true);
    const std::string text = save_program(p.desc());
    const ProgramDesc back = load_program(text);
    CHECK(back == p.desc());
    Session<cpu> a(p), b(back);
    const xt::xarray<double> xv = {-3.0, -0.5, 0.25, 1.75, 4.0};
    const xt::xarray<double> want = a.eval(z, {{x, xv}});
    CHECK(want == to_xarray<double>(b.eval(TargetRef(z.name()), {{x.name(), xv}})));

    json j = json::parse(text);
    bool changed = false;
    for (json& op : j["blocks"][0]["ops"])
        if (op["type"] == "softplus")
            for (json& at : op["attrs"])
                if (at["name"] == "beta") {
                    at = json{{"name", "beta"}, {"type", "INT"}, {"i", 2}};
                    changed = true;
                }
    REQUIRE(changed);
    check_throws<dlgraph::format_error>([&] { (void)load_program(j.dump()); },
                                        {"[dlgraph.format.attr]", "attrs.beta", "op 'softplus' expects FLOAT, found INT"});
}

TEST_CASE("clip and pow: Paddle's attributes, a reversed range refused, pow beside elementwise_pow") {
    Program p;
    auto x = p.input<float>("x", {4});
    check_throws<shape_error>([&] { (void)clip(x, 2.0, 1.0); }, {"[dlgraph.shape.clip]", "clip", "min 2", "must not exceed max 1"});
    auto c = clip(x, 0.5, 0.5);  // a point range is allowed: every value becomes it
    auto d = apply_op<float>("clip", {{"X", x}});  // paddle.clip's defaults: the FP32 range
    auto y = p.input<float>("y", {4});
    auto e = pow(x, y);  // two tensors: elementwise_pow
    auto f = pow(x, 2.0);
    CHECK(p.desc().blocks[0].ops.back().type == "pow");
    CHECK(p.desc().blocks[0].ops[p.desc().blocks[0].ops.size() - 2].type == "elementwise_pow");
    Session<cpu> s(p);
    const xt::xarray<float> xv = {-3.0f, 0.25f, 2.0f, std::numeric_limits<float>::max()};
    const xt::xarray<float> yv = {2.0f, 2.0f, 2.0f, 0.0f};
    auto got = s.eval(std::vector<TargetRef>{c, d, e, f}, {{"x", xv}, {"y", yv}});
    CHECK(to_xarray<float>(got[0]) == xt::xarray<float>{0.5f, 0.5f, 0.5f, 0.5f});
    CHECK(to_xarray<float>(got[1]) == xv);
    CHECK(to_xarray<float>(got[2])(0) == 9.0f);
    CHECK(to_xarray<float>(got[3])(1) == 0.0625f);
}
