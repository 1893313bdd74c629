// Training-step benchmark: an MLP 784-512-512-10 (forward, softmax
// cross-entropy, backward, one SGD or Adam update) through a cached plan,
// and the forward pass alone, at batch 1-256 on one and two threads
// (SessionOptions::threads). Where LibTorch is installed the same cases run
// through it in this binary (bench_train_torch.cpp, BM_<what>_libtorch);
// bench/ratios.py pairs the two sides repetition by repetition.
#include <benchmark/benchmark.h>

#include "openblas_env.hpp"

#include <dlgraph/dlgraph.hpp>
#include <dlgraph/optimizer.hpp>

#include "train_cases.hpp"

using namespace dlgraph;

namespace {
enum class optimizer { none, sgd, adam };
struct mlp {
    Program p;
    Var<float> x, logits, loss;
    Var<std::int64_t> label;
    TrainStep step;
    explicit mlp(optimizer opt) {
        x = p.input<float>("x", {-1, 784});
        label = p.input<std::int64_t>("label", {-1, 1});
        auto h1 = relu(matmul(x, p.parameter<float>("w1", {784, 512}, init::kaiming_uniform(1))) +
                       p.parameter<float>("b1", {512}, init::constant(0)));
        auto h2 = relu(matmul(h1, p.parameter<float>("w2", {512, 512}, init::kaiming_uniform(2))) +
                       p.parameter<float>("b2", {512}, init::constant(0)));
        logits = matmul(h2, p.parameter<float>("w3", {512, 10}, init::xavier_uniform(3))) +
                 p.parameter<float>("b3", {10}, init::constant(0));
        loss = mean(softmax_with_cross_entropy(logits, label).second);
        if (opt == optimizer::sgd) step = SGD(0.01).minimize(loss);
        if (opt == optimizer::adam) step = Adam(1e-3).minimize(loss);
    }
};

void fill_batch(std::int64_t n, Tensor& x, Tensor& y) {
    x.resize(DataType::FP32, {n, 784});
    y.resize(DataType::INT64, {n, 1});
    train_bench::fill(n, x.data<float>(), y.data<std::int64_t>());
}

void train(benchmark::State& state, optimizer opt) {
    mlp m(opt);
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

void forward(benchmark::State& state, bool prepack) {
    mlp m(optimizer::none);
    SessionOptions opts{static_cast<int>(state.range(1))};
    opts.prepack = prepack;
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
}  // namespace

static void BM_mlp_train_sgd_dlgraph(benchmark::State& state) { train(state, optimizer::sgd); }
static void BM_mlp_train_adam_dlgraph(benchmark::State& state) { train(state, optimizer::adam); }
static void BM_mlp_forward_dlgraph(benchmark::State& state) { forward(state, true); }
TRAIN_BENCH_CASES(BM_mlp_train_sgd_dlgraph, BM_mlp_train_adam_dlgraph, BM_mlp_forward_dlgraph)

// The weights packed for the GEMM on every call, as before
// SessionOptions::prepack, for comparison with BM_mlp_forward_dlgraph.
static void BM_mlp_forward_repacking(benchmark::State& state) { forward(state, false); }
BENCHMARK(BM_mlp_forward_repacking)
    ->ArgNames({"batch", "threads"})
    ->Args({64, 1})
    ->Args({256, 1})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

DLGRAPH_BENCH_MAIN_BEST_REFERENCE()
