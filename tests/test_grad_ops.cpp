// Gradients of the matrix products, softmax and the losses, and the shape
// ops, against central finite differences in FP64 (grad_check.hpp), for
// every attribute variant; plus the rewrites' structure where it matters
// (which grad ops appear, optional outputs, no gradient into labels).
#include "grad_check.hpp"

using namespace dlgraph;
using grad_check::random;
using P = Program;
using V = std::vector<Var<double>>;

namespace {

// An INT64 tensor of `shape` holding `values` (labels fed next to the inputs).
Tensor int64_tensor(const Shape& shape, const std::vector<std::int64_t>& values) {
    Tensor t(DataType::INT64, shape);
    REQUIRE(static_cast<std::size_t>(t.numel()) == values.size());
    std::copy(values.begin(), values.end(), t.data<std::int64_t>());
    return t;
}
Tensor fp64_tensor(const xt::xarray<double>& a) {
    Tensor t(DataType::FP64, Shape(a.shape().begin(), a.shape().end()));
    std::copy(a.begin(), a.end(), t.data<double>());
    return t;
}
// Random class indices in [0, classes).
std::vector<std::int64_t> random_labels(std::size_t n, std::int64_t classes, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<std::int64_t> d(0, classes - 1);
    std::vector<std::int64_t> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}
// Types of the ops appended by the backward pass (from op `first` on).
std::vector<std::string> op_types_from(const Program& p, std::size_t first) {
    std::vector<std::string> out;
    for (std::size_t i = first; i < p.op_count(); ++i) out.push_back(p.desc().blocks[0].ops[i].type);
    return out;
}
bool contains(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

}  // namespace

TEST_CASE("mul gradients match finite differences") {
    // Plain [M, K] x [K, N] with odd sizes (SIMD tails in the GEMM).
    grad_check::check({{"x", random({3, 5}, 1)}, {"y", random({5, 7}, 2)}},
                      [](P&, const V& v) { return mul(v[0], v[1]); });
    // x_num_col_dims 2: X [2, 3, 4] is a [6, 4] matrix; Out is [2, 3, 5].
    grad_check::check({{"x", random({2, 3, 4}, 3)}, {"y", random({4, 5}, 4)}},
                      [](P&, const V& v) { return mul(v[0], v[1], 2); });
    // x_num_col_dims 1 flattens X [2, 3, 4] to [2, 12]; y_num_col_dims 2
    // flattens Y [3, 4, 5] to [12, 5].
    grad_check::check({{"x", random({2, 3, 4}, 5)}, {"y", random({3, 4, 5}, 6)}},
                      [](P&, const V& v) { return mul(v[0], v[1], 1, 2); });
    // Both at once, Y keeping two trailing dims: Out [2, 3, 2, 3].
    grad_check::check({{"x", random({2, 3, 2, 3}, 7)}, {"y", random({6, 2, 3}, 8)}},
                      [](P&, const V& v) { return mul(v[0], v[1], 2, 1); });
    // The same variable as both operands: two contributions, summed.
    grad_check::check({{"x", random({4, 4}, 9)}}, [](P&, const V& v) { return mul(v[0], v[0]); });
}

TEST_CASE("mul_grad writes only the wanted gradient") {
    Program p;
    auto x = p.input<double>("x", {3, 2});
    auto w = p.parameter<double>("w", {2, 4}, init::uniform(-1, 1, 3));
    auto loss = reduce_sum(mul(x, w));
    const std::size_t first = p.op_count();
    auto grads = append_backward(loss);
    REQUIRE(grads.size() == 1);
    const OpDesc* g = nullptr;
    for (std::size_t i = first; i < p.op_count(); ++i)
        if (p.desc().blocks[0].ops[i].type == "mul_grad") g = &p.desc().blocks[0].ops[i];
    REQUIRE(g);
    CHECK_FALSE(g->output("X@GRAD"));
    CHECK(g->output("Y@GRAD"));
    CHECK_FALSE(g->input("Out"));  // the forward result is not kept for the backward pass
    // d sum(x w) / dw[k][j] = sum_i x[i][k].
    Session<cpu> s(p);
    xt::xarray<double> xv = {{1, 2}, {3, 4}, {5, 6}};
    CHECK(s.eval(grads[0].second, {{x, xv}}) == xt::xarray<double>{{9, 9, 9, 9}, {12, 12, 12, 12}});
}

TEST_CASE("matmul gradients match finite differences for every transpose and alpha") {
    // op(X) is [3, 5], op(Y) is [5, 4]; stored transposed when asked.
    for (bool tx : {false, true})
        for (bool ty : {false, true})
            for (double alpha : {1.0, -0.7}) {
                INFO("transpose_X " << tx << " transpose_Y " << ty << " alpha " << alpha);
                auto x = tx ? random({5, 3}, 11) : random({3, 5}, 11);
                auto y = ty ? random({4, 5}, 12) : random({5, 4}, 12);
                grad_check::check({{"x", x}, {"y", y}},
                                  [&](P&, const V& v) { return matmul(v[0], v[1], tx, ty, alpha); });
                // Batched, both operands with the batch dim.
                auto bx = tx ? random({2, 5, 3}, 13) : random({2, 3, 5}, 13);
                auto by = ty ? random({2, 4, 5}, 14) : random({2, 5, 4}, 14);
                grad_check::check({{"x", bx}, {"y", by}},
                                  [&](P&, const V& v) { return matmul(v[0], v[1], tx, ty, alpha); });
                // Y shared by the batches of X (one tall GEMM per gradient when X is not transposed).
                grad_check::check({{"x", bx}, {"y", y}},
                                  [&](P&, const V& v) { return matmul(v[0], v[1], tx, ty, alpha); });
                // X shared by the batches of Y: X's gradient sums over them.
                grad_check::check({{"x", x}, {"y", by}},
                                  [&](P&, const V& v) { return matmul(v[0], v[1], tx, ty, alpha); });
                // Broadcast on both sides: X [2, 1, ...] with Y [3, ...] gives batches [2, 3].
                auto x4 = tx ? random({2, 1, 5, 3}, 15) : random({2, 1, 3, 5}, 15);
                auto y3 = ty ? random({3, 4, 5}, 16) : random({3, 5, 4}, 16);
                grad_check::check({{"x", x4}, {"y", y3}},
                                  [&](P&, const V& v) { return matmul(v[0], v[1], tx, ty, alpha); });
            }
}

TEST_CASE("matmul gradients with rank-1 operands and unit batch dims") {
    for (bool tx : {false, true})
        for (bool ty : {false, true}) {
            INFO("transpose_X " << tx << " transpose_Y " << ty);
            // Untransposed vectors: X a row, Y a column.
            auto ym = ty ? random({4, 5}, 22) : random({5, 4}, 22);
            auto xm = tx ? random({5, 3}, 23) : random({3, 5}, 23);
            // Vector x matrix: Out [4].
            grad_check::check({{"x", random({5}, 21)}, {"y", ym}},
                              [&](P&, const V& v) { return matmul(v[0], v[1], false, ty, 0.5); });
            // Matrix x vector: Out [3].
            grad_check::check({{"x", xm}, {"y", random({5}, 24)}},
                              [&](P&, const V& v) { return matmul(v[0], v[1], tx, false, 1.5); });
            // Vector x batched matrix: the vector's gradient sums over the batches.
            auto yb = ty ? random({2, 4, 5}, 27) : random({2, 5, 4}, 27);
            grad_check::check({{"x", random({5}, 28)}, {"y", yb}},
                              [&](P&, const V& v) { return matmul(v[0], v[1], false, ty); });
            // Batched matrix x vector.
            auto xb = tx ? random({2, 5, 3}, 29) : random({2, 3, 5}, 29);
            grad_check::check({{"x", xb}, {"y", random({5}, 30)}},
                              [&](P&, const V& v) { return matmul(v[0], v[1], tx, false); });
            // Transposed vectors (Paddle): X a column [3, 1], Y a row [1, 4].
            auto y1 = ty ? random({4, 1}, 33) : random({1, 4}, 33);
            grad_check::check({{"x", random({3}, 34)}, {"y", y1}},
                              [&](P&, const V& v) { return matmul(v[0], v[1], true, ty, 0.5); });
            auto x1 = tx ? random({2, 1, 3}, 35) : random({2, 3, 1}, 35);
            grad_check::check({{"x", x1}, {"y", random({4}, 36)}},
                              [&](P&, const V& v) { return matmul(v[0], v[1], tx, true); });
        }
    // Vector x vector: Out [1]; transposed both, the outer product [3, 4].
    grad_check::check({{"x", random({5}, 25)}, {"y", random({5}, 26)}},
                      [](P&, const V& v) { return matmul(v[0], v[1]); });
    grad_check::check({{"x", random({3}, 37)}, {"y", random({4}, 38)}},
                      [](P&, const V& v) { return matmul(v[0], v[1], true, true); });
    // Unit batch dims on both sides (nothing is summed) and a rank-4 X
    // against a rank-2 Y.
    grad_check::check({{"x", random({1, 3, 5}, 31)}, {"y", random({1, 5, 2}, 32)}},
                      [](P&, const V& v) { return matmul(v[0], v[1]); });
    grad_check::check({{"x", random({2, 3, 3, 5}, 33)}, {"y", random({5, 2}, 34)}},
                      [](P&, const V& v) { return matmul(v[0], v[1], false, false, 2.0); });
    // X [3, 1, 2, 5] and Y [4, 5, 3]: each operand broadcast over the other's batch dim.
    grad_check::check({{"x", random({3, 1, 2, 5}, 35)}, {"y", random({4, 5, 3}, 36)}},
                      [](P&, const V& v) { return matmul(v[0], v[1], false, false, 0.25); });
    // x^T x: the same variable in both slots.
    grad_check::check({{"x", random({4, 3}, 37)}}, [](P&, const V& v) { return matmul(v[0], v[0], true, false); });
}

TEST_CASE("matmul gradients through a long inner dim and through a chain") {
    // K = 300 crosses the GEMM's k blocking (256).
    grad_check::check({{"x", random({2, 300}, 41, -0.2, 0.2)}, {"y", random({300, 3}, 42, -0.2, 0.2)}},
                      [](P&, const V& v) { return matmul(v[0], v[1]); });
    // A two-layer net: tanh(x w1) w2, with a shared batch of inputs.
    grad_check::check({{"w1", random({4, 6}, 43)}, {"w2", random({6, 3}, 44)}}, [](P& p, const V& v) {
        auto x = p.constant<double>(0.5, {5, 4});
        return matmul(tanh(mul(x, v[0])), v[1]);
    });
}

TEST_CASE("softmax gradients match finite differences along any axis") {
    auto x2 = random({3, 7}, 51, -2, 2);
    auto x3 = random({2, 5, 3}, 52, -2, 2);
    auto wide = random({3, 4, 9}, 53, -2, 2);  // inner 9: SIMD batches and a tail across the strided axis
    grad_check::check({{"x", x2}}, [](P&, const V& v) { return softmax(v[0]); });
    grad_check::check({{"x", x2}}, [](P&, const V& v) { return softmax(v[0], 0); });
    grad_check::check({{"x", x2}}, [](P&, const V& v) { return softmax(v[0], -2); });
    for (int axis : {0, 1, 2, -1, -2, -3}) {
        INFO("axis " << axis);
        grad_check::check({{"x", x3}}, [&](P&, const V& v) { return softmax(v[0], axis); });
        grad_check::check({{"x", wide}}, [&](P&, const V& v) { return softmax(v[0], axis); });
    }
    // A long contiguous row (SIMD path of the row dot product).
    grad_check::check({{"x", random({2, 37}, 54, -2, 2)}}, [](P&, const V& v) { return softmax(v[0]); });
}

TEST_CASE("cross_entropy gradients match finite differences") {
    // Probabilities away from 0 so that log and 1/x stay tame under +-eps.
    auto x = random({4, 5}, 61, 0.2, 1.0);
    auto hard = int64_tensor({4, 1}, random_labels(4, 5, 62));
    grad_check::check({{"x", x}}, [](P& p, const V& v) {
        return cross_entropy(v[0], p.input<std::int64_t>("label", {4, 1}));
    }, {{"label", hard}});
    // Soft labels: any non-negative weights (they need not sum to 1 here).
    auto soft = fp64_tensor(random({4, 5}, 63, 0.0, 1.0));
    grad_check::check({{"x", x}}, [](P& p, const V& v) {
        return cross_entropy(v[0], p.input<double>("label", {4, 5}), true);
    }, {{"label", soft}});
    // Rank 3: [2, 3, 5] with labels [2, 3, 1].
    auto x3 = random({2, 3, 5}, 64, 0.2, 1.0);
    auto hard3 = int64_tensor({2, 3, 1}, random_labels(6, 5, 65));
    grad_check::check({{"x", x3}}, [](P& p, const V& v) {
        return cross_entropy(v[0], p.input<std::int64_t>("label", {2, 3, 1}));
    }, {{"label", hard3}});
    auto soft3 = fp64_tensor(random({2, 3, 5}, 66, 0.0, 1.0));
    grad_check::check({{"x", x3}}, [](P& p, const V& v) {
        return cross_entropy(v[0], p.input<double>("label", {2, 3, 5}), true);
    }, {{"label", soft3}});
    // Through softmax, as a classifier would use it.
    grad_check::check({{"z", random({4, 5}, 67, -2, 2)}}, [](P& p, const V& v) {
        return cross_entropy(softmax(v[0]), p.input<std::int64_t>("label", {4, 1}));
    }, {{"label", hard}});
}

TEST_CASE("square_error_cost is (input - label)^2, Paddle's two ops, and its gradient matches finite differences") {
    Program p;
    auto in = p.input<double>("in", {2, 3});
    auto label = p.input<double>("label", {2, 3});
    auto cost = square_error_cost(in, label);
    const auto& ops = p.desc().blocks[0].ops;
    REQUIRE(ops.size() == 2);
    CHECK(ops[0].type == "elementwise_sub");
    CHECK(ops[1].type == "square");
    Session<cpu> s(p);
    const xt::xarray<double> iv = {{1.5, -2, 0}, {3, 0.25, -1}}, lv = {{1, 1, 1}, {-1, 0.25, 2}};
    CHECK(s.eval(cost, {{in, iv}, {label, lv}}) == xt::xarray<double>{{0.25, 9, 1}, {16, 0, 9}});
    grad_check::check({{"x", random({3, 4}, 68, -2, 2)}}, [](P& q, const V& v) {
        return square_error_cost(v[0], q.input<double>("label", {3, 4}));
    }, {{"label", fp64_tensor(random({3, 4}, 69, -1, 1))}});
}

// Paddle's bce_loss: (label - 1) * max(log(1 - x), -100) - label * max(log(x), -100).
TEST_CASE("bce_loss is Paddle's clipped binary cross entropy, its gradient matches finite differences") {
    Program p;
    auto x = p.input<double>("x", {2, 4});
    auto label = p.input<double>("label", {2, 4});
    auto loss = bce_loss(x, label);
    Session<cpu> s(p);
    const xt::xarray<double> xv = {{0.0, 1.0, 0.5, 0.25}, {0.9, 1e-300, 0.125, 0.75}};
    const xt::xarray<double> lv = {{0.0, 1.0, 1.0, 0.0}, {0.3, 1.0, 0.0, 0.5}};
    const xt::xarray<double> got = s.eval(loss, {{x, xv}, {label, lv}});
    for (std::size_t i = 0; i < xv.size(); ++i) {
        const double a = xv.flat(i), l = lv.flat(i);
        const double want = (l - 1) * std::max(std::log(1 - a), -100.0) - l * std::max(std::log(a), -100.0);
        CAPTURE(i);
        CHECK(got.flat(i) == doctest::Approx(want).epsilon(1e-15));
    }
    CHECK(got(0, 0) == 0.0);  // x = 0, label 0: no loss; x = 1, label 1 too
    CHECK(got(0, 1) == 0.0);
    CHECK(got(1, 1) == 100.0);  // log(1e-300) = -690.8, clipped at -100
    // Away from 0 and 1 (the gradient divides by x (1 - x)).
    grad_check::check({{"x", random({3, 5}, 70, 0.05, 0.95)}}, [](P& q, const V& v) {
        return bce_loss(v[0], q.input<double>("label", {3, 5}));
    }, {{"label", fp64_tensor(random({3, 5}, 71, 0.0, 1.0))}});
}

TEST_CASE("bce_loss: an X outside [0, 1] is a clear error and the session keeps working, bad shapes and dtypes") {
    Program p;
    auto x = p.input<float>("x", {-1});
    auto label = p.input<float>("label", {-1});
    auto loss = bce_loss(x, label);
    Session<cpu> s(p);
    const xt::xarray<float> good = {0.25f, 0.5f, 1.0f}, bad = {0.25f, 1.5f, -0.5f}, nan = {0.5f, NAN, 0.5f},
                            lv = {1.0f, 0.0f, 1.0f};
    CHECK_THROWS_CONTAINING(s.eval(loss, {{x, bad}, {label, lv}}), value_error, "[dlgraph.value.prob]",
                            "bce_loss (op #0): X[1] is 1.500000, not a probability: it must be in [0, 1]");
    CHECK_THROWS_CONTAINING(s.eval(loss, {{x, nan}, {label, lv}}), value_error, "[dlgraph.value.prob]", "X[1] is nan");
    CHECK(s.eval(loss, {{x, good}, {label, lv}})(0) == doctest::Approx(-std::log(0.25)));
    const xt::xarray<float> short_label = {1.0f, 0.0f};
    CHECK_THROWS_CONTAINING(s.eval(loss, {{x, good}, {label, short_label}}), shape_error, "[dlgraph.shape.loss]",
                            "X is [3] but Label is [2]: bce_loss takes them of one shape");
    Program q;
    q.input<double>("x", {3});
    q.input<float>("label", {3});
    CHECK_THROWS_CONTAINING(q.append("bce_loss", {{"X", {"x"}}, {"Label", {"label"}}}, {{"Out", 1}}, {}), type_error,
                            "[dlgraph.type.op]", "X is FP64 but Label is FP32");
    q.input<std::int32_t>("xi", {3});
    CHECK_THROWS_CONTAINING(q.append("bce_loss", {{"X", {"xi"}}, {"Label", {"xi"}}}, {{"Out", 1}}, {}), type_error,
                            "[dlgraph.type.op]", "X must be FP32 or FP64, not INT32");
}

TEST_CASE("softmax_with_cross_entropy gradients match finite differences") {
    auto logits = random({4, 6}, 71, -2, 2);
    auto hard = int64_tensor({4, 1}, random_labels(4, 6, 72));
    grad_check::check({{"z", logits}}, [](P& p, const V& v) {
        return softmax_with_cross_entropy(v[0], p.input<std::int64_t>("label", {4, 1})).second;
    }, {{"label", hard}});
    // Soft labels that sum to 1 per row (Paddle's (softmax - label) * dloss) ...
    xt::xarray<double> dist = random({4, 6}, 73, 0.1, 1.0);
    for (std::size_t r = 0; r < 4; ++r) {
        double s = 0;
        for (std::size_t k = 0; k < 6; ++k) s += dist(r, k);
        for (std::size_t k = 0; k < 6; ++k) dist(r, k) /= s;
    }
    grad_check::check({{"z", logits}}, [](P& p, const V& v) {
        return softmax_with_cross_entropy(v[0], p.input<double>("label", {4, 6}), true).second;
    }, {{"label", fp64_tensor(dist)}});
    // ... and that do not: the gradient is that of the loss as computed.
    grad_check::check({{"z", logits}}, [](P& p, const V& v) {
        return softmax_with_cross_entropy(v[0], p.input<double>("label", {4, 6}), true).second;
    }, {{"label", fp64_tensor(random({4, 6}, 74, 0.0, 2.0))}});
    // Rank 3 and a long row (the SIMD scaling of the hard-label gradient).
    grad_check::check({{"z", random({2, 3, 11}, 75, -2, 2)}}, [](P& p, const V& v) {
        return softmax_with_cross_entropy(v[0], p.input<std::int64_t>("label", {2, 3, 1})).second;
    }, {{"label", int64_tensor({2, 3, 1}, random_labels(6, 11, 76))}});
}

TEST_CASE("loss gradients with ignore_index match finite differences") {
    // Rows 1 and 3 carry the ignored label: their loss is 0 whatever the
    // input, so finite differences there are 0 too.
    auto hard = int64_tensor({4, 1}, {2, 0, 4, 0});
    grad_check::check({{"x", random({4, 5}, 91, 0.2, 1.0)}}, [](P& p, const V& v) {
        return cross_entropy(v[0], p.input<std::int64_t>("label", {4, 1}), false, 0);
    }, {{"label", hard}});
    grad_check::check({{"z", random({4, 5}, 92, -2, 2)}}, [](P& p, const V& v) {
        return softmax_with_cross_entropy(v[0], p.input<std::int64_t>("label", {4, 1}), false, 0).second;
    }, {{"label", hard}});
    // Paddle's default, -100, is no class: labels of -100 are ignored without it being set.
    auto padded = int64_tensor({4, 1}, {-100, 1, 3, -100});
    grad_check::check({{"z", random({4, 5}, 93, -2, 2)}}, [](P& p, const V& v) {
        return softmax_with_cross_entropy(v[0], p.input<std::int64_t>("label", {4, 1})).second;
    }, {{"label", padded}});
}

TEST_CASE("loss gradients read what Paddle's grad ops read, and never go into labels") {
    Program p;
    auto w = p.parameter<double>("w", {3, 4}, init::uniform(-1, 1, 5));
    auto v = p.parameter<double>("v", {3, 4}, init::uniform(-1, 1, 6));
    auto label = p.input<std::int64_t>("label", {3, 1});
    auto soft = softmax(v);  // depends on a parameter, but is used only as a label
    auto loss = softmax_with_cross_entropy(w, label).second;
    auto loss2 = softmax_with_cross_entropy(w, soft, true).second;
    auto loss3 = cross_entropy(softmax(w), soft, true);
    auto total = reduce_sum(loss) + reduce_sum(loss2) + reduce_sum(loss3);
    const std::size_t first = p.op_count();
    auto grads = append_backward(total);
    int swce_grads = 0;
    for (std::size_t i = first; i < p.op_count(); ++i) {
        const OpDesc& op = p.desc().blocks[0].ops[i];
        if (op.type != "softmax_with_cross_entropy_grad") continue;
        ++swce_grads;
        CHECK(op.input("Softmax"));
        CHECK(op.input("Label"));
        CHECK(op.input("Loss@GRAD"));
        CHECK_FALSE(op.input("Logits"));
        CHECK(op.output("Logits@GRAD"));
    }
    CHECK(swce_grads == 2);
    Session<cpu> s(p);
    const Tensor lv = int64_tensor({3, 1}, {0, 3, 1});
    for (auto& [param, g] : grads) {
        auto gv = s.eval(g, {{label, lv}});
        if (param.name() == "v") {
            // Nothing flows into a label: v's gradient, if any, is zero.
            CHECK(gv == xt::zeros<double>({3, 4}));
            continue;
        }
        REQUIRE(param.name() == "w");
        // Each softmax_with_cross_entropy row gradient (softmax * sum(label)
        // - label) sums to 0; cross_entropy through softmax does too.
        for (std::size_t r = 0; r < 3; ++r) {
            double sum = 0;
            for (std::size_t k = 0; k < 4; ++k) sum += gv(r, k);
            CHECK(sum == doctest::Approx(0.0).scale(1.0).epsilon(1e-12));
        }
    }
}

TEST_CASE("reshape and transpose gradients match finite differences") {
    auto x = random({2, 3, 4}, 81);
    grad_check::check({{"x", x}}, [](P&, const V& v) { return reshape(v[0], {4, -1}); });
    grad_check::check({{"x", x}}, [](P&, const V& v) { return reshape(v[0], {0, 12}); });
    grad_check::check({{"x", x}}, [](P&, const V& v) { return tanh(reshape(v[0], {24})); });
    for (auto perm : std::vector<std::vector<std::int64_t>>{{0, 1, 2}, {2, 0, 1}, {1, 2, 0}, {0, 2, 1}, {2, 1, 0}}) {
        INFO("perm " << perm[0] << perm[1] << perm[2]);
        grad_check::check({{"x", x}}, [&](P&, const V& v) { return transpose(v[0], perm); });
    }
    grad_check::check({{"x", random({5, 7}, 82)}}, [](P&, const V& v) { return transpose(v[0], {1, 0}); });
    // Rank 4 with unit dims, composed with a nonlinear op so values matter.
    grad_check::check({{"x", random({2, 1, 3, 5}, 83)}},
                      [](P&, const V& v) { return square(transpose(v[0], {3, 0, 2, 1})); });

    // transpose's gradient is a transpose by the inverse permutation.
    Program p;
    auto w = p.parameter<double>("w", {2, 3, 4}, init::constant(1));
    auto loss = reduce_sum(transpose(w, {2, 0, 1}));
    const std::size_t first = p.op_count();
    append_backward(loss);
    bool found = false;
    for (std::size_t i = first; i < p.op_count(); ++i) {
        const OpDesc& op = p.desc().blocks[0].ops[i];
        if (op.type != "transpose") continue;
        found = true;
        CHECK(op.attr("axis")->ints == std::vector<std::int64_t>{1, 2, 0});
    }
    CHECK(found);
}

TEST_CASE("concat and split gradients match finite differences") {
    auto a = random({2, 3}, 91), b = random({2, 5}, 92), c = random({2, 1}, 93);
    grad_check::check({{"a", a}, {"b", b}, {"c", c}}, [](P&, const V& v) { return concat(V{v[0], v[1], v[2]}, 1); });
    grad_check::check({{"a", a}, {"b", b}, {"c", c}}, [](P&, const V& v) { return concat(V{v[0], v[1], v[2]}, -1); });
    grad_check::check({{"a", random({1, 4}, 94)}, {"b", random({3, 4}, 95)}},
                      [](P&, const V& v) { return concat(V{v[0], v[1]}, 0); });
    // Rank 3 along the middle axis, with one input used twice.
    grad_check::check({{"a", random({2, 3, 4}, 96)}, {"b", random({2, 1, 4}, 97)}},
                      [](P&, const V& v) { return square(concat(V{v[0], v[1], v[0]}, 1)); });

    auto x = random({2, 9}, 98);
    grad_check::check({{"x", x}}, [](P&, const V& v) {
        auto parts = split(v[0], 3, 1);
        return concat(V{parts[2], parts[0], parts[1]}, 1);
    });
    // Sections with a -1 and a negative axis; the parts combined nonlinearly.
    grad_check::check({{"x", x}}, [](P&, const V& v) {
        auto parts = split(v[0], std::vector<std::int64_t>{2, -1, 2}, -1);
        return concat(V{tanh(parts[0]) * parts[2], square(parts[1])}, 1);
    });
    // Only one part reaches the loss: the others contribute zeros.
    grad_check::check({{"x", random({6, 2}, 99)}}, [](P&, const V& v) { return exp(split(v[0], 3, 0)[1]); });
}

TEST_CASE("concat_grad names gradients of inputs that get none") {
    Program p;
    auto x = p.input<double>("x", {2, 2});
    auto w = p.parameter<double>("w", {2, 3}, init::uniform(-1, 1, 7));
    auto loss = reduce_sum(square(concat(std::vector<Var<double>>{x, w}, 1)));
    auto grads = append_backward(loss);
    REQUIRE(grads.size() == 1);
    Session<cpu> s(p);
    xt::xarray<double> xv = {{1, 2}, {3, 4}};
    // concat_grad reads every X for its shape, and writes x's gradient under a
    // name of its own that nothing reads.
    CHECK(s.eval(grads[0].second, {{x, xv}}) == 2.0 * s.eval(w));
    CHECK_FALSE(p.desc().blocks[0].find_var("x@GRAD"));
}

TEST_CASE("cast and sum gradients match finite differences") {
    auto x = random({3, 4}, 101);
    // FP64 -> FP64 is a copy; its gradient is exact.
    grad_check::check({{"x", x}}, [](P&, const V& v) { return cast<double>(v[0]) * v[0]; });
    // Through FP32 and back: the loss is only FP32-accurate, so the step
    // must be large enough that rounding (~1e-7 relative) stays well below
    // it; the function is linear in x, so a large step is exact otherwise.
    grad_check::check({{"x", x}}, [](P&, const V& v) { return cast<double>(cast<float>(v[0])); }, {}, 1e-2, 1e-4);
    // Through an integer: no gradient flows there; x * trunc(x) has d/dx =
    // trunc(x) away from integers.
    auto far = random({2, 3}, 102, 0.2, 0.8);
    for (std::size_t i = 0; i < far.size(); ++i) far.data()[i] += static_cast<double>(i) - 2.0;
    grad_check::check({{"x", far}}, [](P&, const V& v) { return v[0] * cast<double>(cast<std::int64_t>(v[0])); });

    auto y = random({3, 4}, 103);
    grad_check::check({{"x", x}, {"y", y}}, [](P&, const V& v) { return sum(V{v[0], v[1], v[0]}); });
    grad_check::check({{"x", x}}, [](P&, const V& v) { return tanh(sum(V{v[0]})); });
    grad_check::check({{"x", x}, {"y", y}}, [](P&, const V& v) { return sum(V{v[0] * v[1], exp(v[1])}); });
}

TEST_CASE("gradients of the new ops survive JSON and validation") {
    Program p;
    auto x = p.input<double>("x", {-1, 4});
    auto w = p.parameter<double>("w", {4, 6}, init::uniform(-1, 1, 1));
    auto label = p.input<std::int64_t>("label", {-1, 1});
    auto h = reshape(transpose(matmul(x, w), {0, 1}), {0, 6});
    auto parts = split(h, 2, 1);
    auto z = concat(std::vector<Var<double>>{parts[1], parts[0]}, 1);
    auto loss = mean(softmax_with_cross_entropy(z, label).second);
    auto grads = append_backward(loss);
    REQUIRE(grads.size() == 1);
    auto types = op_types_from(p, 0);
    for (auto t : {"matmul_grad", "reshape_grad", "concat_grad", "softmax_with_cross_entropy_grad"})
        CHECK_MESSAGE(contains(types, t), t);
    Session<cpu> a(p), b(load_program(p.to_json()));
    xt::xarray<double> xv = random({5, 4}, 111);
    const Tensor lv = int64_tensor({5, 1}, {0, 5, 2, 3, 1});
    auto ga = a.eval(grads[0].second, {{x, xv}, {label, lv}});
    CHECK(to_xarray<double>(b.eval(TargetRef("w@GRAD"), {{"x", xv}, {"label", lv}})) == ga);
}

namespace {
// The gradients of a small classifier built from the ops above, in T, at
// fixed parameter values (fed over the parameters, as grad_check does).
template <class T> std::vector<std::vector<double>> classifier_grads() {
    Program p;
    auto x = p.parameter<T>("x", {2, 4, 6}, init::constant(0));
    auto w = p.parameter<T>("w", {5, 6}, init::constant(0));
    auto label = p.input<std::int64_t>("label", {8, 1});
    auto h = matmul(x, w, false, true, 0.5);                    // [2, 4, 5], w shared by the batches
    auto flat = reshape(transpose(h, {1, 0, 2}), {8, 5});        // [8, 5]
    auto parts = split(flat, std::vector<std::int64_t>{2, 3}, 1);
    auto z = concat(std::vector<Var<T>>{parts[1], tanh(parts[0])}, -1);
    auto loss = mean(softmax_with_cross_entropy(z, label).second) +
                mean(cross_entropy(softmax(mul(z, cast<T>(w), 1, 1)), label));  // [8, 6]: labels < 6
    auto grads = append_backward(loss);
    REQUIRE(grads.size() == 2);
    xt::xarray<T> xv = xt::cast<T>(random({2, 4, 6}, 121));
    xt::xarray<T> wv = xt::cast<T>(random({5, 6}, 122));
    auto labels = int64_tensor({8, 1}, random_labels(8, 5, 123));
    Session<cpu> s(p);
    auto got = s.eval(std::vector<TargetRef>{grads[0].second, grads[1].second},
                      std::vector<Feed>{Feed("x", xv), Feed("w", wv), Feed("label", labels)});
    std::vector<std::vector<double>> out;
    for (auto& t : got) {
        auto v = t.values<T>();
        out.emplace_back(v.begin(), v.end());
    }
    return out;
}
}  // namespace

TEST_CASE("FP32 grad kernels agree with FP64") {
    auto f = classifier_grads<float>();
    auto d = classifier_grads<double>();
    REQUIRE(f.size() == d.size());
    for (std::size_t k = 0; k < f.size(); ++k) {
        REQUIRE(f[k].size() == d[k].size());
        double norm = 0;
        for (std::size_t i = 0; i < f[k].size(); ++i) {
            CHECK(f[k][i] == doctest::Approx(d[k][i]).epsilon(1e-4).scale(1.0));
            norm += d[k][i] * d[k][i];
        }
        CHECK(norm > 1e-4);  // a real comparison, not of zeros
    }
}
