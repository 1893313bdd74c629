// Training-step benchmark: an MLP 784-512-512-10 at batch 64 (forward,
// softmax cross-entropy, backward, SGD update) through a cached plan, and the
// forward pass alone, on one and two threads (SessionOptions::threads).
// Compare with LibTorch 1.13 CPU on one thread on this machine kind: 1.50 ms
// per step; forward 39 / 601 / 2088 us at batch 1 / 64 / 256.
#include <benchmark/benchmark.h>

#include <dlgraph/dlgraph.hpp>
#include <dlgraph/optimizer.hpp>

using namespace dlgraph;

namespace {
struct mlp {
    Program p;
    Var<float> x, logits, loss;
    Var<std::int64_t> label;
    TrainStep step;
    explicit mlp(bool with_step) {
        x = p.input<float>("x", {-1, 784});
        label = p.input<std::int64_t>("label", {-1, 1});
        auto h1 = relu(matmul(x, p.parameter<float>("w1", {784, 512}, init::kaiming_uniform(1))) +
                       p.parameter<float>("b1", {512}, init::constant(0)));
        auto h2 = relu(matmul(h1, p.parameter<float>("w2", {512, 512}, init::kaiming_uniform(2))) +
                       p.parameter<float>("b2", {512}, init::constant(0)));
        logits = matmul(h2, p.parameter<float>("w3", {512, 10}, init::xavier_uniform(3))) +
                 p.parameter<float>("b3", {10}, init::constant(0));
        loss = mean(softmax_with_cross_entropy(logits, label).second);
        if (with_step) step = SGD(0.01).minimize(loss);
    }
};

void fill_batch(std::int64_t n, Tensor& x, Tensor& y) {
    x.resize(DataType::FP32, {n, 784});
    y.resize(DataType::INT64, {n, 1});
    for (std::int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>((i * 7919) % 255) / 255.0f;
    for (std::int64_t i = 0; i < n; ++i) y.data<std::int64_t>()[i] = i % 10;
}
}  // namespace

static void BM_mlp_train_step(benchmark::State& state) {
    mlp m(true);
    Session<cpu> s(m.p, SessionOptions{static_cast<int>(state.range(1))});
    Tensor x, y;
    fill_batch(state.range(0), x, y);
    const std::vector<TargetRef> targets = m.step.with({m.loss});
    const std::vector<Feed> feeds{{"x", x}, {"label", y}};
    std::vector<Tensor> out(targets.size());
    s.eval_into(targets, feeds, out);
    for (auto _ : state) {
        s.eval_into(targets, feeds, out);
        benchmark::DoNotOptimize(out.back().raw());
    }
}
BENCHMARK(BM_mlp_train_step)
    ->ArgNames({"batch", "threads"})
    ->Args({64, 1})
    ->Args({64, 2})
    ->Args({256, 1})
    ->Args({256, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

static void BM_mlp_forward(benchmark::State& state) {
    mlp m(false);
    SessionOptions opts{static_cast<int>(state.range(1))};
    opts.prepack = state.range(2) != 0;
    Session<cpu> s(m.p, opts);
    Tensor x, y;
    fill_batch(state.range(0), x, y);
    const std::vector<TargetRef> targets{m.logits};
    const std::vector<Feed> feeds{{"x", x}};
    std::vector<Tensor> out(1);
    s.eval_into(targets, feeds, out);
    for (auto _ : state) {
        s.eval_into(targets, feeds, out);
        benchmark::DoNotOptimize(out[0].raw());
    }
}
// prepack 0: the weights are packed for the GEMM on every call, as before
// SessionOptions::prepack, for comparison in the same run.
BENCHMARK(BM_mlp_forward)
    ->ArgNames({"batch", "threads", "prepack"})
    ->ArgsProduct({{1, 64, 256}, {1, 2}, {1}})
    ->Args({64, 1, 0})
    ->Args({256, 1, 0})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

BENCHMARK_MAIN();
