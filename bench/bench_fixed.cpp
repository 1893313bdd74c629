// The demo's MLP (784-256-10, batch 1) as a fixed model (dlgraph emit,
// emitted at build time by tests/fixed/gen_models as mlp.hpp) next to
// Session<cpu> on one thread evaluating the same program (its softmax with
// cross-entropy reduced to the softmax, as the emitter does), with the same
// weights; and the same model with INT8 products (mlp_int8.hpp, dlgraph emit
// --weights int8, calibrated on 64 random images). Run with --benchmark_enable_random_interleaving=true
// --benchmark_repetitions=N so the two alternate (bench/README.md).
#include <benchmark/benchmark.h>

#include <cstring>
#include <vector>

#include "../tests/fixed/cases.hpp"
#include "mlp.hpp"
#include "mlp_int8.hpp"

using namespace dlgraph;

namespace {

const fixed_cases::fixed_case& mlp_case() {
    static const fixed_cases::fixed_case c = fixed_cases::make_case(fixed_cases::random_count);
    return c;
}

std::vector<float> input() {
    std::vector<float> x(784);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 255) / 255.0f;
    return x;
}

}  // namespace

static void BM_mlp_session(benchmark::State& state) {
    const auto& c = mlp_case();
    SessionOptions o;
    o.threads = 1;
    Session<cpu> s(fixed::emit_detail::for_inference(c.program.desc(), std::vector<std::string>{"prob"}), o);
    for (auto& [name, t] : c.weights) s.scope().var(name).get_mutable<Tensor>() = t;
    const std::vector<float> x = input();
    const Tensor xt = Tensor::borrow(DataType::FP32, {1, 784}, x.data());
    const std::vector<TargetRef> targets{TargetRef("prob")};
    const std::vector<Feed> feeds{{"x", xt}};
    std::vector<Tensor> out(1);
    s.eval_into(targets, feeds, out);
    for (auto _ : state) {
        s.eval_into(targets, feeds, out);
        benchmark::DoNotOptimize(out[0].raw());
    }
}
BENCHMARK(BM_mlp_session)->Unit(benchmark::kMicrosecond);

static void BM_mlp_fixed(benchmark::State& state) {
    float x[784], prob[10];
    const std::vector<float> xv = input();
    std::memcpy(x, xv.data(), sizeof x);
    static mlp::model m;  // the arena in .bss, as on a board
    m(x, prob);
    for (auto _ : state) {
        m(x, prob);
        benchmark::DoNotOptimize(prob);
    }
}
BENCHMARK(BM_mlp_fixed)->Unit(benchmark::kMicrosecond);

static void BM_mlp_fixed_int8(benchmark::State& state) {
    float x[784], prob[10];
    const std::vector<float> xv = input();
    std::memcpy(x, xv.data(), sizeof x);
    static mlp_int8::model m;
    m(x, prob);
    for (auto _ : state) {
        m(x, prob);
        benchmark::DoNotOptimize(prob);
    }
}
BENCHMARK(BM_mlp_fixed_int8)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
