// Training: optimizers as ops against reference updates in double precision,
// the step/loss contract, initializers, and a small model that learns.
#include <dlgraph/optimizer.hpp>

#include <cmath>

#include "grad_check.hpp"

using namespace dlgraph;

namespace {
// A quadratic loss sum((w - t)^2) with d/dw = 2 (w - t).
struct quadratic {
    Program p;
    Var<double> w, t, loss;
    explicit quadratic(std::vector<double> w0) {
        w = p.parameter<double>("w", {static_cast<std::int64_t>(w0.size())}, init::constant(0));
        t = p.input<double>("t", {static_cast<std::int64_t>(w0.size())});
        loss = reduce_sum(square(w - t));
    }
};
}  // namespace

TEST_CASE("sgd, momentum and adam match reference updates") {
    const std::vector<double> w0{0.5, -1.0, 2.0};
    xt::xarray<double> target = {1.0, 1.0, -1.0};
    auto grad = [&](const std::vector<double>& w) {
        std::vector<double> g(w.size());
        for (std::size_t i = 0; i < w.size(); ++i) g[i] = 2 * (w[i] - target(i));
        return g;
    };
    auto run = [&](auto make_step, auto reference) {
        quadratic q(w0);
        TrainStep step = make_step(q.loss);
        Session<cpu> s(q.p);
        xt::xarray<double> init = xt::adapt(w0, {w0.size()});
        s.eval(q.w);  // initialize, then set the starting point
        s.scope().find("w")->get_mutable<Tensor>().copy_from(to_tensor(init));
        std::vector<double> w = w0;
        for (int it = 0; it < 5; ++it) {
            s.eval(step.targets(), {{q.t, target}});
            reference(w, grad(w), it + 1);
            auto got = s.eval(q.w);
            for (std::size_t i = 0; i < w.size(); ++i) CHECK(got(i) == doctest::Approx(w[i]).epsilon(1e-12));
        }
    };
    SUBCASE("sgd") {
        run([](auto& loss) { return SGD(0.1).minimize(loss); },
            [](auto& w, auto g, int) { for (std::size_t i = 0; i < w.size(); ++i) w[i] -= 0.1 * g[i]; });
    }
    SUBCASE("momentum and nesterov") {
        for (bool nesterov : {false, true}) {
            std::vector<double> v(3, 0.0);
            run([&](auto& loss) { return Momentum(0.05, 0.9, nesterov).minimize(loss); },
                [&](auto& w, auto g, int) {
                    for (std::size_t i = 0; i < w.size(); ++i) {
                        v[i] = 0.9 * v[i] + g[i];
                        w[i] -= 0.05 * (nesterov ? g[i] + 0.9 * v[i] : v[i]);
                    }
                });
        }
    }
    SUBCASE("adam") {
        std::vector<double> m(3, 0.0), u(3, 0.0);
        run([](auto& loss) { return Adam(0.01, 0.9, 0.999, 1e-8).minimize(loss); },
            [&](auto& w, auto g, int t) {
                for (std::size_t i = 0; i < w.size(); ++i) {
                    m[i] = 0.9 * m[i] + 0.1 * g[i];
                    u[i] = 0.999 * u[i] + 0.001 * g[i] * g[i];
                    const double mh = m[i] / (1 - std::pow(0.9, t)), uh = u[i] / (1 - std::pow(0.999, t));
                    w[i] -= 0.01 * mh / (std::sqrt(uh) + 1e-8);
                }
            });
    }
}

TEST_CASE("evaluating the loss never changes parameters, a step changes each exactly once") {
    Program p;
    auto x = p.input<double>("x", {-1, 3});
    auto w = p.parameter<double>("w", {3, 2}, init::uniform(-1, 1, 5));
    auto b = p.parameter<double>("b", {2}, init::constant(0.1));
    auto y = matmul(x, w) + b;
    // w is read by two ops (fan-out) and still updated once.
    auto loss = mean(square(y)) + mean(square(w));
    auto step = SGD(0.5).minimize(loss);
    CHECK(step.ops.size() == 2);
    Session<cpu> s(p);
    xt::xarray<double> xv = {{1, 2, 3}, {-1, 0, 1}};
    auto w0 = s.eval(w);
    auto b0 = s.eval(b);
    for (int i = 0; i < 3; ++i) s.eval(loss, {{x, xv}});
    CHECK(s.eval(w) == w0);
    CHECK(s.eval(b) == b0);
    // One step = one SGD update with the gradients at w0.
    auto grads = s.eval({TargetRef(step.param_grads[0].second), TargetRef(step.param_grads[1].second)}, {{x, xv}});
    s.eval(step.targets(), {{x, xv}});
    xt::xarray<double> gw = to_xarray<double>(grads[step.param_grads[0].first == "w" ? 0 : 1]);
    CHECK(xt::allclose(s.eval(w), w0 - 0.5 * gw));
}

TEST_CASE("the learning rate is a variable a schedule can change") {
    quadratic q({0.0});
    auto step = SGD(1.0).minimize(q.loss);
    Session<cpu> s(q.p);
    xt::xarray<double> t = {1.0};
    set_scalar(s, step.learning_rate, 0.0);  // before the first step: replaces the initial value
    s.eval(step.targets(), {{q.t, t}});
    CHECK(s.eval(q.w)(0) == 0.0);  // lr 0: no change
    set_scalar(s, step.learning_rate, 0.25);
    s.eval(step.targets(), {{q.t, t}});
    CHECK(s.eval(q.w)(0) == doctest::Approx(0.5));  // w -= 0.25 * 2 * (0 - 1)
    CHECK_THROWS_CONTAINING(set_scalar(s, "t", 1.0), graph_error, "'t' is not a persistable variable");
}

TEST_CASE("adamw matches reference updates, decay_if exempts parameters") {
    const std::vector<double> w0{0.5, -1.0, 2.0};
    const xt::xarray<double> target = {1.0, 1.0, -1.0};
    for (bool decays : {true, false}) {
        INFO("decays " << decays);
        quadratic q(w0);
        AdamW opt(0.01, 0.1, 0.9, 0.999, 1e-8);
        if (!decays) opt.decay_if([](const std::string& name) { return name != "w"; });
        TrainStep step = opt.minimize(q.loss);
        CHECK(q.p.desc().blocks[0].ops.back().type == "adamw");
        Session<cpu> s(q.p);
        s.eval(q.w);
        s.scope().find("w")->get_mutable<Tensor>().copy_from(to_tensor(xt::xarray<double>(xt::adapt(w0, {w0.size()}))));
        std::vector<double> w = w0, m(3, 0.0), u(3, 0.0);
        for (int t = 1; t <= 5; ++t) {
            s.eval(step.targets(), {{q.t, target}});
            for (std::size_t i = 0; i < w.size(); ++i) {
                const double g = 2 * (w[i] - target(i));
                if (decays) w[i] -= 0.01 * 0.1 * w[i];  // decoupled: before Adam's step, on the old moments' param
                m[i] = 0.9 * m[i] + 0.1 * g;
                u[i] = 0.999 * u[i] + 0.001 * g * g;
                const double mh = m[i] / (1 - std::pow(0.9, t)), uh = u[i] / (1 - std::pow(0.999, t));
                w[i] -= 0.01 * mh / (std::sqrt(uh) + 1e-8);
            }
            auto got = s.eval(q.w);
            for (std::size_t i = 0; i < w.size(); ++i) CHECK(got(i) == doctest::Approx(w[i]).epsilon(1e-12));
        }
    }
}

// Each step's rate is LRSchedule::at(t) (t = 0 at the first step), and SGD
// moves w by exactly that rate times the gradient.
TEST_CASE_TEMPLATE("learning-rate schedules: step decay, cosine, warm-up, each step's rate", T, float, double) {
    const std::vector<std::pair<const char*, LRSchedule>> schedules = {
        {"step decay", LRSchedule::step_decay(0.5, 3, 0.5)},
        {"cosine", LRSchedule::cosine(0.4, 6, 0.1)},
        {"warm-up then cosine", LRSchedule::cosine(0.4, 4).with_warmup(3, 0.05)},
        {"warm-up then constant", LRSchedule(0.3).with_warmup(4)},
    };
    for (const auto& [name, sched] : schedules) {
        INFO(name);
        Program p;
        auto w = p.parameter<T>("w", {1}, init::constant(0));
        auto loss = reduce_sum(w * p.constant<T>(T(1)));  // dloss/dw = 1: w falls by the rate each step
        TrainStep step = SGD(sched).minimize(loss);
        CHECK_FALSE(step.step_counter.empty());
        Session<cpu> s(p);
        auto rate = Var<T>(p.state(), step.learning_rate, -1);
        double want_w = 0;
        for (std::int64_t t = 0; t < 10; ++t) {
            CAPTURE(t);
            s.eval(step.targets(), {});
            const double want = sched.at(t);
            const double tol = std::is_same_v<T, float> ? 1e-6 : 1e-14;
            CHECK(static_cast<double>(s.eval(rate)(0)) == doctest::Approx(want).epsilon(tol));
            want_w -= static_cast<double>(static_cast<T>(s.eval(rate)(0)));
            CHECK(static_cast<double>(s.eval(w)(0)) == doctest::Approx(want_w).epsilon(tol * 10));
        }
    }
    // A step decay floors multiples of step_size to themselves, in FP32 too.
    CHECK(LRSchedule::step_decay(1, 3, 0.5).at(3) == 0.5);
    CHECK(LRSchedule::step_decay(1, 3, 0.5).at(2) == 1.0);
}

TEST_CASE("a schedule's counter is a persistable the rate follows, a constant rate has none") {
    Program p;
    auto w = p.parameter<double>("w", {1}, init::constant(0));
    auto loss = reduce_sum(square(w));
    CHECK(SGD(0.1).minimize(loss).step_counter.empty());
    Program q;
    auto v = q.parameter<double>("v", {1}, init::constant(1));
    TrainStep step = Momentum(LRSchedule::step_decay(0.1, 2, 0.1)).minimize(reduce_sum(square(v)));
    Session<cpu> s(q);
    for (int i = 0; i < 3; ++i) s.eval(step.targets(), {});
    CHECK(s.eval(Var<double>(q.state(), step.step_counter, -1))(0) == 3.0);
    // Evaluating the loss alone advances nothing.
    s.eval(Var<double>(q.state(), "v", -1));
    CHECK(s.eval(Var<double>(q.state(), step.step_counter, -1))(0) == 3.0);
    check_throws<graph_error>([&] { SGD(LRSchedule::step_decay(0.1, 0)).minimize(loss); },
                              {"dlgraph.graph.args", "sgd", "step_size >= 1"});
    check_throws<graph_error>([&] { SGD(LRSchedule::cosine(0.1, 0)).minimize(loss); }, {"total_steps >= 1"});
    check_throws<graph_error>([&] { SGD(0.1).clip_by_global_norm(-1).minimize(loss); }, {"global-norm clip is -1"});
}

// Two parameters with gradients 2 (w - t): both are scaled by clip / max(clip,
// norm) where norm is over both; below the clip nothing changes.
TEST_CASE("clip_by_global_norm scales every gradient by clip / max(clip, global norm)") {
    for (double clip : {1.0, 100.0}) {
        INFO("clip " << clip);
        Program p;
        auto a = p.parameter<double>("a", {2}, init::constant(3));
        auto b = p.parameter<double>("b", {3}, init::constant(-2));
        auto loss = reduce_sum(square(a)) + reduce_sum(square(b));
        TrainStep step = SGD(0.1).clip_by_global_norm(clip).minimize(loss);
        REQUIRE_FALSE(step.grad_norm.empty());
        Session<cpu> s(p);
        s.eval(step.targets(), {});
        const double norm = std::sqrt(2 * 36.0 + 3 * 16.0);  // gradients 6 and -4
        const double f = clip / std::max(clip, norm);
        CHECK(s.eval(a)(0) == doctest::Approx(3 - 0.1 * 6 * f).epsilon(1e-14));
        CHECK(s.eval(b)(2) == doctest::Approx(-2 + 0.1 * 4 * f).epsilon(1e-14));
    }
}

TEST_CASE("initializers: same seed, same values, scale follows the fans") {
    Program p;
    auto a = p.parameter<double>("a", {400, 100}, init::xavier_uniform(3));
    auto b = p.parameter<double>("b", {400, 100}, init::kaiming_normal(3));
    auto c = p.parameter<double>("c", {400, 100}, init::xavier_uniform(3));
    Session<cpu> s(p), s2(p);
    auto av = s.eval(a), bv = s.eval(b);
    CHECK(av == s.eval(c));
    CHECK(av == s2.eval(a));
    const double limit = std::sqrt(6.0 / 500);
    CHECK(xt::amax(xt::abs(av))() <= limit);
    CHECK(xt::amax(xt::abs(av))() > 0.95 * limit);
    const double sd = std::sqrt(xt::mean(bv * bv)());
    CHECK(sd == doctest::Approx(std::sqrt(2.0 / 400)).epsilon(0.03));
    // A convolution's filter [out, in, kh, kw]: fan_in = in * kh * kw, as
    // in Paddle (not out * kh * kw).
    auto f = p.parameter<double>("f", {8, 50, 3, 3}, init::kaiming_uniform(4));
    const xt::xarray<double> fv = s.eval(f);
    const double flimit = std::sqrt(6.0 / (50 * 9));
    CHECK(xt::amax(xt::abs(fv))() <= flimit);
    CHECK(xt::amax(xt::abs(fv))() > 0.95 * flimit);
}

TEST_CASE("a small classifier learns (softmax cross-entropy, Adam)") {
    // Two Gaussian blobs in 2-D, linearly separable.
    std::mt19937 rng(3);
    std::normal_distribution<double> n(0, 0.5);
    xt::xarray<double> xv = xt::zeros<double>({64, 2});
    xt::xarray<std::int64_t> lv = xt::zeros<std::int64_t>({64, 1});
    for (int i = 0; i < 64; ++i) {
        const int cls = i % 2;
        xv(i, 0) = (cls ? 1.5 : -1.5) + n(rng);
        xv(i, 1) = (cls ? -1.0 : 1.0) + n(rng);
        lv(i, 0) = cls;
    }
    Program p;
    auto x = p.input<double>("x", {-1, 2});
    auto label = p.input<std::int64_t>("label", {-1, 1});
    auto h = relu(matmul(x, p.parameter<double>("w1", {2, 8}, init::kaiming_uniform(1))) +
                  p.parameter<double>("b1", {8}, init::constant(0)));
    auto logits = matmul(h, p.parameter<double>("w2", {8, 2}, init::xavier_uniform(2)));
    auto [prob, xent] = softmax_with_cross_entropy(logits, label);
    auto loss = mean(xent);
    auto step = Adam(0.05).minimize(loss);
    Session<cpu> s(p);
    const double first = s.eval(loss, {{x, xv}, {label, lv}})(0);
    auto targets = step.with({loss});
    double last = first;
    for (int it = 0; it < 60; ++it) last = s.eval(targets, {{x, xv}, {label, lv}}).back().item<double>();
    CHECK(last < 0.1 * first);
}

TEST_CASE("memory: an MLP's forward and training plans use at most 10% over the lower bound") {
    // The example models of the CPU-performance issue: 784-512-512-10, SGD
    // and Adam, batch 1, 64 and 256. The arena places values by size and
    // lifetime (plan_memory), so weight gradients reuse the space of
    // activations that died before them.
    for (bool adam : {false, true})
        for (std::size_t batch : {1u, 64u, 256u}) {
            Program p;
            auto x = p.input<float>("x", {-1, 784});
            auto label = p.input<std::int64_t>("label", {-1, 1});
            auto h1 = relu(matmul(x, p.parameter<float>("w1", {784, 512}, init::kaiming_uniform(1))) +
                           p.parameter<float>("b1", {512}, init::constant(0)));
            auto h2 = relu(matmul(h1, p.parameter<float>("w2", {512, 512}, init::kaiming_uniform(2))) +
                           p.parameter<float>("b2", {512}, init::constant(0)));
            auto logits = matmul(h2, p.parameter<float>("w3", {512, 10}, init::xavier_uniform(3))) +
                          p.parameter<float>("b3", {10}, init::constant(0));
            auto loss = mean(softmax_with_cross_entropy(logits, label).second);
            const std::vector<TargetRef> forward{logits};
            const std::vector<TargetRef> train =
                adam ? Adam(0.001).minimize(loss).with({loss}) : SGD(0.01).minimize(loss).with({loss});
            const std::vector<std::string> fed{"x", "label"};
            xt::xarray<float> xv = xt::zeros<float>({batch, std::size_t(784)});
            xt::xarray<std::int64_t> yv = xt::zeros<std::int64_t>({batch, std::size_t(1)});
            const std::vector<Feed> feeds{{"x", xv}, {"label", yv}};
            Session<cpu> s(p);
            for (const auto* targets : {&forward, &train}) {
                CHECK_THROWS_WITH_AS(s.memory_plan(*targets, fed), doctest::Contains("has not run yet"), session_error);
                std::vector<Tensor> out(targets->size());
                s.eval_into(*targets, feeds, out);
                const MemoryPlan m = s.memory_plan(*targets, fed);
                INFO((adam ? "Adam" : "SGD") << " batch " << batch << (targets == &train ? " train" : " forward")
                                             << ": arena " << m.host().arena_bytes << ", lower bound " << m.host().lower_bound);
                CHECK(m.host().arena_bytes >= m.host().lower_bound);
                CHECK(double(m.host().arena_bytes) <= 1.01 * double(m.host().lower_bound));  // as docs/design.md says
                CHECK(m.host().arena_bytes < m.host().unshared_bytes);
            }
        }
}
