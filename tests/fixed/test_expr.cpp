// fixed:: expressions (fixed/expr.hpp) against Session<cpu>: the same graph
// built both ways gives the same bits, the result types carry the shapes,
// and the arena an expression plans is no larger than the Session's.
#include <doctest/doctest.h>

#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include <dlgraph/fixed/emit.hpp>
#include <dlgraph/fixed/expr.hpp>

#include "cases.hpp"

using namespace dlgraph;
namespace fx = dlgraph::fixed;

namespace {

using tensors = std::map<std::string, Tensor>;

// The builder's graph for target `y`, with every tensor of `in` fed
// (`params` set in the session's scope first, as trained weights are).
Tensor session_value(const Program& p, const std::string& y, const tensors& in, const tensors& params = {}) {
    auto s = make_session(p);
    for (auto& [name, t] : params) s.scope().var(name).get_mutable<Tensor>() = t;
    std::vector<Feed> feeds;
    for (auto& [name, t] : in) feeds.emplace_back(name, t);
    return s.eval(std::vector<TargetRef>{TargetRef(y)}, feeds)[0];
}

// Runs e into a fresh output, with a poisoned arena, and compares the bits.
template <fx::expression E>
void check_bits(const E& e, const Tensor& want) {
    using T = typename E::value_type;
    constexpr std::int64_t n = E::shape::numel;
    REQUIRE(want.numel() == n);
    std::vector<T> got(static_cast<std::size_t>(n));
    auto a = std::make_unique<fx::arena<E>>();
    std::memset(a->bytes, 0xA5, sizeof a->bytes);
    fx::run(e, std::span<T, n>(got.data(), static_cast<std::size_t>(n)), *a);
    CHECK(std::memcmp(got.data(), want.data<T>(), sizeof(T) * static_cast<std::size_t>(n)) == 0);
}

template <class T>
Tensor random(fixed_cases::rng& r, const Shape& s, double lo = -3, double hi = 3) {
    return fixed_cases::random_tensor<T>(r, s, lo, hi);
}

}  // namespace

TEST_CASE("fixed:: expressions: result shapes are types") {
    static const float x[6] = {}, w[12] = {}, b[4] = {};
    fx::Var<float, 2, 3> vx{x};
    fx::Var<float, 3, 4> vw{w};
    fx::Var<float, 4> vb{b};
    auto y = fx::softmax(fx::relu(fx::matmul(vx, vw) + vb));
    static_assert(std::is_same_v<decltype(y)::shape, fx::dims<2, 4>>);
    static_assert(std::is_same_v<decltype(fx::matmul(vx, vw) * fx::Var<float, 2, 1>{x})::shape, fx::dims<2, 4>>);
    static_assert(std::is_same_v<decltype(fx::Var<float, 5, 1>{x} - fx::Var<float, 1, 3>{x})::shape, fx::dims<5, 3>>);
    static_assert(
        std::is_same_v<decltype(fx::Var<float, 3>{x} / fx::Var<float, 2, 1, 3>{x})::shape, fx::dims<2, 1, 3>>);
    static_assert(std::is_same_v<decltype(y)::value_type, float>);
    CHECK(decltype(y)::shape::numel == 8);
}

TEST_CASE("fixed:: expressions give Session<cpu>'s bits: the demo's MLP at batch 1 and 16") {
    for (const int batch : {1, 16}) {
        CAPTURE(batch);
        const fixed_cases::fixed_case c = fixed_cases::mlp_case(batch, batch == 1 ? 256 : 64);
        const auto w = [&](const char* n) { return c.weights.at(n).data<float>(); };
        fixed_cases::rng r(77 + static_cast<std::uint64_t>(batch));
        auto check = [&]<std::int64_t B, std::int64_t H>() {
            std::vector<float> input(static_cast<std::size_t>(B * 784));
            fx::Var<float, B, 784> x(input.data());
            fx::Var<float, 784, H> w1(w("fc1.w"));
            fx::Var<float, H> b1(w("fc1.b"));
            fx::Var<float, H, 10> w2(w("fc2.w"));
            fx::Var<float, 10> b2(w("fc2.b"));
            auto prob = fx::softmax(fx::matmul(fx::relu(fx::matmul(x, w1) + b1), w2) + b2);
            using model = decltype(prob);
            static_assert(std::is_same_v<typename model::shape, fx::dims<B, 10>>);
            // The arena holds the hidden layer and the larger product's
            // workspace (none at batch 1): everything else is computed in
            // place in the caller's output.
            constexpr std::size_t ws = std::max(fx::gemm_workspace_bytes<float>(false, B, H, 784),
                                                fx::gemm_workspace_bytes<float>(false, B, 10, H));
            static_assert(model::arena_bytes == B * H * 4 + (ws + 63) / 64 * 64);
            const std::vector<std::string> fetch{"prob"};
            const fx::EmittedModel emitted =
                fx::emit(c.program.desc(), c.feeds, fetch, [&](const std::string& n) { return c.weights.at(n); }, {});
            // Less the workspace (which the Session keeps apart), no larger
            // than the Session's arena or the emitted model's.
            CHECK(B * H * 4 <= emitted.session_arena_bytes);
            CHECK(B * H * 4 <= emitted.planned_arena_bytes);
            MESSAGE("batch " << B << ": fixed:: arena " << B * H * 4 << " B + workspace " << model::arena_bytes - B * H * 4
                             << " B; emitted " << emitted.planned_arena_bytes << " B; Session's "
                             << emitted.session_arena_bytes << " B");
            for (int run = 0; run < 20; ++run) {
                const Tensor in = random<float>(r, Shape{B, 784}, 0, 1);
                std::memcpy(input.data(), in.data<float>(), input.size() * sizeof(float));
                tensors feeds{{"x", in}};
                for (auto& [n, t] : c.extra_feeds) feeds[n] = t;
                check_bits(prob, session_value(c.program, "prob", feeds, c.weights));
            }
        };
        if (batch == 1)
            check.operator()<1, 256>();
        else
            check.operator()<16, 64>();
    }
}

TEST_CASE("fixed:: expressions give Session<cpu>'s bits: broadcasting, every element-wise op, in place or not") {
    fixed_cases::rng r(5);
    for (int run = 0; run < 10; ++run) {
        Program p;
        auto a = p.input<float>("a", {4, 1});
        auto b = p.input<float>("b", {1, 5});
        auto c = p.input<float>("c", {5});
        auto d = p.input<float>("d", {3, 4, 5});
        const tensors in{{"a", random<float>(r, {4, 1})},
                         {"b", random<float>(r, {1, 5})},
                         {"c", random<float>(r, {5}, 0.5, 3)},
                         {"d", random<float>(r, {3, 4, 5})}};
        fx::Var<float, 4, 1> fa(in.at("a").data<float>());
        fx::Var<float, 1, 5> fb(in.at("b").data<float>());
        fx::Var<float, 5> fc(in.at("c").data<float>());
        fx::Var<float, 3, 4, 5> fd(in.at("d").data<float>());

        // Leaves broadcast both ways; a computed operand smaller than the
        // result (in the arena); one of the result's size (in place), as X and as Y.
        auto y1 = p.rename(a + b, "y1");
        check_bits(fa + fb, session_value(p, "y1", in));
        auto y2 = p.rename(exp(a - b) * c, "y2");
        check_bits(fx::exp(fa - fb) * fc, session_value(p, "y2", in));
        auto y3 = p.rename(c / (tanh(d) + sigmoid(a * b)), "y3");
        check_bits(fc / (fx::tanh(fd) + fx::sigmoid(fa * fb)), session_value(p, "y3", in));
        auto y4 = p.rename(maximum(sqrt(c), relu(d)) - minimum(square(a), abs(b)), "y4");
        check_bits(fx::maximum(fx::sqrt(fc), fx::relu(fd)) - fx::minimum(fx::square(fa), fx::abs(fb)),
                   session_value(p, "y4", in));
        auto y5 = p.rename(softmax(log(c) + d * a), "y5");
        check_bits(fx::softmax(fx::log(fc) + fd * fa), session_value(p, "y5", in));
        auto y6 = p.rename(exp(c), "y6");  // the result straight from a variable
        check_bits(fx::exp(fc), session_value(p, "y6", in));
        (void)y1, (void)y2, (void)y3, (void)y4, (void)y5, (void)y6;
    }
}

TEST_CASE("fixed:: expressions give Session<cpu>'s bits: double, products of computed operands") {
    fixed_cases::rng r(9);
    Program p;
    auto a = p.input<double>("a", {3, 7});
    auto b = p.input<double>("b", {7, 2});
    auto c = p.input<double>("c", {2, 5});
    const tensors in{
        {"a", random<double>(r, {3, 7})}, {"b", random<double>(r, {7, 2})}, {"c", random<double>(r, {2, 5})}};
    fx::Var<double, 3, 7> fa(in.at("a").data<double>());
    fx::Var<double, 7, 2> fb(in.at("b").data<double>());
    fx::Var<double, 2, 5> fc(in.at("c").data<double>());
    p.rename(matmul(tanh(matmul(a, b)), exp(c) - c), "y");
    auto y = fx::matmul(fx::tanh(fx::matmul(fa, fb)), fx::exp(fc) - fc);
    static_assert(std::is_same_v<decltype(y)::shape, fx::dims<3, 5>>);
    // Both operands of the outer product are computed: [3,2] then [2,5]
    // doubles, each on its own 64-byte lines.
    static_assert(decltype(y)::arena_bytes == 64 + 128);
    check_bits(y, session_value(p, "y", in));
}
