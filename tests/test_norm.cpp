// batch_norm: training (batch statistics, moving averages, saved mean and
// inverse std) and the moving-statistics modes against a double-precision
// reference; gradients against central finite differences; the errors.
#include <dlgraph/checkpoint.hpp>
#include <dlgraph/optimizer.hpp>

#include "grad_check.hpp"

#include <cmath>

using namespace dlgraph;
using grad_check::random;
using P = Program;
using V = std::vector<Var<double>>;

namespace {

struct bn_reference {
    xt::xarray<double> y;
    std::vector<double> mean, var, inv;  // batch statistics (biased variance), 1 / sqrt(var + eps)
};

// x [N, C, ...]: per channel over N and the spatial dims.
bn_reference batch_norm_reference(const xt::xarray<double>& x, const std::vector<double>& scale,
                                  const std::vector<double>& bias, double eps, const std::vector<double>* moving_mean,
                                  const std::vector<double>* moving_var) {
    const std::size_t n = x.shape()[0], c = x.shape()[1], hw = x.size() / (n * c);
    bn_reference r;
    r.y = xt::zeros_like(x);
    for (std::size_t k = 0; k < c; ++k) {
        double s = 0, q = 0;
        for (std::size_t b = 0; b < n; ++b)
            for (std::size_t i = 0; i < hw; ++i) s += x.data()[(b * c + k) * hw + i];
        const double mu = s / double(n * hw);
        for (std::size_t b = 0; b < n; ++b)
            for (std::size_t i = 0; i < hw; ++i) q += std::pow(x.data()[(b * c + k) * hw + i] - mu, 2);
        const double var = q / double(n * hw);
        r.mean.push_back(mu);
        r.var.push_back(var);
        const double m = moving_mean ? (*moving_mean)[k] : mu, v = moving_var ? (*moving_var)[k] : var;
        r.inv.push_back(1 / std::sqrt(v + eps));
        for (std::size_t b = 0; b < n; ++b)
            for (std::size_t i = 0; i < hw; ++i) {
                const std::size_t at = (b * c + k) * hw + i;
                r.y.data()[at] = (x.data()[at] - m) / std::sqrt(v + eps) * scale[k] + bias[k];
            }
    }
    return r;
}

std::vector<double> values(std::size_t n, double lo, double hi, unsigned seed) {
    const auto a = random({n}, seed, lo, hi);
    return std::vector<double>(a.begin(), a.end());
}

template <class T> std::vector<double> as_doubles(const Tensor& t) {
    std::vector<double> v;
    for (std::int64_t i = 0; i < t.numel(); ++i) v.push_back(static_cast<double>(t.data<T>()[i]));
    return v;
}

// One training step of batch_norm in T on x; checks Y, the moving
// statistics and the saved ones against the reference.
template <class T> void check_training(const xt::xarray<double>& x, double momentum, double eps) {
    const std::size_t c = x.shape()[1];
    const auto scale = values(c, 0.5, 2, 1), bias = values(c, -1, 1, 2);
    const auto mean0 = values(c, -0.5, 0.5, 3), var0 = values(c, 0.5, 1.5, 4);
    Program p;
    auto xv = p.input<T>("x", Shape(x.shape().begin(), x.shape().end()));
    auto y = batch_norm(xv, "bn", {momentum, eps});
    Session<cpu> s(p);
    auto set = [&](const std::string& name, const std::vector<double>& v) {
        Tensor t(dtype_of<T>, Shape{std::int64_t(v.size())});
        for (std::size_t i = 0; i < v.size(); ++i) t.data<T>()[i] = static_cast<T>(v[i]);
        s.eval(std::vector<TargetRef>{TargetRef("bn.scale")}, std::vector<Feed>{});  // initialize
        s.scope().var(name).get_mutable<Tensor>() = t;
    };
    set("bn.scale", scale);
    set("bn.bias", bias);
    set("bn.mean", mean0);
    set("bn.variance", var0);
    Tensor xt(dtype_of<T>, Shape(x.shape().begin(), x.shape().end()));
    for (std::size_t i = 0; i < x.size(); ++i) xt.data<T>()[i] = static_cast<T>(x.data()[i]);
    const auto& op = p.desc().blocks[0].ops.back();
    const std::string saved_mean = op.output("SavedMean")->arguments[0], saved_inv = op.output("SavedVariance")->arguments[0];
    const auto out = s.eval(std::vector<TargetRef>{y, TargetRef(saved_mean), TargetRef(saved_inv)},
                            std::vector<Feed>{{"x", xt}});
    const bn_reference want = batch_norm_reference(x, scale, bias, eps, nullptr, nullptr);
    const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
    const auto got_y = as_doubles<T>(out[0]);
    for (std::size_t i = 0; i < x.size(); ++i) CHECK(got_y[i] == doctest::Approx(want.y.data()[i]).epsilon(tol).scale(1));
    const auto got_mean = as_doubles<T>(s.scope().var("bn.mean").get<Tensor>());
    const auto got_var = as_doubles<T>(s.scope().var("bn.variance").get<Tensor>());
    const auto got_saved_mean = as_doubles<T>(out[1]), got_saved_inv = as_doubles<T>(out[2]);
    for (std::size_t k = 0; k < c; ++k) {
        CHECK(got_mean[k] == doctest::Approx(mean0[k] * momentum + want.mean[k] * (1 - momentum)).epsilon(tol).scale(1));
        CHECK(got_var[k] == doctest::Approx(var0[k] * momentum + want.var[k] * (1 - momentum)).epsilon(tol).scale(1));
        CHECK(got_saved_mean[k] == doctest::Approx(want.mean[k]).epsilon(tol).scale(1));
        CHECK(got_saved_inv[k] == doctest::Approx(want.inv[k]).epsilon(tol));
    }
}

}  // namespace

TEST_CASE("batch_norm trains with batch statistics and updates the moving ones, FP32 and FP64") {
    for (auto shape : {std::vector<std::size_t>{4, 3}, {2, 3, 5, 4}, {3, 2, 7}, {1, 4, 3, 3}, {5, 2, 1, 1, 3}}) {
        INFO("X " << xt::adapt(shape));
        const auto x = random(shape, 7, -2, 3);
        check_training<double>(x, 0.9, 1e-5);
        check_training<float>(x, 0.7, 1e-3);
    }
}

TEST_CASE("batch_norm with the moving statistics: is_test and use_global_stats") {
    const auto x = random({3, 2, 4, 4}, 9);
    for (BatchNorm o : {BatchNorm{0.9, 1e-5, true, false}, BatchNorm{0.9, 1e-5, false, true}}) {
        Program p;
        auto xv = p.input<double>("x", {3, 2, 4, 4});
        auto y = batch_norm(xv, "bn", o);
        Session<cpu> s(p);
        s.eval(std::vector<TargetRef>{TargetRef("bn.scale")}, std::vector<Feed>{});
        const std::vector<double> m{0.25, -0.5}, v{2.0, 0.5}, one{1, 1}, zero{0, 0};
        Tensor mt(DataType::FP64, {2}), vt(DataType::FP64, {2});
        std::copy(m.begin(), m.end(), mt.data<double>());
        std::copy(v.begin(), v.end(), vt.data<double>());
        s.scope().var("bn.mean").get_mutable<Tensor>() = mt;
        s.scope().var("bn.variance").get_mutable<Tensor>() = vt;
        const xt::xarray<double> got = s.eval(y, {{xv, x}});
        const bn_reference want = batch_norm_reference(x, one, zero, 1e-5, &m, &v);
        CHECK(xt::allclose(got, want.y, 1e-12, 1e-12));
        // Nothing is updated.
        CHECK(as_doubles<double>(s.scope().var("bn.mean").get<Tensor>()) == m);
        CHECK(as_doubles<double>(s.scope().var("bn.variance").get<Tensor>()) == v);
    }
}

TEST_CASE("batch_norm gradients match finite differences, batch and moving statistics") {
    for (bool global : {false, true}) {
        INFO("use_global_stats " << global);
        for (auto shape : {std::vector<std::size_t>{5, 3}, {2, 3, 3, 2}, {3, 2, 5}}) {
            const std::size_t c = shape[1];
            grad_check::check({{"x", random(shape, 11, -2, 2)}, {"s", random({c}, 12, 0.5, 1.5)}, {"b", random({c}, 13)}},
                              [&](P& p, const V& in) {
                                  const Shape cs{std::int64_t(c)};
                                  auto mean = p.parameter<double>("m", cs, init::constant(0.3), false);
                                  auto var = p.parameter<double>("v", cs, init::constant(1.7), false);
                                  std::vector<std::vector<std::string>> names;
                                  const int idx = p.append(
                                      "batch_norm",
                                      {{"X", {in[0].name()}}, {"Scale", {in[1].name()}}, {"Bias", {in[2].name()}},
                                       {"Mean", {mean.name()}}, {"Variance", {var.name()}}},
                                      {{"Y", 1}, {"SavedMean", 1}, {"SavedVariance", 1}},
                                      {Attribute::make_bool("use_global_stats", global)}, &names,
                                      {{"MeanOut", {mean.name()}}, {"VarianceOut", {var.name()}}});
                                  // A product with x, so the gradient's x - mean terms matter.
                                  return Var<double>(p.state(), names[0][0], idx) * in[0];
                              });
        }
    }
}

TEST_CASE("batch_norm: MomentumTensor overrides momentum, one value per channel passes X through") {
    Program p;
    auto x = p.input<double>("x", {-1, 2});
    auto y = batch_norm(x, "bn");
    auto mt = p.input<double>("momentum", {1});
    p.edit([&](ProgramDesc& d) { d.blocks[0].ops.back().set_input("MomentumTensor", {mt.name()}); });
    Session<cpu> s(p);
    xt::xarray<double> xv = {{3.0, -4.0}, {1.0, 0.0}};
    s.eval(y, {{x, xv}, {mt, xt::xarray<double>{0.25}}});
    const auto mean = as_doubles<double>(s.scope().var("bn.mean").get<Tensor>());
    CHECK(mean == std::vector<double>{1.5, -1.5});  // 0 * 0.25 + batch mean * 0.75
    // N * HW == 1 (and an empty batch): Y is X and the moving statistics stay (Paddle's special case).
    for (const xt::xarray<double>& one : {xt::xarray<double>{{3.0, -4.0}}, xt::xarray<double>::from_shape({0, 2})}) {
        const xt::xarray<double> got = s.eval(y, {{x, one}, {mt, xt::xarray<double>{0.5}}});
        CHECK(got == one);
        CHECK(as_doubles<double>(s.scope().var("bn.mean").get<Tensor>()) == std::vector<double>{1.5, -1.5});
        CHECK(as_doubles<double>(s.scope().var("bn.variance").get<Tensor>()) == std::vector<double>{1.0, 3.25});  // 1 * 0.25 + batch variance * 0.75
    }
}

TEST_CASE("batch_norm's moving statistics are persistable and saved in checkpoints") {
    test_temp_dir dir;
    Program p;
    auto x = p.input<float>("x", {-1, 2, 3, 3});
    auto label = p.input<std::int64_t>("label", {-1, 1});
    auto f = p.parameter<float>("f", {2, 2, 3, 3}, init::uniform(-0.5, 0.5, 1));
    auto h = relu(batch_norm(conv2d(x, f, {{1, 1}, {1, 1}}), "bn1"));
    auto w = p.parameter<float>("w", {18, 2}, init::uniform(-0.5, 0.5, 2));
    auto loss = mean(softmax_with_cross_entropy(matmul(flatten(h), w), label).second);
    auto step = SGD(0.1).minimize(loss);
    Session<cpu> s(p);
    Tensor xt(DataType::FP32, {4, 2, 3, 3}), lt(DataType::INT64, {4, 1});
    for (int i = 0; i < xt.numel(); ++i) xt.data<float>()[i] = static_cast<float>((i * 7) % 11) / 5.0f - 1.0f;
    for (int i = 0; i < 4; ++i) lt.data<std::int64_t>()[i] = i % 2;
    for (int it = 0; it < 3; ++it) s.eval(step.targets(), std::vector<Feed>{{"x", xt}, {"label", lt}});
    CHECK(p.desc().blocks[0].find_var("bn1.mean")->persistable);
    CHECK(!p.is_trainable("bn1.mean"));
    CHECK(p.is_trainable("bn1.scale"));
    save_checkpoint(s, dir.file("ckpt"));
    const Tensor& m = s.scope().var("bn1.mean").get<Tensor>();
    CHECK(m.data<float>()[0] != 0.0f);  // updated by training
    Session<cpu> t(load_program_file(dir.file("ckpt") + "/program.json"));
    load_checkpoint(t, dir.file("ckpt"));
    const Tensor& m2 = t.scope().var("bn1.mean").get<Tensor>();
    CHECK(std::memcmp(m.raw(), m2.raw(), m.bytes()) == 0);
}

TEST_CASE("batch_norm shared by name: a test branch on the training branch's statistics") {
    Program p;
    auto x = p.input<double>("x", {-1, 2, 3, 3});
    auto label = p.input<std::int64_t>("label", {-1, 1});
    auto f = p.parameter<double>("f", {2, 2, 3, 3}, init::uniform(-0.5, 0.5, 1));
    auto w = p.parameter<double>("w", {18, 2}, init::uniform(-0.5, 0.5, 2));
    auto net = [&](bool training) {
        auto h = relu(batch_norm(conv2d(x, f, {{1, 1}, {1, 1}}), "bn", BatchNorm{.is_test = !training}));
        return matmul(flatten(h), w);
    };
    auto test = net(false);  // first: see batch_norm's comment
    const std::size_t test_ops = p.op_count();
    auto loss = mean(softmax_with_cross_entropy(net(true), label).second);
    auto step = SGD(0.1).minimize(loss);
    // One set of parameters and statistics.
    std::size_t bn_vars = 0;
    for (auto& v : p.desc().blocks[0].vars) bn_vars += v.persistable && v.name.starts_with("bn.");
    CHECK(bn_vars == 4);
    // The test branch writes no statistics.
    for (auto& op : p.desc().blocks[0].ops)
        if (op.type == "batch_norm" && op.attr("is_test")->b) CHECK(op.outputs.size() == 1);

    Session<cpu> s(p);
    xt::xarray<double> xv = random({4, 2, 3, 3}, 5);
    xt::xarray<std::int64_t> lv = xt::zeros<std::int64_t>({4, 1});
    lv(1, 0) = lv(2, 0) = 1;
    const std::vector<Feed> feeds{{"x", xv}, {"label", lv}};
    // A training step runs none of the test branch's ops.
    for (auto& st : s.plan(step.targets(), std::vector<std::string>{"x", "label"}).steps)
        CHECK(st.op_index >= static_cast<int>(test_ops));
    for (int it = 0; it < 3; ++it) s.eval(step.targets(), feeds);
    auto stored = [&](const char* name) { return to_xarray<double>(s.scope().var(name).get<Tensor>()); };
    const xt::xarray<double> mean_after = stored("bn.mean"), var_after = stored("bn.variance");
    CHECK(mean_after(0) != 0.0);
    // Evaluating the test branch updates nothing and repeats, and it
    // normalizes with the statistics the training kept.
    const xt::xarray<double> y1 = s.eval(test, {{x, xv}}), y2 = s.eval(test, {{x, xv}});
    CHECK(y1 == y2);
    CHECK(stored("bn.mean") == mean_after);
    CHECK(stored("bn.variance") == var_after);
    const xt::xarray<double> fv = stored("f"), wv = stored("w"), scale = stored("bn.scale"), bias = stored("bn.bias");
    const std::vector<double> m(mean_after.begin(), mean_after.end()), v(var_after.begin(), var_after.end());
    const std::vector<double> sc(scale.begin(), scale.end()), bi(bias.begin(), bias.end());
    Program q;  // the same test branch alone, as a reference
    auto qx = q.input<double>("x", {-1, 2, 3, 3});
    auto qf = q.input<double>("f", {2, 2, 3, 3});
    auto conv = q.rename(conv2d(qx, qf, {{1, 1}, {1, 1}}), "conv");
    Session<cpu> r(q);
    const xt::xarray<double> c = r.eval(conv, {{qx, xv}, {qf, fv}});
    const bn_reference want = batch_norm_reference(c, sc, bi, 1e-5, &m, &v);
    const xt::xarray<double> h = xt::reshape_view(xt::eval(xt::maximum(want.y, 0.0)), {4, 18});
    xt::xarray<double> y = xt::zeros<double>({4, 2});
    for (std::size_t i = 0; i < 4; ++i)
        for (std::size_t j = 0; j < 2; ++j)
            for (std::size_t k = 0; k < 18; ++k) y(i, j) += h(i, k) * wv(k, j);
    CHECK(xt::allclose(y1, y, 1e-12, 1e-12));
}

TEST_CASE("batch_norm: a NAME shared with another kind of variable is an error") {
    Program p;
    auto x = p.input<float>("x", {-1, 3, 4, 4});
    p.parameter<float>("bn.scale", {4}, init::constant(1));
    CHECK_THROWS_CONTAINING(batch_norm(x, "bn"), graph_error,
                            "variable 'bn.scale' is already declared as FP32 [4]: it cannot be shared as the parameter [3]");
    p.input<float>("bn2.scale", {3});
    CHECK_THROWS_CONTAINING(batch_norm(x, "bn2"), graph_error, "not persistable");
    auto xd = p.input<double>("xd", {-1, 3, 4, 4});
    batch_norm(x, "bn3");
    CHECK_THROWS_AS(batch_norm(xd, "bn3"), type_error);
}

TEST_CASE("batch_norm: the errors") {
    Program p;
    auto x = p.input<float>("x", {-1, 3, 4, 4});
    auto s = p.parameter<float>("s", {4}, init::constant(1));
    auto b = p.parameter<float>("b", {3}, init::constant(0));
    auto m = p.parameter<float>("m", {3}, init::constant(0), false);
    auto v = p.parameter<float>("v", {3}, init::constant(1), false);
    auto append = [&](const std::string& scale, std::vector<Attribute> at = {}) {
        return p.append("batch_norm",
                        {{"X", {x.name()}}, {"Scale", {scale}}, {"Bias", {b.name()}}, {"Mean", {m.name()}},
                         {"Variance", {v.name()}}},
                        {{"Y", 1}}, std::move(at));
    };
    CHECK_THROWS_CONTAINING(append(s.name()), shape_error, "Scale is [4] but X is [-1,3,4,4]: it must be [C] = [3]");
    CHECK_THROWS_CONTAINING(append(b.name(), {Attribute::make_string("data_layout", "NHWC")}), shape_error,
                            "Scale is [3] but X is [-1,3,4,4]: it must be [C] = [4]");  // channels last: 4
    CHECK_THROWS_CONTAINING(append(b.name(), {Attribute::make_string("data_layout", "HWCN")}), shape_error,
                            "data_layout must be NCHW or NHWC, not 'HWCN'");
    CHECK_THROWS_CONTAINING(append(b.name(), {Attribute::make_float("epsilon", 0.5)}), shape_error,
                            "epsilon must be in [0, 0.001]");
    append(b.name(), {Attribute::make_float("epsilon", double(0.001f))});  // Paddle's float 0.001 is accepted
    auto flat = p.input<float>("flat", {5});
    CHECK_THROWS_CONTAINING(batch_norm(flat, "bn"), shape_error, "it needs rank >= 2");
    auto xd = p.input<double>("xd", {2, 3});
    CHECK_THROWS_CONTAINING(p.append("batch_norm",
                                     {{"X", {xd.name()}}, {"Scale", {b.name()}}, {"Bias", {b.name()}},
                                      {"Mean", {m.name()}}, {"Variance", {v.name()}}},
                                     {{"Y", 1}}, {}),
                            type_error, "Scale is FP32 but X is FP64");
}
