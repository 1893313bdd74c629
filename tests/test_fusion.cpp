// Fusion of element-wise chains (fusion.hpp): which steps fuse, and that a
// fused run gives the same bits as the ops run one by one, on one and two
// threads, for sizes that do not divide the block, with full, single-element
// and row (bias) operands.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <xtensor/xrandom.hpp>

#include <dlgraph/optimizer.hpp>

#include "test_helpers.hpp"

using namespace dlgraph;

namespace {

template <class T> xt::xarray<T> randn(const std::vector<std::size_t>& shape, unsigned seed) {
    xt::random::seed(seed);
    return xt::random::randn<T>(shape);
}

// Evaluates `target` with fusion on (threads 1 and 2) and off; checks all
// three agree bit for bit and returns the value and the fused step ranges.
template <class T>
std::pair<xt::xarray<T>, std::vector<std::pair<int, int>>> eval_all_ways(const Program& p, const Var<T>& target,
                                                                         std::initializer_list<Feed> feeds) {
    std::vector<std::string> fed;
    for (auto& f : feeds) fed.emplace_back(f.name());
    const std::vector<TargetRef> targets{target};
    Session<cpu> plain(p, SessionOptions{1, false});
    const xt::xarray<T> want = plain.eval(target, feeds);
    CHECK(plain.fused_steps(targets, fed).empty());
    std::vector<std::pair<int, int>> ranges;
    for (int threads : {1, 2}) {
        Session<cpu> s(p, SessionOptions{threads, true});
        const xt::xarray<T> got = s.eval(target, feeds);
        INFO("threads " << threads);
        CHECK(got == want);
        ranges = s.fused_steps(targets, fed);
    }
    return {want, ranges};
}

}  // namespace

TEST_CASE_TEMPLATE("fusion: a*b + c is one step and matches a double reference", T, float, double) {
    for (std::size_t n : {1u, 7u, 896u, 2048u, 5001u, 300000u}) {
        Program p;
        auto a = p.input<T>("a", {-1});
        auto b = p.input<T>("b", {-1});
        auto c = p.input<T>("c", {-1});
        auto z = a * b + c;
        const auto av = randn<T>({n}, 1), bv = randn<T>({n}, 2), cv = randn<T>({n}, 3);
        auto [got, ranges] = eval_all_ways<T>(p, z, {{"a", av}, {"b", bv}, {"c", cv}});
        INFO("n " << n);
        CHECK(ranges == std::vector<std::pair<int, int>>{{0, 1}});
        for (std::size_t i = 0; i < n; ++i) {
            const double r = double(av(i)) * double(bv(i)) + double(cv(i));
            CHECK(std::abs(double(got(i)) - r) <= 1e-6 * (1 + std::abs(r)));
        }
    }
}

TEST_CASE_TEMPLATE("fusion: a five-op chain with scalar and row operands", T, float, double) {
    // rows of 3 (many rows per block), 1037 (a block holds one row) and 3000
    // (one row spans more than the nominal block).
    for (std::size_t row : {3u, 1037u, 3000u}) {
        Program p;
        auto x = p.input<T>("x", {-1, static_cast<std::int64_t>(row)});
        auto bias = p.input<T>("bias", {static_cast<std::int64_t>(row)});
        auto s = p.input<T>("s", {1});
        auto z = tanh(relu(x * s + bias) - x) * bias;
        const auto xv = randn<T>({5, row}, 4), bv = randn<T>({row}, 5);
        const xt::xarray<T> sv = {T(0.75)};
        auto [got, ranges] = eval_all_ways<T>(p, z, {{"x", xv}, {"bias", bv}, {"s", sv}});
        INFO("row " << row);
        CHECK(ranges == std::vector<std::pair<int, int>>{{0, 5}});
        for (std::size_t i = 0; i < 5; ++i)
            for (std::size_t j = 0; j < row; ++j) {
                const double xd = xv(i, j), bd = bv(j);
                const double r = std::tanh(std::max(xd * 0.75 + bd, 0.0) - xd) * bd;
                CHECK(std::abs(double(got(i, j)) - r) <= 1e-5 * (1 + std::abs(r)));
            }
    }
}

TEST_CASE_TEMPLATE("fusion: inputs at any offset from a cache line give the unfused bits", T, float, double) {
    // The block grid follows the line offset most inputs share (block_shift):
    // views k elements into a buffer move it; c sits at another offset, and
    // the output (the session's) at none. Long enough for two threads.
    const std::size_t n = 300001;
    Program p;
    auto a = p.input<T>("a", {-1});
    auto b = p.input<T>("b", {-1});
    auto c = p.input<T>("c", {-1});
    auto z = relu(a * b + c) * a - b;
    const auto av = randn<T>({n + 16}, 17), bv = randn<T>({n + 16}, 18), cv = randn<T>({n + 16}, 19);
    const Shape shape{static_cast<std::int64_t>(n)};
    for (std::size_t k : {0u, 1u, 3u, 4u, 7u, 15u}) {
        const Tensor at = Tensor::borrow(dtype_of<T>, shape, av.data() + k);
        const Tensor bt = Tensor::borrow(dtype_of<T>, shape, bv.data() + k);
        const Tensor ct = Tensor::borrow(dtype_of<T>, shape, cv.data() + (k + 5) % 16);
        auto [got, ranges] = eval_all_ways<T>(p, z, {{"a", at}, {"b", bt}, {"c", ct}});
        INFO("k " << k);
        CHECK(ranges == std::vector<std::pair<int, int>>{{0, 4}});
        for (std::size_t i = 0; i < n; i += 997) {
            const double ad = av(i + k), bd = bv(i + k), cd = cv(i + (k + 5) % 16);
            const double r = std::max(ad * bd + cd, 0.0) * ad - bd;
            CHECK(std::abs(double(got(i)) - r) <= 1e-5 * (1 + std::abs(r)));
        }
    }
}

TEST_CASE("fusion: bias and ReLU after a matrix product fuse, the product does not") {
    Program p;
    auto x = p.input<float>("x", {-1, 33});
    auto w = p.input<float>("w", {33, 70});
    auto b = p.input<float>("b", {70});
    auto h = relu(matmul(x, w) + b);
    auto [got, ranges] =
        eval_all_ways<float>(p, h, {{"x", randn<float>({9, 33}, 6)}, {"w", randn<float>({33, 70}, 7)}, {"b", randn<float>({70}, 8)}});
    CHECK(ranges == std::vector<std::pair<int, int>>{{1, 2}});
}

TEST_CASE("fusion: a value read elsewhere or fetched ends the chain") {
    Program p;
    auto a = p.input<float>("a", {-1});
    auto b = p.input<float>("b", {-1});
    auto t = a * b;           // read twice below: stays in memory
    auto z = exp(t + a) + t;  // steps: mul, add, exp, add
    const auto av = randn<float>({4000}, 9), bv = randn<float>({4000}, 10);
    auto [got, ranges] = eval_all_ways<float>(p, z, {{"a", av}, {"b", bv}});
    // mul alone (t has two readers); add -> exp -> add fuse, t read from memory.
    CHECK(ranges == std::vector<std::pair<int, int>>{{1, 3}});

    // Fetching the middle of a chain keeps it whole in memory.
    auto u = a + b;
    auto v = relu(u);
    Session<cpu> s(p);
    const std::vector<TargetRef> both{u, v};
    const std::vector<Feed> feeds{{"a", av}, {"b", bv}};
    std::vector<Tensor> out(2);
    s.eval_into(both, feeds, out);
    CHECK(s.fused_steps(both, std::vector<std::string>{"a", "b"}).empty());
    const xt::xarray<float> uv = av + bv;
    CHECK(to_xarray<float>(out[0]) == uv);
    CHECK(to_xarray<float>(out[1]) == xt::xarray<float>(xt::maximum(uv, 0.f)));
}

TEST_CASE("fusion: integer ops and broadcasts it cannot stream are left alone") {
    Program p;
    auto i = p.input<std::int32_t>("i", {-1});
    auto j = i * i + i;  // INT32: not fused
    auto x = p.input<float>("x", {-1, 4});
    auto col = p.input<float>("col", {-1, 1});
    auto y = relu(x * col);  // a column broadcast is not a row: not fused
    Session<cpu> s(p);
    const xt::xarray<std::int32_t> iv = {1, 2, 3};
    CHECK(s.eval(j, {{"i", iv}}) == xt::xarray<std::int32_t>{2, 6, 12});
    CHECK(s.fused_steps(std::vector<TargetRef>{j}, std::vector<std::string>{"i"}).empty());
    const xt::xarray<float> xv = {{1, -2, 3, 4}, {5, 6, -7, 8}};
    xt::xarray<float> cv = xt::xarray<float>::from_shape({2, 1});
    cv(0, 0) = 2;
    cv(1, 0) = -1;
    const xt::xarray<float> want = {{2, 0, 6, 8}, {0, 0, 7, 0}};
    CHECK(s.eval(y, {{"x", xv}, {"col", cv}}) == want);
    CHECK(s.fused_steps(std::vector<TargetRef>{y}, std::vector<std::string>{"x", "col"}).empty());
}

TEST_CASE("fusion: a row operand in the output's arena slot falls back to one op at a time") {
    // bias2 = exp(v) is an arena value last read inside the chain; the
    // chain's output may be given its slot. Whatever the planner does, the
    // result must equal the unfused run.
    Program p;
    auto x = p.input<float>("x", {-1, 64});
    auto v = p.input<float>("v", {64});
    auto bias2 = exp(v);
    auto z = reduce_sum(relu(x * bias2 + bias2), {1});
    Session<cpu> plain(p, SessionOptions{1, false}), fused(p);
    const auto xv = randn<float>({50, 64}, 11), vv = randn<float>({64}, 12);
    CHECK(fused.eval(z, {{"x", xv}, {"v", vv}}) == plain.eval(z, {{"x", xv}, {"v", vv}}));
}

TEST_CASE("fusion: a new input shape re-plans the chain") {
    Program p;
    auto a = p.input<double>("a", {-1, -1});
    auto b = p.input<double>("b", {-1});
    auto z = sqrt(abs(a + b));
    Session<cpu> s(p);
    for (std::size_t cols : {3u, 700u, 5u}) {
        const auto av = randn<double>({4, cols}, 13), bv = randn<double>({cols}, 14);
        const xt::xarray<double> want = xt::sqrt(xt::abs(av + bv));
        CHECK(s.eval(z, {{"a", av}, {"b", bv}}) == want);
        CHECK(s.fused_steps(std::vector<TargetRef>{z}, std::vector<std::string>{"a", "b"}) == std::vector<std::pair<int, int>>{{0, 2}});
    }
}

TEST_CASE_TEMPLATE("fusion: a chain of unary ops' gradients is one pass, in place, with the unfused bits", T, float,
                   double) {
    // loss = sum(w * tanh(sigmoid(log(sqrt(exp(square(relu(abs(x)))))))));
    // its backward is mul_grad, then the eight unary grads in a row, each
    // reading Out@GRAD and the one forward value it needs (X for abs,
    // square and log; Out for the others).
    for (std::int64_t n : {7, 896, 5001, 300000}) {
        Program p;
        auto x = p.parameter<T>("x", {n}, init::constant(0.5));
        auto w = p.input<T>("w", {n});
        auto loss = reduce_sum(w * tanh(sigmoid(log(sqrt(exp(square(relu(abs(x)))))))));
        auto grads = append_backward(loss);
        REQUIRE(grads.size() == 1);
        const auto xv = randn<T>({static_cast<std::size_t>(n)}, 17), wv = randn<T>({static_cast<std::size_t>(n)}, 18);
        auto [got, ranges] = eval_all_ways<T>(p, grads[0].second, {{"x", xv}, {"w", wv}});
        INFO("n " << n);
        // d/dx = w (1 - t^2) g (1 - g) x, with g = sigmoid(x^2 / 2), t = tanh(g).
        for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) {
            const double xd = xv(i), g = 1 / (1 + std::exp(-xd * xd / 2)), t = std::tanh(g);
            const double r = double(wv(i)) * (1 - t * t) * g * (1 - g) * xd;
            CHECK(std::abs(double(got(i)) - r) <= (sizeof(T) == 4 ? 1e-5 : 1e-12) * (1 + std::abs(r)));
        }
        // The eight grads are one chain, with the same bits in place or not.
        const std::vector<TargetRef> targets{grads[0].second};
        const std::vector<std::string> fed{"x", "w"};
        SessionOptions separate;
        separate.in_place = false;
        Session<cpu> in_place(p), apart(p, separate);
        CHECK(to_xarray<T>(in_place.eval(targets, {{"x", xv}, {"w", wv}})[0]) == got);
        CHECK(to_xarray<T>(apart.eval(targets, {{"x", xv}, {"w", wv}})[0]) == got);
        const ExecutionPlan& plan = in_place.plan(targets, fed);
        const auto step_of = [&](std::string_view type) {
            for (std::size_t s = 0; s < plan.steps.size(); ++s)
                if (plan.steps[s].def->type == type) return static_cast<int>(s);
            return -1;
        };
        CHECK(step_of("abs_grad") - step_of("tanh_grad") == 7);
        REQUIRE(!ranges.empty());
        CHECK(ranges.back() == std::pair<int, int>{step_of("tanh_grad"), step_of("abs_grad")});
        // In place, each gradient but the target takes its Out@GRAD's place.
        const MemoryPlan m = in_place.memory_plan(targets, fed), sep = apart.memory_plan(targets, fed);
        for (int s = step_of("tanh_grad"); s < step_of("abs_grad"); ++s) {
            const PlannedStep& st = plan.steps[static_cast<std::size_t>(s)];
            const auto out = static_cast<std::size_t>(st.outs[0]), dout = static_cast<std::size_t>(st.ins[st.in_off[2]]);
            INFO(st.def->type);
            REQUIRE(m.value_slot[out] >= 0);
            CHECK(m.value_slot[out] == m.value_slot[dout]);
            CHECK(m.value_offset[out] == m.value_offset[dout]);
            CHECK((sep.value_slot[out] != sep.value_slot[dout] || sep.value_offset[out] != sep.value_offset[dout]));
        }
    }
}

TEST_CASE("fusion: in a training step, bias and ReLU still fuse: relu_grad reads Out, not X") {
    Program p;
    auto x = p.input<float>("x", {-1, 20});
    auto label = p.input<std::int64_t>("label", {-1, 1});
    auto h = relu(matmul(x, p.parameter<float>("w1", {20, 30}, init::kaiming_uniform(1))) +
                  p.parameter<float>("b1", {30}, init::constant(0.1)));
    auto logits = matmul(h, p.parameter<float>("w2", {30, 10}, init::xavier_uniform(2)));
    auto loss = mean(softmax_with_cross_entropy(logits, label).second);
    const std::vector<TargetRef> step = SGD(0.1).minimize(loss).with({loss});
    const std::vector<std::string> fed{"x", "label"};
    const auto xv = randn<float>({8, 20}, 19);
    xt::xarray<std::int64_t> lv = xt::zeros<std::int64_t>({8, 1});
    for (std::size_t i = 0; i < 8; ++i) lv(i, 0) = static_cast<std::int64_t>(i % 10);
    Session<cpu> plain(p, SessionOptions{1, false}), fused(p);
    std::vector<double> losses[2];
    for (int it = 0; it < 3; ++it) {
        losses[0].push_back(plain.eval(step, {{"x", xv}, {"label", lv}}).back().item<float>());
        losses[1].push_back(fused.eval(step, {{"x", xv}, {"label", lv}}).back().item<float>());
    }
    CHECK(losses[0] == losses[1]);
    const auto& steps = fused.plan(step, fed).steps;
    const auto ranges = fused.fused_steps(step, fed);
    REQUIRE(!ranges.empty());
    CHECK(steps[static_cast<std::size_t>(ranges[0].first)].def->type == "elementwise_add");
    CHECK(steps[static_cast<std::size_t>(ranges[0].second)].def->type == "relu");
    for (auto& st : steps)
        if (st.def->type == "relu_grad") CHECK(st.in_off[1] == st.in_off[0]);  // no X
}

TEST_CASE("threads: long element-wise loops split across threads give the serial bits") {
    // Single ops (not fused) over more elements than one thread takes, with
    // a length that is not a whole number of vectors.
    Program p;
    auto a = p.input<float>("a", {-1});
    auto b = p.input<float>("b", {-1});
    auto e = exp(a);
    auto q = a / b;
    const auto av = randn<float>({300001}, 15), bv = randn<float>({300001}, 16);
    Session<cpu> one(p, SessionOptions{1}), two(p, SessionOptions{2});
    for (const Var<float>* v : {&e, &q}) {
        const xt::xarray<float> want = one.eval(*v, {{"a", av}, {"b", bv}});
        CHECK(two.eval(*v, {{"a", av}, {"b", bv}}) == want);
    }
    CHECK(xt::allclose(one.eval(e, {{"a", av}}), xt::exp(av), 1e-6, 0.0));
}
