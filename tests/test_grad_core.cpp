// Gradients: append_backward's rewrite (names, sums over fan-out, pruning to
// the loss, stop_gradient, integer inputs) and the unary/scale/assign grads
// against finite differences.
#include "grad_check.hpp"

using namespace dlgraph;
using grad_check::random;

TEST_CASE("unary op gradients match finite differences") {
    // Inputs away from the kinks and singularities of each function.
    auto pos = random({3, 5}, 1, 0.2, 2.0);
    auto mixed = random({3, 5}, 2, -2.0, 2.0);
    for (auto& v : mixed) v += (v >= 0 ? 0.1 : -0.1);
    grad_check::check({{"x", mixed}}, [](Program&, auto& x) { return relu(x[0]); });
    grad_check::check({{"x", mixed}}, [](Program&, auto& x) { return sigmoid(x[0]); });
    grad_check::check({{"x", mixed}}, [](Program&, auto& x) { return tanh(x[0]); });
    grad_check::check({{"x", mixed}}, [](Program&, auto& x) { return exp(x[0]); });
    grad_check::check({{"x", pos}}, [](Program&, auto& x) { return log(x[0]); });
    grad_check::check({{"x", pos}}, [](Program&, auto& x) { return sqrt(x[0]); });
    grad_check::check({{"x", mixed}}, [](Program&, auto& x) { return abs(x[0]); });
    grad_check::check({{"x", mixed}}, [](Program&, auto& x) { return square(x[0]); });
    grad_check::check({{"x", mixed}}, [](Program&, auto& x) { return scale(x[0], -2.5, 3.0); });
    grad_check::check({{"x", mixed}}, [](Program&, auto& x) { return scale(x[0], 0.5, 1.0, false); });
    grad_check::check({{"x", mixed}}, [](Program&, auto& x) { return assign(x[0]); });
    // Odd sizes cross the SIMD width and leave a scalar tail.
    grad_check::check({{"x", random({37}, 3)}}, [](Program&, auto& x) { return tanh(sigmoid(x[0])); });
}

TEST_CASE("a variable read by several ops gets its gradient contributions summed") {
    auto xv = random({4}, 5);
    // y = tanh(x) + exp(x) + x * 3: x fans out to three ops.
    grad_check::check({{"x", xv}}, [](Program&, auto& x) { return tanh(x[0]) + exp(x[0]) * 1.0 + x[0] * 3.0; });

    Program p;
    auto w = p.parameter<double>("w", {4}, init::constant(1));
    auto loss = reduce_sum(tanh(w) + exp(w));
    auto grads = append_backward(loss);
    REQUIRE(grads.size() == 1);
    CHECK(grads[0].second.name() == "w@GRAD");
    const auto& ops = p.desc().blocks[0].ops;
    CHECK(ops[static_cast<std::size_t>(grads[0].second.op())].type == "sum");
    CHECK(p.desc().blocks[0].find_var("w@GRAD@RENAME@0"));
    CHECK(p.desc().blocks[0].find_var("w@GRAD@RENAME@1"));
}

TEST_CASE("only trainable parameters on a path to the loss get gradients") {
    Program p;
    auto x = p.input<double>("x", {3});
    auto w = p.parameter<double>("w", {3}, init::constant(1));
    auto frozen = p.parameter<double>("frozen", {3}, init::constant(2), /*trainable=*/false);
    auto unused = p.parameter<double>("unused", {3}, init::constant(3));
    auto side = exp(unused);  // never reaches the loss
    (void)side;
    auto loss = reduce_sum(x * w * frozen);
    const std::size_t before = p.op_count();
    auto grads = append_backward(loss);
    REQUIRE(grads.size() == 1);
    CHECK(grads[0].first.name() == "w");
    for (std::size_t i = before; i < p.op_count(); ++i) CHECK(p.desc().blocks[0].ops[i].type != "exp_grad");
    CHECK_FALSE(p.desc().blocks[0].find_var("x@GRAD"));
    CHECK_FALSE(p.desc().blocks[0].find_var("frozen@GRAD"));
    // Evaluating the loss does not run the backward pass; the gradient is x * frozen.
    Session<cpu> s(p);
    xt::xarray<double> xv = {1, 2, 3};
    CHECK(s.eval(grads[0].second, {{x, xv}}) == xt::xarray<double>{2, 4, 6});
    CHECK_THROWS_CONTAINING(append_backward(loss), graph_error, "[dlgraph.graph.backward]", "has a backward pass");
}

TEST_CASE("stop_gradient cuts the gradient") {
    Program p;
    auto w = p.parameter<double>("w", {2}, init::constant(2));
    auto h = stop_gradient(square(w));
    auto loss = reduce_sum(h * w);  // d/dw = h = w^2 through the second factor only
    auto grads = append_backward(loss);
    Session<cpu> s(p);
    CHECK(s.eval(grads.at(0).second) == xt::xarray<double>{4, 4});
}

TEST_CASE("the backward pass of a program survives JSON") {
    Program p;
    auto w = p.parameter<double>("w", {3}, init::uniform(-1, 1, 9));
    auto loss = reduce_sum(tanh(w) * w);
    auto grads = append_backward(loss);
    Session<cpu> a(p), b(load_program(p.to_json()));
    CHECK(to_xarray<double>(b.eval(TargetRef("w@GRAD"))) == a.eval(grads[0].second));
}

TEST_CASE("binary element-wise gradients, with broadcasting, match finite differences") {
    auto a = random({2, 3, 4}, 11), b = random({2, 3, 4}, 12);
    auto row = random({4}, 13), col = random({3, 1}, 14), mid = random({3}, 15), one = random({1}, 16);
    auto pos_a = random({2, 3, 4}, 17, 0.5, 2.0), pos_row = random({4}, 18, 0.5, 2.0);
    using P = Program;
    using V = std::vector<Var<double>>;
    for (auto y : {b, row, col, one}) {
        INFO("Y shape " << y.dimension());
        grad_check::check({{"x", a}, {"y", y}}, [](P&, const V& v) { return v[0] + v[1]; });
        grad_check::check({{"x", a}, {"y", y}}, [](P&, const V& v) { return v[0] - v[1]; });
        grad_check::check({{"x", a}, {"y", y}}, [](P&, const V& v) { return v[0] * v[1]; });
        grad_check::check({{"x", a}, {"y", y + 3.0}}, [](P&, const V& v) { return v[0] / v[1]; });
        grad_check::check({{"x", a}, {"y", y + 0.05}}, [](P&, const V& v) { return elementwise_max(v[0], v[1]); });
        grad_check::check({{"x", a}, {"y", y + 0.05}}, [](P&, const V& v) { return elementwise_min(v[0], v[1]); });
    }
    // Broadcasting X onto Y, and both ways at once.
    grad_check::check({{"x", row}, {"y", a}}, [](P&, const V& v) { return v[0] * v[1]; });
    grad_check::check({{"x", col}, {"y", row}}, [](P&, const V& v) { return v[0] - v[1]; });
    // Paddle's axis: Y [3] placed at dim 1 of X [2,3,4].
    grad_check::check({{"x", a}, {"y", mid}}, [](P&, const V& v) { return elementwise_add(v[0], v[1], 1); });
    grad_check::check({{"x", a}, {"y", mid + 2.0}}, [](P&, const V& v) { return elementwise_div(v[0], v[1], 1); });
    // pow needs a positive base for d/dy = out * log(x).
    grad_check::check({{"x", pos_a}, {"y", pos_row}}, [](P&, const V& v) { return elementwise_pow(v[0], v[1]); });
    // The same variable on both sides: its two contributions are summed.
    grad_check::check({{"x", a}}, [](P&, const V& v) { return v[0] * v[0] + v[0]; });
}

TEST_CASE("reduction gradients match finite differences") {
    auto x = random({3, 4, 5}, 21);
    using P = Program;
    using V = std::vector<Var<double>>;
    grad_check::check({{"x", x}}, [](P&, const V& v) { return mean(v[0]); });
    for (auto dims : std::vector<std::vector<std::int64_t>>{{}, {0}, {1}, {-1}, {0, 2}, {1, 2}})
        for (bool keep : {false, true}) {
            INFO("dims " << dims.size() << " keep " << keep);
            grad_check::check({{"x", x}}, [&](P&, const V& v) { return reduce_sum(v[0], dims, keep); });
            grad_check::check({{"x", x}}, [&](P&, const V& v) { return reduce_mean(v[0], dims, keep); });
            grad_check::check({{"x", x}}, [&](P&, const V& v) { return reduce_max(v[0], dims, keep); });
            grad_check::check({{"x", x}}, [&](P&, const V& v) { return reduce_min(v[0], dims, keep); });
            grad_check::check({{"x", x}}, [&](P&, const V& v) { return reduce_prod(v[0], dims, keep); });
        }
}

TEST_CASE("no gradient is made for a parameter that reaches the loss only through a label") {
    Program p;
    auto w = p.parameter<double>("w", {2, 3}, init::uniform(-1, 1, 1));
    auto v = p.parameter<double>("v", {2, 3}, init::uniform(-1, 1, 2));
    auto [prob, loss] = softmax_with_cross_entropy(w, softmax(v), /*soft_label=*/true);
    auto grads = append_backward(mean(loss));
    REQUIRE(grads.size() == 1);
    CHECK(grads[0].first.name() == "w");
    for (auto& op : p.desc().blocks[0].ops) CHECK(op.type != "softmax_grad");
}
