// dropout and increment: the mask's statistics and both implementations,
// reproducibility from a seed (and masks that differ per step), is_test,
// gradients by central differences with a fixed mask, the errors.
#include "grad_check.hpp"

#include <cmath>

using namespace dlgraph;
using grad_check::random;
using P = Program;
using V = std::vector<Var<double>>;

namespace {

// The dropout op of a program, its Out and Mask.
struct dropout_net {
    Program p;
    Var<float> x, y;
    std::string mask;
    explicit dropout_net(const Dropout& o, const Shape& s = {1000, 100}) {
        x = p.input<float>("x", s);
        y = dropout(x, "drop", o);
        for (auto& op : p.desc().blocks[0].ops)
            if (op.type == "dropout") mask = op.output("Mask")->arguments[0];
    }
};

Tensor ones(const Shape& s) {
    Tensor t(DataType::FP32, s);
    for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 1.0f + static_cast<float>(i % 7);
    return t;
}

}  // namespace

TEST_CASE("dropout zeroes elements with its probability, both implementations") {
    for (const char* impl : {"downgrade_in_infer", "upscale_in_train"}) {
        for (double prob : {0.0, 0.3, 0.75, 1.0}) {
            INFO(impl << " p " << prob);
            dropout_net n({prob, impl, false, 42});
            Session<cpu> s(n.p);
            const Tensor x = ones({1000, 100});
            const auto out = s.eval(std::vector<TargetRef>{n.y, TargetRef(n.mask)}, std::vector<Feed>{{"x", x}});
            const float scale = std::string(impl) == "upscale_in_train" && prob < 1 ? static_cast<float>(1 / (1 - prob)) : 1.0f;
            std::int64_t kept = 0;
            bool exact = true;
            for (std::int64_t i = 0; i < x.numel(); ++i) {
                const bool keep = out[1].data<bool>()[i];
                kept += keep;
                exact = exact && out[0].data<float>()[i] == (keep ? x.data<float>()[i] * scale : 0.0f);
            }
            CHECK(exact);
            const double share = static_cast<double>(kept) / static_cast<double>(x.numel());
            CHECK(std::abs(share - (1 - prob)) <= 0.006);  // 100,000 draws: sd at most 0.0016
        }
    }
}

TEST_CASE("dropout with a seed: masks differ per step and reproduce in a new session") {
    auto masks = [](int steps) {
        dropout_net n({0.5, "upscale_in_train", false, 7}, {64});
        Session<cpu> s(n.p);
        std::vector<std::vector<bool>> r;
        for (int i = 0; i < steps; ++i) {
            const Tensor m = s.eval(std::vector<TargetRef>{TargetRef(n.mask)}, std::vector<Feed>{{"x", ones({64})}})[0];
            r.emplace_back(m.data<bool>(), m.data<bool>() + 64);
        }
        return r;
    };
    const auto a = masks(3), b = masks(3);
    CHECK(a == b);
    CHECK(a[0] != a[1]);
    CHECK(a[1] != a[2]);

    // Without a seed, a fresh mask source each run; with fix_seed, Paddle's
    // fixed mask.
    Program p;
    auto x = p.input<float>("x", {256});
    std::vector<std::vector<std::string>> names;
    p.append("dropout", {{"X", {x.name()}}}, {{"Out", 1}, {"Mask", 1}}, {}, &names);
    p.append("dropout", {{"X", {x.name()}}}, {{"Out", 1}, {"Mask", 1}},
             {Attribute::make_bool("fix_seed", true), Attribute::make_int("seed", 5)}, &names);
    Session<cpu> s(p);
    const std::string free_mask = p.desc().blocks[0].ops[0].output("Mask")->arguments[0];
    const std::string fixed_mask = p.desc().blocks[0].ops[1].output("Mask")->arguments[0];
    auto run = [&](const std::string& m) {
        const Tensor t = s.eval(std::vector<TargetRef>{TargetRef(m)}, std::vector<Feed>{{"x", ones({256})}})[0];
        return std::vector<bool>(t.data<bool>(), t.data<bool>() + 256);
    };
    CHECK(run(free_mask) != run(free_mask));  // 2^-256 to be equal
    CHECK(run(fixed_mask) == run(fixed_mask));
}

TEST_CASE("dropout at test time: the expected value, no zeroing") {
    for (const char* impl : {"downgrade_in_infer", "upscale_in_train"}) {
        dropout_net n({0.25, impl, true, 0}, {5, 3});
        Session<cpu> s(n.p);
        const Tensor x = ones({5, 3});
        const Tensor y = s.eval(std::vector<TargetRef>{n.y}, std::vector<Feed>{{"x", x}})[0];
        const float scale = std::string(impl) == "downgrade_in_infer" ? 0.75f : 1.0f;
        for (std::int64_t i = 0; i < x.numel(); ++i) CHECK(y.data<float>()[i] == x.data<float>()[i] * scale);
    }
}

TEST_CASE("dropout gradients match finite differences with a fixed mask") {
    for (const char* impl : {"downgrade_in_infer", "upscale_in_train"})
        for (double prob : {0.0, 0.4, 1.0}) {
            INFO(impl << " p " << prob);
            grad_check::check({{"x", random({6, 7}, 3)}}, [&](P& p, const V& in) {
                std::vector<std::vector<std::string>> names;
                const int idx = p.append("dropout", {{"X", {in[0].name()}}}, {{"Out", 1}, {"Mask", 1}},
                                         {Attribute::make_float("dropout_prob", prob), Attribute::make_bool("fix_seed", true),
                                          Attribute::make_int("seed", 11),
                                          Attribute::make_string("dropout_implementation", impl)},
                                         &names);
                return square(Var<double>(p.state(), names[0][0], idx));
            });
        }
}

TEST_CASE("increment adds step to a one-element counter") {
    Program p;
    auto c = p.parameter<std::int64_t>("c", {1}, init::constant(3), false);
    p.append("increment", {{"X", {c.name()}}}, {}, {Attribute::make_float("step", 2.0)}, nullptr, {{"Out", {c.name()}}});
    Session<cpu> s(p);
    for (int i = 0; i < 3; ++i) s.eval(std::vector<TargetRef>{TargetRef(std::string("c"), 1)}, std::vector<Feed>{});
    CHECK(s.scope().var("c").get<Tensor>().data<std::int64_t>()[0] == 9);
    auto v = p.input<float>("v", {2});
    CHECK_THROWS_CONTAINING(p.append("increment", {{"X", {v.name()}}}, {{"Out", 1}}, {}), shape_error,
                            "X is [2]: it must hold one value");
}

TEST_CASE("increment is defined for every counter and step: an integer wraps, a step out of range saturates") {
    Program p;
    auto x = p.input<std::int32_t>("x", {1});
    p.append("increment", {{"X", {x.name()}}}, {{"Out", 1}}, {Attribute::make_float("step", 1.0)});
    p.append("increment", {{"X", {x.name()}}}, {{"Out", 1}}, {Attribute::make_float("step", 1e10)});
    Session<cpu> s(p);
    const auto& ops = p.desc().blocks[0].ops;
    const TargetRef plus_one(ops[0].outputs[0].arguments[0]), plus_huge(ops[1].outputs[0].arguments[0]);
    const xt::xarray<std::int32_t> top = {2147483647}, zero = {0};
    CHECK(s.eval(plus_one, {{"x", top}}).data<std::int32_t>()[0] == -2147483647 - 1);  // wraps
    CHECK(s.eval(plus_huge, {{"x", zero}}).data<std::int32_t>()[0] == 2147483647);    // 1e10 saturates
}

TEST_CASE("dropout: the errors") {
    Program p;
    auto x = p.input<float>("x", {4, 4});
    CHECK_THROWS_CONTAINING(dropout(x, "d", {1.5}), shape_error, "dropout_prob must be in [0, 1], not 1.5");
    CHECK_THROWS_CONTAINING(dropout(x, "d", {0.5, "scale_up"}), shape_error,
                            "dropout_implementation must be downgrade_in_infer or upscale_in_train, not 'scale_up'");
    auto seed = p.input<std::int32_t>("seed", {2});
    CHECK_THROWS_CONTAINING(p.append("dropout", {{"X", {x.name()}}, {"Seed", {seed.name()}}}, {{"Out", 1}}, {}),
                            shape_error, "Seed is [2]: it must hold one value");
    // Without a Mask there is no gradient.
    auto w = p.parameter<float>("w", {4, 4}, init::constant(1));
    std::vector<std::vector<std::string>> names;
    const int idx = p.append("dropout", {{"X", {w.name()}}}, {{"Out", 1}}, {}, &names);
    auto loss = mean(Var<float>(p.state(), names[0][0], idx));
    CHECK_THROWS_CONTAINING(append_backward(loss), graph_error, "dropout's gradient reads its Mask output");
    auto m = p.input<bool>("m", {4, 4});
    auto d = p.input<float>("d", {4, 4});
    CHECK_THROWS_CONTAINING(p.append("dropout_grad", {{"Mask", {m.name()}}, {"Out@GRAD", {d.name()}}}, {{"X@GRAD", 1}},
                                     {Attribute::make_bool("is_test", true)}),
                            shape_error, "dropout_grad is for training: is_test must be false");
}
