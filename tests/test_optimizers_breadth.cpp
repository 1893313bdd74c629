// Adagrad, RMSProp (plain, with momentum, centered), LAMB and L2 weight
// decay (issue 16) against reference updates written here in double from
// Paddle's formulas, five steps on a quadratic loss; Paddle's test_adagrad_op,
// test_rmsprop_op and test_lamb_op configurations as one-step checks of the
// ops themselves; and the errors.
#include <dlgraph/optimizer.hpp>

#include <cmath>

#include "grad_check.hpp"

using namespace dlgraph;

namespace {
// A quadratic loss sum((w - t)^2) with d/dw = 2 (w - t).
struct quadratic {
    Program p;
    Var<double> w, t, loss;
    explicit quadratic(std::size_t n) {
        w = p.parameter<double>("w", {static_cast<std::int64_t>(n)}, init::constant(0));
        t = p.input<double>("t", {static_cast<std::int64_t>(n)});
        loss = reduce_sum(square(w - t));
    }
};
const std::vector<double> w0{0.5, -1.0, 2.0, 0.0};
const xt::xarray<double> target = {1.0, 1.0, -1.0, 0.25};
std::vector<double> grad_at(const std::vector<double>& w) {
    std::vector<double> g(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) g[i] = 2 * (w[i] - target(i));
    return g;
}
// Five steps of make_step's optimizer against reference(w, g, t).
template <class Make, class Ref> void five_steps(Make make_step, Ref reference) {
    quadratic q(w0.size());
    TrainStep step = make_step(q.loss);
    Session<cpu> s(q.p);
    s.eval(q.w);  // initialize, then set the starting point
    s.scope().find("w")->get_mutable<Tensor>().copy_from(to_tensor(xt::xarray<double>(xt::adapt(w0, {w0.size()}))));
    std::vector<double> w = w0;
    for (int it = 0; it < 5; ++it) {
        s.eval(step.targets(), {{q.t, target}});
        reference(w, grad_at(w), it + 1);
        auto got = s.eval(q.w);
        for (std::size_t i = 0; i < w.size(); ++i) CHECK(got(i) == doctest::Approx(w[i]).epsilon(1e-12));
    }
}
}  // namespace

TEST_CASE("adagrad, rmsprop and lamb match reference updates, l2_decay rewrites the gradient") {
    SUBCASE("adagrad") {
        std::vector<double> m(w0.size(), 0.1);
        five_steps([](auto& loss) { return Adagrad(0.2, 1e-6, 0.1).minimize(loss); },
                   [&](auto& w, auto g, int) {
                       for (std::size_t i = 0; i < w.size(); ++i) {
                           m[i] += g[i] * g[i];
                           w[i] -= 0.2 * g[i] / (std::sqrt(m[i]) + 1e-6);
                       }
                   });
    }
    SUBCASE("rmsprop") {
        for (bool centered : {false, true})
            for (double momentum : {0.0, 0.9}) {
                CAPTURE(centered);
                CAPTURE(momentum);
                std::vector<double> ms(w0.size(), 0.0), mg(w0.size(), 0.0), mom(w0.size(), 0.0);
                five_steps([&](auto& loss) { return RMSProp(0.01, 0.95, 1e-6, momentum, centered).minimize(loss); },
                           [&](auto& w, auto g, int) {
                               for (std::size_t i = 0; i < w.size(); ++i) {
                                   ms[i] = 0.95 * ms[i] + 0.05 * g[i] * g[i];
                                   mg[i] = 0.95 * mg[i] + 0.05 * g[i];
                                   const double den = std::sqrt(centered ? ms[i] - mg[i] * mg[i] + 1e-6 : ms[i] + 1e-6);
                                   mom[i] = momentum * mom[i] + 0.01 * g[i] / den;
                                   w[i] -= mom[i];
                               }
                           });
            }
    }
    SUBCASE("lamb") {
        std::vector<double> m(w0.size(), 0.0), u(w0.size(), 0.0);
        five_steps([](auto& loss) { return Lamb(0.05, 0.01, 0.9, 0.999, 1e-6).minimize(loss); },
                   [&](auto& w, auto g, int t) {
                       std::vector<double> r(w.size());
                       double pn = 0, rn = 0;
                       for (std::size_t i = 0; i < w.size(); ++i) {
                           m[i] = 0.9 * m[i] + 0.1 * g[i];
                           u[i] = 0.999 * u[i] + 0.001 * g[i] * g[i];
                           r[i] = (m[i] / (1 - std::pow(0.9, t))) / (std::sqrt(u[i] / (1 - std::pow(0.999, t))) + 1e-6) + 0.01 * w[i];
                           pn += w[i] * w[i];
                           rn += r[i] * r[i];
                       }
                       const double trust = pn > 0 && rn > 0 ? std::sqrt(pn) / std::sqrt(rn) : 1.0;
                       for (std::size_t i = 0; i < w.size(); ++i) w[i] -= 0.05 * trust * r[i];
                   });
    }
    SUBCASE("l2_decay: grad + coeff * param, after clipping") {
        five_steps([](auto& loss) { return SGD(0.1).l2_decay(0.5).minimize(loss); },
                   [](auto& w, auto g, int) {
                       for (std::size_t i = 0; i < w.size(); ++i) w[i] -= 0.1 * (g[i] + 0.5 * w[i]);
                   });
        five_steps([](auto& loss) { return SGD(0.1).clip_by_global_norm(1.0).l2_decay(0.5).minimize(loss); },
                   [](auto& w, auto g, int) {
                       double norm = 0;
                       for (double v : g) norm += v * v;
                       norm = std::sqrt(norm);
                       for (std::size_t i = 0; i < w.size(); ++i) w[i] -= 0.1 * (g[i] / std::max(1.0, norm) + 0.5 * w[i]);
                   });
    }
    quadratic q(3);
    CHECK_THROWS_CONTAINING(SGD(0.1).l2_decay(-1).minimize(q.loss), graph_error, "sgd: the L2 decay is -1");
}

TEST_CASE("a model learns with adagrad, rmsprop and lamb") {
    for (int which = 0; which < 3; ++which) {
        CAPTURE(which);
        Program p;
        auto x = p.input<float>("x", {-1, 4});
        auto y = p.input<float>("y", {-1, 1});
        auto w = p.parameter<float>("w", {4, 1}, init::uniform(-0.5, 0.5, 3));
        auto b = p.parameter<float>("b", {1}, init::constant(0));
        auto loss = mean(square(matmul(x, w) + b - y));
        TrainStep step = which == 0 ? Adagrad(0.3).minimize(loss) : which == 1 ? RMSProp(0.02).minimize(loss) : Lamb(0.05).minimize(loss);
        Session<cpu> s(p);
        xt::xarray<float> xv = xt::xarray<float>::from_shape({32, 4});
        xt::xarray<float> yv = xt::xarray<float>::from_shape({32, 1});
        std::mt19937 g(7);
        std::uniform_real_distribution<float> u(-1, 1);
        for (std::size_t i = 0; i < 32; ++i) {
            float t = 0.3f;
            for (std::size_t j = 0; j < 4; ++j) {
                xv(i, j) = u(g);
                t += xv(i, j) * static_cast<float>(j + 1) * 0.5f;
            }
            yv(i, 0) = t;
        }
        const float first = s.eval(loss, {{x, xv}, {y, yv}})(0);
        for (int it = 0; it < 300; ++it) s.eval(step.targets(), {{x, xv}, {y, yv}});
        const float last = s.eval(loss, {{x, xv}, {y, yv}})(0);
        CHECK(last < 0.05f * first);
    }
}

namespace {
// Runs one op on FP32 tensors: inputs by slot, one variable per output slot.
std::vector<std::vector<float>> run_op(const std::string& type, const std::vector<std::pair<std::string, Tensor>>& ins,
                                       const std::vector<std::string>& outs, std::vector<Attribute> attrs) {
    Program p;
    std::vector<OpSlot> slots;
    std::vector<Var<float>> vars;  // a Feed holds its variable's name by view
    std::vector<Feed> feeds;
    for (auto& [slot, t] : ins) {
        vars.push_back(p.input<float>("in_" + slot, t.shape()));
        slots.push_back({slot, {vars.back().name()}});
    }
    for (std::size_t k = 0; k < ins.size(); ++k) feeds.emplace_back(vars[k], ins[k].second);
    std::vector<std::pair<std::string, int>> out_slots;
    for (auto& o : outs) out_slots.push_back({o, 1});
    std::vector<std::vector<std::string>> names;
    p.append(type, slots, out_slots, std::move(attrs), &names);
    std::vector<TargetRef> targets;
    for (auto& n : names) targets.push_back(n[0]);
    Session<cpu> s(p);
    std::vector<std::vector<float>> got;
    for (auto& t : s.eval(targets, feeds)) got.push_back(values_of<float>(t));
    return got;
}
std::vector<float> uniform_f(std::size_t n, std::mt19937& g, float lo, float hi) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(n);
    for (auto& e : v) e = u(g);
    return v;
}
// Paddle's check_output: atol 1e-5 (rtol 1e-5 for rmsprop's assert_allclose).
void check_close(const std::vector<float>& got, const std::vector<double>& want, double atol, double rtol = 0) {
    REQUIRE(got.size() == want.size());
    std::size_t bad = 0, first = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
        if (!(std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i])) && bad++ == 0) first = i;
    CHECK_MESSAGE(bad == 0, bad << " elements differ, the first at " << first << ": " << got[first] << " vs " << want[first]);
}
}  // namespace

TEST_CASE("Paddle's test_adagrad_op.py, test_rmsprop_op.py and test_lamb_op.py classes, as one op each") {
    std::mt19937 g(11);
    // TestAdagradOp1 (epsilon 1e-8) and TestAdagradOp2 (1e-6): (123, 321)
    // float32 param and grad in [0, 1), moment 0, lr 0.01.
    for (double eps : {1e-8, 1e-6}) {
        INFO((eps == 1e-8 ? "TestAdagradOp1" : "TestAdagradOp2"));
        const Shape s{123, 321};
        const std::size_t n = 123 * 321;
        const auto p0 = uniform_f(n, g, 0, 1), g0 = uniform_f(n, g, 0, 1);
        const std::vector<float> m0(n, 0.0f);
        const auto out = run_op("adagrad", {{"Param", tensor_of<float>(s, p0)}, {"Grad", tensor_of<float>(s, g0)},
                                            {"Moment", tensor_of<float>(s, m0)}, {"LearningRate", tensor_of<float>({1}, {0.01f})}},
                                {"ParamOut", "MomentOut"}, {Attribute::make_float("epsilon", eps)});
        std::vector<double> po, mo;
        for (std::size_t i = 0; i < n; ++i) {
            mo.push_back(static_cast<double>(g0[i]) * g0[i]);
            po.push_back(p0[i] - 0.01 * g0[i] / (std::sqrt(mo.back()) + eps));
        }
        check_close(out[0], po, 1e-5);
        check_close(out[1], mo, 1e-5);
    }
    // TestRmspropOp, dense: (128, 320) float32; param, grad, mean_grad in
    // [0, 1), mean_square in [1, 2), moment in [0, 1); lr 0.01, epsilon
    // 1e-6, decay 0.9, momentum 0.1; centered both ways.
    for (bool centered : {false, true}) {
        INFO("TestRmspropOp, centered " << centered);
        const Shape s{128, 320};
        const std::size_t n = 128 * 320;
        const auto p0 = uniform_f(n, g, 0, 1), ms0 = uniform_f(n, g, 1, 2), mg0 = uniform_f(n, g, 0, 1);
        const auto g0 = uniform_f(n, g, 0, 1), mom0 = uniform_f(n, g, 0, 1);
        std::vector<std::pair<std::string, Tensor>> ins{{"Param", tensor_of<float>(s, p0)}, {"MeanSquare", tensor_of<float>(s, ms0)},
                                                        {"Grad", tensor_of<float>(s, g0)}, {"Moment", tensor_of<float>(s, mom0)},
                                                        {"LearningRate", tensor_of<float>({1}, {0.01f})}};
        std::vector<std::string> outs{"ParamOut", "MomentOut", "MeanSquareOut"};
        if (centered) {
            ins.push_back({"MeanGrad", tensor_of<float>(s, mg0)});
            outs.push_back("MeanGradOut");
        }
        const auto out = run_op("rmsprop", ins, outs,
                                {Attribute::make_float("epsilon", 1e-6), Attribute::make_float("decay", 0.9),
                                 Attribute::make_float("momentum", 0.1), Attribute::make_bool("centered", centered)});
        std::vector<double> po, mo, mso, mgo;
        for (std::size_t i = 0; i < n; ++i) {
            const double ms = 0.9 * ms0[i] + 0.1 * static_cast<double>(g0[i]) * g0[i];
            const double mg = 0.9 * mg0[i] + 0.1 * static_cast<double>(g0[i]);
            const double mom = 0.1 * mom0[i] + 0.01 * g0[i] / std::sqrt(centered ? ms - mg * mg + 1e-6 : ms + 1e-6);
            mso.push_back(ms);
            mgo.push_back(mg);
            mo.push_back(mom);
            po.push_back(p0[i] - mom);
        }
        check_close(out[0], po, 1e-6, 1e-5);
        check_close(out[1], mo, 1e-6, 1e-5);
        check_close(out[2], mso, 1e-6, 1e-5);
        if (centered) check_close(out[3], mgo, 1e-5, 1e-5);
    }
    // TestLambOp1 (epsilon 1e-4, beta1 0.78, beta2 0.836), TestLambOp2 and
    // TestLambOpMultipleSteps (1e-8, 0.9, 0.999; ten steps, a new gradient
    // each): (102, 105) float32, param, grad, moment1 in [-1, 1), moment2 in
    // [0, 1); lr 0.001, weight_decay 0.01; beta powers start at the betas.
    struct lamb_class {
        const char* name;
        double eps, b1, b2;
        int steps;
    };
    for (const lamb_class& c : {lamb_class{"TestLambOp1", 1e-4, 0.78, 0.836, 1}, lamb_class{"TestLambOp2", 1e-8, 0.9, 0.999, 1},
                                lamb_class{"TestLambOpMultipleSteps", 1e-8, 0.9, 0.999, 10}}) {
        INFO(c.name);
        const Shape s{102, 105};
        const std::size_t n = 102 * 105;
        auto p0 = uniform_f(n, g, -1, 1), m10 = uniform_f(n, g, -1, 1), m20 = uniform_f(n, g, 0, 1);
        float b1p = static_cast<float>(c.b1), b2p = static_cast<float>(c.b2);
        for (int step = 0; step < c.steps; ++step) {
            const auto g0 = uniform_f(n, g, -1, 1);
            const auto out = run_op("lamb",
                                    {{"Param", tensor_of<float>(s, p0)}, {"Grad", tensor_of<float>(s, g0)},
                                     {"LearningRate", tensor_of<float>({1}, {0.001f})}, {"Moment1", tensor_of<float>(s, m10)},
                                     {"Moment2", tensor_of<float>(s, m20)}, {"Beta1Pow", tensor_of<float>({1}, {b1p})},
                                     {"Beta2Pow", tensor_of<float>({1}, {b2p})}},
                                    {"ParamOut", "Moment1Out", "Moment2Out", "Beta1PowOut", "Beta2PowOut"},
                                    {Attribute::make_float("epsilon", c.eps), Attribute::make_float("beta1", c.b1),
                                     Attribute::make_float("beta2", c.b2), Attribute::make_float("weight_decay", 0.01)});
            // lamb_step, in double.
            std::vector<double> m1(n), m2(n), r(n), po(n);
            double r1 = 0, r2 = 0;
            for (std::size_t i = 0; i < n; ++i) {
                m1[i] = c.b1 * m10[i] + (1 - c.b1) * g0[i];
                m2[i] = c.b2 * m20[i] + (1 - c.b2) * static_cast<double>(g0[i]) * g0[i];
                r[i] = (m1[i] / (1 - b1p)) / (std::sqrt(m2[i] / (1 - b2p)) + c.eps) + 0.01 * p0[i];
                r1 += static_cast<double>(p0[i]) * p0[i];
                r2 += r[i] * r[i];
            }
            const double lr_t = 0.001 * std::sqrt(r1) / std::sqrt(r2);
            for (std::size_t i = 0; i < n; ++i) po[i] = p0[i] - lr_t * r[i];
            check_close(out[0], po, 1e-5);
            check_close(out[1], m1, 1e-5);
            check_close(out[2], m2, 1e-5);
            CHECK(out[3][0] == doctest::Approx(b1p * c.b1).epsilon(1e-6));
            CHECK(out[4][0] == doctest::Approx(b2p * c.b2).epsilon(1e-6));
            p0 = out[0];
            m10 = out[1];
            m20 = out[2];
            b1p = out[3][0];
            b2p = out[4][0];
        }
    }
    // Not ported: the sparse classes (SelectedRows gradients; dlgraph's are
    // dense) and the Python API classes.
}

TEST_CASE("rmsprop not centered: a MeanGradOut (Paddle's RMSProp passes it) is MeanGrad unchanged") {
    const Shape s{5};
    const auto out = run_op("rmsprop",
                            {{"Param", tensor_of<float>(s, {1, 2, 3, 4, 5})}, {"MeanSquare", tensor_of<float>(s, {1, 1, 1, 1, 1})},
                             {"Grad", tensor_of<float>(s, {1, 1, 1, 1, 1})}, {"Moment", tensor_of<float>(s, {0, 0, 0, 0, 0})},
                             {"LearningRate", tensor_of<float>({1}, {0.1f})}, {"MeanGrad", tensor_of<float>(s, {0.5f, -1, 2, 0, 3})}},
                            {"ParamOut", "MomentOut", "MeanSquareOut", "MeanGradOut"}, {});
    CHECK(out[3] == std::vector<float>{0.5f, -1, 2, 0, 3});
}

TEST_CASE("adagrad, rmsprop and lamb: their errors") {
    Program p;
    auto param = p.input<float>("param", {3});
    auto other = p.input<float>("other", {4});
    auto lr = p.input<float>("lr", {1});
    CHECK_THROWS_CONTAINING(p.append("rmsprop", {{"Param", {param.name()}}, {"MeanSquare", {param.name()}}, {"Grad", {param.name()}},
                                                 {"Moment", {param.name()}}, {"LearningRate", {lr.name()}}},
                                     {{"ParamOut", 1}, {"MomentOut", 1}, {"MeanSquareOut", 1}}, {Attribute::make_bool("centered", true)}),
                            shape_error, "centered rmsprop needs MeanGrad and MeanGradOut");
    CHECK_THROWS_CONTAINING(p.append("rmsprop", {{"Param", {param.name()}}, {"MeanSquare", {param.name()}}, {"Grad", {param.name()}},
                                                 {"Moment", {param.name()}}, {"LearningRate", {lr.name()}}},
                                     {{"ParamOut", 1}, {"MomentOut", 1}, {"MeanSquareOut", 1}, {"MeanGradOut", 1}}, {}),
                            shape_error, "MeanGradOut needs MeanGrad");
    CHECK_THROWS_CONTAINING(p.append("adagrad", {{"Param", {param.name()}}, {"Grad", {param.name()}}, {"Moment", {other.name()}},
                                                 {"LearningRate", {lr.name()}}},
                                     {{"ParamOut", 1}, {"MomentOut", 1}}, {}),
                            shape_error, "Moment is [4] but Param is [3]");
    CHECK_THROWS_CONTAINING(p.append("lamb", {{"Param", {param.name()}}, {"Grad", {param.name()}}, {"LearningRate", {other.name()}},
                                              {"Moment1", {param.name()}}, {"Moment2", {param.name()}}, {"Beta1Pow", {lr.name()}},
                                              {"Beta2Pow", {lr.name()}}},
                                     {{"ParamOut", 1}, {"Moment1Out", 1}, {"Moment2Out", 1}, {"Beta1PowOut", 1}, {"Beta2PowOut", 1}}, {}),
                            shape_error, "LearningRate must hold one value");
}

TEST_CASE("momentum: Paddle's regularization_method, regularization_coeff and rescale_grad, and its refusals") {
    // g = rescale_grad * Grad + coeff * Param (l2_decay); v = mu * v + g;
    // p -= lr * (nesterov ? g + mu * v : v). Computed here in double.
    const std::vector<float> p0 = {1, -2, 0.5f, 3}, g0 = {0.25f, 1, -1, 0.5f}, v0 = {0.1f, 0, -0.2f, 1};
    const float lr = 0.1f, mu = 0.9f, coeff = 0.5f, rescale = 2.0f;
    for (bool nesterov : {false, true})
        for (bool l2 : {false, true}) {
            CAPTURE(nesterov);
            CAPTURE(l2);
            std::vector<Attribute> attrs{Attribute::make_float("mu", mu), Attribute::make_bool("use_nesterov", nesterov),
                                         Attribute::make_float("rescale_grad", rescale)};
            if (l2) {
                attrs.push_back(Attribute::make_string("regularization_method", "l2_decay"));
                attrs.push_back(Attribute::make_float("regularization_coeff", coeff));
            }
            const auto out = run_op("momentum",
                                    {{"Param", tensor_of<float>({4}, p0)}, {"Grad", tensor_of<float>({4}, g0)},
                                     {"Velocity", tensor_of<float>({4}, v0)}, {"LearningRate", tensor_of<float>({1}, {lr})}},
                                    {"ParamOut", "VelocityOut"}, attrs);
            for (std::size_t i = 0; i < 4; ++i) {
                const double g = double(rescale) * g0[i] + (l2 ? double(coeff) * p0[i] : 0.0);
                const double v = double(mu) * v0[i] + g;
                const double p = p0[i] - double(lr) * (nesterov ? g + double(mu) * v : v);
                CHECK(out[1][i] == doctest::Approx(v).epsilon(1e-6));
                CHECK(out[0][i] == doctest::Approx(p).epsilon(1e-6));
            }
        }
    Program q;
    auto param = q.input<float>("param", {3});
    auto lrv = q.input<float>("lr", {1});
    auto momentum_with = [&](Attribute a) {
        q.append("momentum", {{"Param", {param.name()}}, {"Grad", {param.name()}}, {"Velocity", {param.name()}},
                              {"LearningRate", {lrv.name()}}},
                 {{"ParamOut", 1}, {"VelocityOut", 1}}, {std::move(a)});
    };
    CHECK_THROWS_CONTAINING(momentum_with(Attribute::make_string("regularization_method", "l1_decay")), shape_error,
                            "regularization_method 'l1_decay' is not one of '' and 'l2_decay'");
    CHECK_THROWS_CONTAINING(momentum_with(Attribute::make_bool("multi_precision", true)), shape_error,
                            "multi_precision (FP32 master copies of FP16 parameters) is not supported");
}
