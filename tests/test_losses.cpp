// sigmoid_cross_entropy_with_logits, huber_loss, smooth_l1_loss and
// kldiv_loss (issue 16), against references written here in double from
// Paddle's formulas (the test classes' NumPy expressions, which take the
// sigmoid first); every gradient by central finite differences in FP64; the
// errors by their text. Paddle's own test classes are ported at the end.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "grad_check.hpp"

using namespace dlgraph;
using grad_check::random;

namespace {

std::vector<double> uniform(std::size_t n, unsigned seed, double lo, double hi) {
    std::mt19937 g(seed);
    std::uniform_real_distribution<double> u(lo, hi);
    std::vector<double> v(n);
    for (auto& e : v) e = u(g);
    return v;
}
// np.random.randint(lo, hi) as doubles.
std::vector<double> randint(std::size_t n, unsigned seed, int lo, int hi) {
    std::mt19937 g(seed);
    std::uniform_int_distribution<int> u(lo, hi - 1);
    std::vector<double> v(n);
    for (auto& e : v) e = u(g);
    return v;
}
// Within tol of want, relative to max(1, |want|).
void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
    REQUIRE(got.size() == want.size());
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i)
        worst = std::max(worst, std::abs(got[i] - want[i]) / std::max(1.0, std::abs(want[i])));
    CHECK(worst <= tol);
}

// The test classes' formula, -label log(sigmoid(x)) - (1 - label) log(1 -
// sigmoid(x)), with each log written so that it keeps its digits:
// -log(sigmoid(x)) = log1p(exp(-x)), -log(1 - sigmoid(x)) = log1p(exp(x)).
std::vector<double> ref_sigmoid_ce(const std::vector<double>& x, const std::vector<double>& label, double ignore, bool normalize) {
    std::vector<double> out(x.size());
    double kept = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        out[i] = label[i] == ignore ? 0 : label[i] * std::log1p(std::exp(-x[i])) + (1 - label[i]) * std::log1p(std::exp(x[i]));
        kept += label[i] != ignore;
    }
    if (normalize)
        for (auto& o : out) o /= kept;
    return out;
}

}  // namespace

TEST_CASE("sigmoid_cross_entropy_with_logits: the cross entropy of sigmoid(X), ignore_index and normalize") {
    const std::size_t n = 240;
    const auto x = uniform(n, 1, -12, 12);
    auto label = randint(n, 2, -1, 2);
    for (std::size_t i = 0; i < n; i += 7) label[i] = 0.25 * static_cast<double>(i % 5);  // soft labels too
    for (bool normalize : {false, true})
        for (int ignore : {-100, -1}) {
            CAPTURE(normalize);
            CAPTURE(ignore);
            Program p;
            auto xv = p.input<double>("x", {12, 20});
            auto lv = p.input<double>("label", {12, 20});
            auto out = sigmoid_cross_entropy_with_logits(xv, lv, normalize, ignore);
            CHECK(out.shape() == Shape{12, 20});
            Session<cpu> s(p);
            const auto got = values_of<double>(s.eval({out}, {{xv, tensor_of<double>({12, 20}, x)}, {lv, tensor_of<double>({12, 20}, label)}})[0]);
            check_close(got, ref_sigmoid_ce(x, label, ignore, normalize), 1e-13);
        }
    // Large logits stay finite (no log(0)): the stable form.
    Program p;
    auto xv = p.input<float>("x", {4});
    auto lv = p.input<float>("label", {4});
    auto out = sigmoid_cross_entropy_with_logits(xv, lv);
    Session<cpu> s(p);
    const auto got = values_of<float>(s.eval({out}, {{xv, tensor_of<float>({4}, {100, -100, 100, -100})}, {lv, tensor_of<float>({4}, {1, 0, 0, 1})}})[0]);
    CHECK(got[0] == doctest::Approx(0).epsilon(1e-6));
    CHECK(got[1] == doctest::Approx(0).epsilon(1e-6));
    CHECK(got[2] == doctest::Approx(100));
    CHECK(got[3] == doctest::Approx(100));

    const Tensor labels = tensor_of<double>({3, 4}, {1, 0, -1, 0.5, 0.25, -1, 1, 0, 0, 1, 0.75, -1});
    for (bool normalize : {false, true})
        grad_check::check({{"x", random({3, 4}, 3, -3, 3)}},
                          [normalize](Program& q, const std::vector<Var<double>>& v) {
                              return sigmoid_cross_entropy_with_logits(v[0], q.input<double>("label", {3, 4}), normalize, -1);
                          },
                          {{"label", labels}});
    check_throws<shape_error>([&] { sigmoid_cross_entropy_with_logits(xv, p.input<float>("l2", {5})); },
                              {"dlgraph.shape.loss", "X is [4] but Label is [5]", "sigmoid_cross_entropy_with_logits takes them of one shape"});
    check_throws<type_error>([&] { sigmoid_cross_entropy_with_logits(p.input<std::int32_t>("i", {4}), p.input<std::int32_t>("j", {4})); },
                             {"X must be FP32 or FP64"});
}

TEST_CASE("huber_loss: quadratic within delta, linear beyond, Residual, gradients") {
    const auto x = uniform(60, 4, -3, 3), y = uniform(60, 5, -3, 3);
    for (double delta : {0.5, 1.0, 2.5}) {
        CAPTURE(delta);
        Program p;
        auto xv = p.input<double>("x", {6, 10});
        auto yv = p.input<double>("y", {6, 10});
        auto out = huber_loss(xv, yv, delta);
        Session<cpu> s(p);
        const auto got = values_of<double>(s.eval({out}, {{xv, tensor_of<double>({6, 10}, x)}, {yv, tensor_of<double>({6, 10}, y)}})[0]);
        std::vector<double> want;
        for (std::size_t i = 0; i < x.size(); ++i) {
            const double r = y[i] - x[i], a = std::abs(r);
            want.push_back(a <= delta ? 0.5 * r * r : delta * (a - 0.5 * delta));
        }
        check_close(got, want, 1e-15);
        grad_check::check({{"x", random({3, 4}, 6, -2, 2)}, {"y", random({3, 4}, 7, -2, 2)}},
                          [delta](Program&, const std::vector<Var<double>>& v) { return huber_loss(v[0], v[1], delta); });
    }
    Program p;
    auto xv = p.input<float>("x", {3});
    check_throws<shape_error>([&] { huber_loss(xv, p.input<float>("y", {4})); }, {"X is [3] but Y is [4]"});
    check_throws<shape_error>([&] { huber_loss(xv, xv, -1.0); }, {"dlgraph.shape.attr", "delta is -1", "must not be negative"});
}

TEST_CASE("smooth_l1_loss: row sums of the smooth L1 of weighted differences, the true gradient") {
    const Shape s{5, 4, 3};
    const auto x = uniform(60, 8, -1, 1), y = uniform(60, 9, -1, 1), iw = uniform(60, 10, 0, 2), ow = uniform(60, 11, 0, 2);
    for (bool weights : {false, true})
        for (double sigma : {1.0, 3.0}) {
            CAPTURE(weights);
            CAPTURE(sigma);
            Program p;
            auto xv = p.input<double>("x", s);
            auto yv = p.input<double>("y", s);
            auto iv = p.input<double>("iw", s);
            auto ov = p.input<double>("ow", s);
            Var<double> out = weights ? smooth_l1_loss(xv, yv, iv, ov, sigma) : smooth_l1_loss(xv, yv, sigma);
            CHECK(out.shape() == Shape{5, 1});
            Session<cpu> sess(p);
            const auto got = values_of<double>(sess.eval({out}, {{xv, tensor_of<double>(s, x)}, {yv, tensor_of<double>(s, y)},
                                                                {iv, tensor_of<double>(s, iw)}, {ov, tensor_of<double>(s, ow)}})[0]);
            const double s2 = sigma * sigma;
            std::vector<double> want(5, 0.0);
            for (std::size_t i = 0; i < 60; ++i) {
                const double d = (x[i] - y[i]) * (weights ? iw[i] : 1.0), a = std::abs(d);
                want[i / 12] += (a < 1 / s2 ? 0.5 * d * d * s2 : a - 0.5 / s2) * (weights ? ow[i] : 1.0);
            }
            check_close(got, want, 1e-14);
        }
    const Tensor iwt = tensor_of<double>({3, 4}, uniform(12, 12, 0.5, 2)), owt = tensor_of<double>({3, 4}, uniform(12, 13, 0.5, 2));
    grad_check::check({{"x", random({3, 4}, 14)}, {"y", random({3, 4}, 15)}},
                      [](Program& q, const std::vector<Var<double>>& v) {
                          return smooth_l1_loss(v[0], v[1], q.input<double>("iw", {3, 4}), q.input<double>("ow", {3, 4}), 2.0);
                      },
                      {{"iw", iwt}, {"ow", owt}});
    grad_check::check({{"x", random({4, 3}, 16)}, {"y", random({4, 3}, 17)}},
                      [](Program&, const std::vector<Var<double>>& v) { return smooth_l1_loss(v[0], v[1]); });
    Program p;
    auto xv = p.input<float>("x", {3, 2});
    check_throws<shape_error>([&] { smooth_l1_loss(xv, xv, 0.0); }, {"dlgraph.shape.attr", "sigma is 0", "must be positive"});
    check_throws<shape_error>([&] { smooth_l1_loss(xv, xv, p.input<float>("w", {3, 3}), xv); },
                              {"X is [3,2] but InsideWeight is [3,3]"});
}

TEST_CASE("kldiv_loss: Target * (log(Target) - X) where Target > 0, four reductions, gradients") {
    const Shape s{4, 5, 6};
    const auto x = uniform(120, 18, -10, 10);
    auto t = uniform(120, 19, -10, 10);
    t[3] = 0;  // 0 and negative targets add nothing
    for (const char* red : {"none", "sum", "mean", "batchmean"}) {
        CAPTURE(red);
        Program p;
        auto xv = p.input<double>("x", s);
        auto tv = p.input<double>("t", s);
        auto loss = kl_div(xv, tv, red);
        const std::string r(red);
        CHECK(loss.shape() == (r == "none" ? s : Shape{1}));
        Session<cpu> sess(p);
        const auto got = values_of<double>(sess.eval({loss}, {{xv, tensor_of<double>(s, x)}, {tv, tensor_of<double>(s, t)}})[0]);
        std::vector<double> el;
        double sum = 0;
        for (std::size_t i = 0; i < x.size(); ++i) {
            el.push_back(t[i] > 0 ? t[i] * (std::log(t[i]) - x[i]) : 0.0);
            sum += el.back();
        }
        if (r == "none") check_close(got, el, 1e-15);
        else check_close(got, {r == "sum" ? sum : r == "mean" ? sum / 120 : sum / 4}, 1e-13);
        const Tensor tt = tensor_of<double>({3, 4}, uniform(12, 20, -0.5, 1.5));
        grad_check::check({{"x", random({3, 4}, 21)}},
                          [red](Program& q, const std::vector<Var<double>>& v) { return kl_div(v[0], q.input<double>("t", {3, 4}), red); },
                          {{"t", tt}});
    }
    Program p;
    auto xv = p.input<float>("x", {3});
    check_throws<shape_error>([&] { kl_div(xv, xv, "average"); },
                              {"dlgraph.shape.attr", "reduction is 'average'", "none, sum, mean or batchmean"});
    check_throws<shape_error>([&] { kl_div(xv, p.input<float>("t", {3, 1})); }, {"X is [3] but Target is [3,1]"});
}

// ---- Paddle's own configurations ------------------------------------------------------------------

TEST_CASE("Paddle's test_sigmoid_cross_entropy_with_logits_op.py classes") {
    struct sce_class {
        const char* name;
        Shape shape;
        const char* labels;  // "binary" randint(0, 2), "ignore" randint(-1, 2), "soft" uniform(0, 1)
        bool normalize;
    };
    // X = logit(uniform(0, 1)), float64; ignore_index -1 where the class sets it.
    const sce_class classes[] = {{"TestSigmoidCrossEntropyWithLogitsOp1", {64, 20}, "binary", false},
                                 {"TestSigmoidCrossEntropyWithLogitsOp2", {64, 20}, "ignore", false},
                                 {"TestSigmoidCrossEntropyWithLogitsOp3", {64, 20}, "soft", false},
                                 {"TestSigmoidCrossEntropyWithNorm", {64, 20}, "ignore", true},
                                 {"TestSigmoidCrossEntropyWithLogitsOp5", {10, 10, 20}, "soft", false},
                                 {"TestSigmoidCrossEntropyWithNorm2", {10, 10, 20}, "ignore", true},
                                 {"TestSigmoidCrossEntropyWithLogitsOp6", {10, 10, 20}, "binary", false}};
    unsigned seed = 31;
    for (const auto& c : classes) {
        INFO(c.name);
        const auto n = static_cast<std::size_t>(c.shape.numel());
        std::vector<double> x;
        for (double u : uniform(n, seed++, 1e-6, 1 - 1e-6)) x.push_back(std::log(u / (1 - u)));
        const std::string kind = c.labels;
        const auto label = kind == "soft" ? uniform(n, seed++, 0, 1) : randint(n, seed++, kind == "ignore" ? -1 : 0, 2);
        const int ignore = kind == "ignore" ? -1 : -100;
        Program p;
        auto xv = p.input<double>("x", c.shape);
        auto lv = p.input<double>("label", c.shape);
        auto out = sigmoid_cross_entropy_with_logits(xv, lv, c.normalize, ignore);
        Session<cpu> s(p);
        const auto got = values_of<double>(s.eval({out}, {{xv, tensor_of<double>(c.shape, x)}, {lv, tensor_of<double>(c.shape, label)}})[0]);
        check_close(got, ref_sigmoid_ce(x, label, ignore, c.normalize), 1e-13);
    }
    // Not ported: TestSigmoidCrossEntropyWithLogitsOpError (Python type checks).
}

TEST_CASE("Paddle's test_huber_loss_op.py, test_smooth_l1_loss_op.py and test_kldiv_loss_op.py classes") {
    {  // TestHuberLossOp: X, Y uniform(0, 1) (100, 1) float32, delta 1.
        INFO("TestHuberLossOp");
        const auto x = uniform(100, 41, 0, 1), y = uniform(100, 42, 0, 1);
        Program p;
        auto xv = p.input<float>("x", {100, 1});
        auto yv = p.input<float>("y", {100, 1});
        auto out = huber_loss(xv, yv, 1.0);
        Session<cpu> s(p);
        const auto got = values_of<float>(s.eval({out}, {{xv, tensor_of<float>({100, 1}, std::vector<float>(x.begin(), x.end()))},
                                                         {yv, tensor_of<float>({100, 1}, std::vector<float>(y.begin(), y.end()))}})[0]);
        for (std::size_t i = 0; i < 100; ++i) {
            const double r = static_cast<float>(y[i]) - static_cast<float>(x[i]);
            CHECK(std::abs(got[i] - (std::abs(r) <= 1 ? 0.5 * r * r : std::abs(r) - 0.5)) <= 1e-6);
        }
        // Not ported: TestHuberLossOp1 and 2 are defined with def, not class, so never run.
    }
    // test_smooth_l1_loss_op.py: X, Y random (float32), sigma 3; Op2 with both weights.
    for (bool weights : {false, true}) {
        INFO((weights ? "TestSmoothL1LossOp2" : "TestSmoothL1LossOp1"));
        const Shape s = weights ? Shape{5, 10} : Shape{5, 20};
        const auto n = static_cast<std::size_t>(s.numel());
        std::vector<float> x, y, iw, ow;
        for (double v : uniform(n, 43, 0, 1)) x.push_back(static_cast<float>(v));
        for (double v : uniform(n, 44, 0, 1)) y.push_back(static_cast<float>(v));
        for (double v : uniform(n, 45, 0, 1)) iw.push_back(static_cast<float>(v));
        for (double v : uniform(n, 46, 0, 1)) ow.push_back(static_cast<float>(v));
        Program p;
        auto xv = p.input<float>("x", s);
        auto yv = p.input<float>("y", s);
        auto iv = p.input<float>("iw", s);
        auto ov = p.input<float>("ow", s);
        auto out = weights ? smooth_l1_loss(xv, yv, iv, ov, 3.0) : smooth_l1_loss(xv, yv, 3.0);
        Session<cpu> sess(p);
        std::vector<Feed> feeds{{xv, tensor_of<float>(s, x)}, {yv, tensor_of<float>(s, y)}};
        if (weights) feeds.insert(feeds.end(), {Feed(iv, tensor_of<float>(s, iw)), Feed(ov, tensor_of<float>(s, ow))});
        const auto got = values_of<float>(sess.eval(std::vector<TargetRef>{out}, feeds)[0]);
        const std::int64_t cols = s[1];
        for (std::int64_t r = 0; r < 5; ++r) {
            double want = 0;
            for (std::int64_t c = 0; c < cols; ++c) {
                const auto i = static_cast<std::size_t>(r * cols + c);
                const double d = (static_cast<double>(x[i]) - y[i]) * (weights ? iw[i] : 1.0f), a = std::abs(d);
                want += (a < 1.0 / 9 ? 0.5 * d * d * 9 : a - 0.5 / 9) * (weights ? ow[i] : 1.0f);
            }
            CHECK(std::abs(got[static_cast<std::size_t>(r)] - want) <= 1e-5);
        }
    }
    // test_kldiv_loss_op.py: X, Target uniform(-10, 10) float64.
    struct kl_class {
        const char* name;
        Shape shape;
        const char* reduction;
    };
    const kl_class kls[] = {{"TestKLDivLossOp", {4, 5, 5}, "batchmean"},
                            {"TestKLDivLossOp2", {3, 2, 7, 7}, "none"},
                            {"TestKLDivLossOp3", {2, 3, 5, 7, 9}, "mean"},
                            {"TestKLDivLossOp4", {5, 20}, "sum"}};
    unsigned seed = 51;
    for (const auto& c : kls) {
        INFO(c.name);
        const auto n = static_cast<std::size_t>(c.shape.numel());
        const auto x = uniform(n, seed++, -10, 10), t = uniform(n, seed++, -10, 10);
        Program p;
        auto xv = p.input<double>("x", c.shape);
        auto tv = p.input<double>("t", c.shape);
        auto loss = kl_div(xv, tv, c.reduction);
        Session<cpu> s(p);
        const auto got = values_of<double>(s.eval({loss}, {{xv, tensor_of<double>(c.shape, x)}, {tv, tensor_of<double>(c.shape, t)}})[0]);
        // The class's kldiv_loss: np.where(target >= 0, target * (log(target) - x), 0).
        std::vector<double> el;
        double sum = 0;
        for (std::size_t i = 0; i < n; ++i) {
            el.push_back(t[i] >= 0 ? t[i] * (std::log(t[i]) - x[i]) : 0.0);
            sum += el.back();
        }
        const std::string r = c.reduction;
        if (r == "none") check_close(got, el, 1e-14);
        else check_close(got, {r == "sum" ? sum : r == "mean" ? sum / static_cast<double>(n) : sum / static_cast<double>(c.shape[0])}, 1e-12);
    }
    // Not ported: TestKLDivLossDygraph's 0-D case (no 0-D tensors) and the type promotion class (dlgraph's ops take one dtype).
}
