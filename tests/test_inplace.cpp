// In-place execution (plan_memory, SessionOptions::in_place): an
// element-wise op writes over its X when X dies with it, which shrinks the
// arena; results are the same bits as without, fused or not, and a value
// read later is never overwritten.
#include <doctest/doctest.h>

#include <cstring>
#include <xtensor/xrandom.hpp>

#include <dlgraph/optimizer.hpp>

#include "test_helpers.hpp"

using namespace dlgraph;

namespace {

SessionOptions opts(bool in_place, bool fuse, int threads = 1) {
    SessionOptions o;
    o.in_place = in_place;
    o.fuse = fuse;
    o.threads = threads;
    return o;
}


}  // namespace

TEST_CASE("in place: a chain of element-wise ops shares one place in the arena") {
    Program p;
    auto x = p.input<float>("x", {-1, 1000});
    auto a = x * 2.0f;         // scale: an intermediate
    auto b = relu(a);          // over a
    auto c = sigmoid(b);       // over b
    auto d = tanh(c) + x;      // over c, then over tanh's result
    const std::vector<TargetRef> targets{d};
    const std::vector<std::string> fed{"x"};
    xt::random::seed(3);
    // 160,000 elements: over 65,536 per thread, so two threads split the work.
    const xt::xarray<float> xv = xt::random::randn<float>({160, 1000});
    Session<cpu> plain(p, opts(false, false));
    const std::vector<Tensor> want = plain.eval(targets, {{x, xv}});
    const MemoryPlan without = plain.memory_plan(targets, fed);
    for (bool fuse : {false, true})
        for (int threads : {1, 2}) {
            INFO("fuse " << fuse << ", threads " << threads);
            Session<cpu> s(p, opts(true, fuse, threads));
            const std::uint64_t regions = default_pool().regions();
            CHECK(same_bits(s.eval(targets, {{x, xv}})[0], want[0]));
            if (threads == 2 && default_pool().workers() > 0) CHECK(default_pool().regions() > regions);
            const MemoryPlan m = s.memory_plan(targets, fed);
            const std::size_t one = 160 * 1000 * sizeof(float);
            // Every intermediate of the chain at one offset: one value's bytes.
            CHECK(m.slot_bytes[0] == one);
            CHECK(without.slot_bytes[0] == 2 * one);
            CHECK(m.host().lower_bound == 2 * one);  // one shared place + the target
            CHECK(m.host().arena_bytes >= m.host().lower_bound);
            const ExecutionPlan& plan = s.plan(targets, fed);
            for (std::size_t v = 0; v < plan.values.size(); ++v)
                if (m.value_slot[v] == 0) CHECK(m.value_offset[v] == 0);
        }
    // The values themselves.
    const xt::xarray<float> got = to_xarray<float>(want[0]);
    for (std::size_t i = 0; i < 160; i += 9)
        for (std::size_t j = 0; j < 1000; j += 37) {
            const double r = std::tanh(1.0 / (1.0 + std::exp(-std::max(2.0 * xv(i, j), 0.0)))) + xv(i, j);
            CHECK(std::abs(double(got(i, j)) - r) <= 1e-5 * (1 + std::abs(r)));
        }
}

TEST_CASE("in place: a value read after the op is not overwritten") {
    Program p;
    auto x = p.input<double>("x", {-1});
    auto t = x * 3.0;        // read by relu and by the add after it
    auto u = relu(t);        // must not write over t
    auto v = u + t;          // may write over u (dies here), not over t (Y)
    auto w = exp(t) * v;     // t's last reader
    const std::vector<TargetRef> targets{w};
    const xt::xarray<double> xv = {-2.0, -0.5, 0.0, 0.25, 1.5, 3.0, -1.0};
    Session<cpu> s(p, opts(true, false));
    const xt::xarray<double> got = s.eval(w, {{x, xv}});
    for (std::size_t i = 0; i < xv.size(); ++i) {
        const double tt = 3.0 * xv(i), r = std::exp(tt) * (std::max(tt, 0.0) + tt);
        CHECK(got(i) == doctest::Approx(r).epsilon(1e-12));
    }
    const MemoryPlan m = s.memory_plan(targets, std::vector<std::string>{"x"});
    const ExecutionPlan& plan = s.plan(targets, std::vector<std::string>{"x"});
    auto offset_of = [&](const std::string& name) {
        for (std::size_t k = 0; k < plan.values.size(); ++k)
            if (plan.values[k].name == name) return m.value_offset[k];
        FAIL("no value " << name);
        return std::size_t(0);
    };
    CHECK(offset_of(u.name()) != offset_of(t.name()));
    CHECK(offset_of(v.name()) == offset_of(u.name()));
}

TEST_CASE("in place: training gives the same bits with and without it") {
    auto build = [](Program& p) {
        auto x = p.input<float>("x", {-1, 20});
        auto label = p.input<std::int64_t>("label", {-1, 1});
        auto h = relu(matmul(x, p.parameter<float>("w1", {20, 16}, init::kaiming_uniform(1))) +
                      p.parameter<float>("b1", {16}, init::constant(0.1)));
        auto logits = matmul(sigmoid(h) * 2.0f, p.parameter<float>("w2", {16, 5}, init::xavier_uniform(2)));
        auto loss = mean(softmax_with_cross_entropy(logits, label).second);
        return std::pair{loss, Adam(0.01).minimize(loss)};
    };
    xt::random::seed(5);
    const xt::xarray<float> xv = xt::random::randn<float>({32, 20});
    xt::xarray<std::int64_t> lv = xt::zeros<std::int64_t>({32, 1});
    for (std::size_t i = 0; i < 32; ++i) lv(i, 0) = static_cast<std::int64_t>(i % 5);
    for (bool fuse : {false, true}) {
        Program p1, p2;
        auto [loss1, step1] = build(p1);
        auto [loss2, step2] = build(p2);
        Session<cpu> with(p1, opts(true, fuse)), without(p2, opts(false, fuse));
        for (int i = 0; i < 4; ++i) {
            const std::vector<Feed> feeds{{"x", xv}, {"label", lv}};
            const auto a = with.eval(step1.with({loss1}), feeds);
            const auto b = without.eval(step2.with({loss2}), feeds);
            CHECK(same_bits(a.back(), b.back()));
        }
        for (const char* w : {"w1", "b1", "w2"})
            CHECK(same_bits(with.scope().var(w).get<Tensor>(), without.scope().var(w).get<Tensor>()));
        const std::vector<std::string> fed{"x", "label"};
        CHECK(with.memory_plan(step1.with({loss1}), fed).host().arena_bytes <=
              without.memory_plan(step2.with({loss2}), fed).host().arena_bytes);
    }
}

TEST_CASE("an op that writes what it reads: a copy where its kernel cannot work in place, none where it can") {
    // x = assign(x0) [4, 4]; then matmul(x, x) -> x, gather(x, i) -> x and
    // pad by 0 -> x, each naming its output as its input (Paddle's JSON
    // allows it).
    Program p;
    auto x0 = p.input<double>("x0", {4, 4});
    auto i = p.input<std::int64_t>("i", {4});
    p.append("assign", {{"X", {x0.name()}}}, {{"Out", 1}}, {}, nullptr);
    const std::string x = p.desc().blocks[0].ops.back().output("Out")->arguments[0];
    p.append("matmul", {{"X", {x}}, {"Y", {x}}}, {}, {}, nullptr, {{"Out", {x}}});
    p.append("gather", {{"X", {x}}, {"Index", {"i"}}}, {}, {}, nullptr, {{"Out", {x}}});
    const int last = p.append("pad", {{"X", {x}}}, {}, {Attribute::make_ints("paddings", {0, 0, 0, 0})}, nullptr,
                              {{"Out", {x}}});
    xt::xarray<double> xv = xt::random::rand<double>({4, 4}, -1.0, 1.0);
    const xt::xarray<std::int64_t> iv = {3, 0, 3, 1};
    // The reference, in separate arrays.
    xt::xarray<double> sq = xt::zeros<double>({4, 4});
    for (std::size_t r = 0; r < 4; ++r)
        for (std::size_t c = 0; c < 4; ++c)
            for (std::size_t k = 0; k < 4; ++k) sq(r, c) += xv(r, k) * xv(k, c);
    xt::xarray<double> want = xt::zeros<double>({4, 4});
    for (std::size_t r = 0; r < 4; ++r)
        for (std::size_t c = 0; c < 4; ++c) want(r, c) = sq(static_cast<std::size_t>(iv(r)), c);
    Session<cpu> s(p);
    const Tensor got = s.eval(std::vector<TargetRef>{TargetRef{x, last}}, {{"x0", xv}, {"i", iv}})[0];
    for (std::size_t k = 0; k < 16; ++k)
        CHECK(got.data<double>()[k] == doctest::Approx(want.data()[k]).epsilon(1e-14));
    const std::string text = describe(s.plan(std::vector<TargetRef>{TargetRef{x, last}}, std::vector<std::string>{"x0", "i"}));
    INFO(text);
    for (int op = 1; op <= 3; ++op)
        CHECK(text.find("#" + std::to_string(op) + " assign  X=" + x + "@op" + std::to_string(op) + " -> Out=" + x) !=
              std::string::npos);

    // Element-wise ops and optimizers write in place: no copies.
    Program q;
    auto a0 = q.input<float>("a0", {8});
    auto a = scale(a0, 1.0);
    q.append("relu", {{"X", {a.name()}}}, {}, {}, nullptr, {{"Out", {a.name()}}});
    const int e = q.append("elementwise_mul", {{"X", {a.name()}}, {"Y", {a.name()}}}, {}, {}, nullptr, {{"Out", {a.name()}}});
    Session<cpu> t(q);
    const xt::xarray<float> av = {-2, -1, 0, 1, 2, 3, 4, 5};
    const Tensor r = t.eval(std::vector<TargetRef>{TargetRef{a.name(), e}}, {{"a0", av}})[0];
    for (std::size_t k = 0; k < 8; ++k) CHECK(r.data<float>()[k] == std::max(av(k), 0.0f) * std::max(av(k), 0.0f));
    CHECK(describe(t.plan(std::vector<TargetRef>{TargetRef{a.name(), e}}, std::vector<std::string>{"a0"})).find("assign") ==
          std::string::npos);
}
