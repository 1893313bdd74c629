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

#include "mlp_model.hpp"

using namespace dlgraph;
using train_bench::fill_batch;
using train_bench::mlp;
using train_bench::optimizer;

namespace {
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
