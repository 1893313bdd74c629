// Convolutional networks in dlgraph, next to LibTorch (bench_cnn_torch.cpp,
// linked into the same binary where LibTorch is installed): each
// convolution of cnn_cases.hpp forward and backward (Input@GRAD and
// Filter@GRAD), the Fashion-MNIST CNN's inference and training step
// (Adam) at batch 64, on one and two threads. Names pair up as
// BM_<what>_dlgraph / BM_<what>_libtorch; bench/ratios.py prints the
// ratios from a --benchmark_format=json run.
#include <benchmark/benchmark.h>

#include "openblas_env.hpp"

#include <dlgraph/dlgraph.hpp>
#include <dlgraph/optimizer.hpp>

#include "cnn_cases.hpp"
#include "fashion_mnist_models.hpp"

using namespace dlgraph;
using cnn_bench::conv_cases;

namespace {

Tensor filled(Shape dims, std::int64_t salt = 0) {
    Tensor t(DataType::FP32, dims);
    for (std::int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = cnn_bench::value(i + salt) - 0.5f;
    return t;
}

// Times eval_into(targets, feeds) in session s.
void time_runs(benchmark::State& state, Session<cpu>& s, const std::vector<TargetRef>& targets,
               const std::vector<Feed>& feeds, double flop_per_run) {
    std::vector<Tensor> out(targets.size());
    s.eval_into(targets, feeds, out);
    for (auto _ : state) {
        s.eval_into(targets, feeds, out);
        benchmark::DoNotOptimize(out[0].raw());
    }
    if (flop_per_run > 0)
        state.counters["GFLOP/s"] = benchmark::Counter(flop_per_run * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

SessionOptions threads(const benchmark::State& state) { return SessionOptions{.threads = static_cast<int>(state.range(1))}; }

}  // namespace

static void BM_conv_forward_dlgraph(benchmark::State& state) {
    const auto& c = conv_cases[state.range(0)];
    Program p;
    auto x = p.input<float>("x", {c.n, c.c, c.h, c.w});
    auto f = p.input<float>("f", {c.m, c.c, c.k, c.k});
    auto y = conv2d(x, f, Conv2d{.paddings = {c.pad, c.pad}});
    Session<cpu> s(p, threads(state));
    const Tensor xt = filled({c.n, c.c, c.h, c.w}), ft = filled({c.m, c.c, c.k, c.k}, 7);
    time_runs(state, s, {y}, {{"x", xt}, {"f", ft}}, c.flop());
    state.SetLabel(c.name);
}

static void BM_conv_backward_dlgraph(benchmark::State& state) {
    const auto& c = conv_cases[state.range(0)];
    Program p;
    p.input<float>("x", {c.n, c.c, c.h, c.w});
    p.input<float>("f", {c.m, c.c, c.k, c.k});
    p.input<float>("dy", {c.n, c.m, c.h, c.w});
    std::vector<std::vector<std::string>> names;
    p.append("conv2d_grad", {{"Input", {"x"}}, {"Filter", {"f"}}, {"Output@GRAD", {"dy"}}},
             {{"Input@GRAD", 1}, {"Filter@GRAD", 1}}, {Attribute::make_ints("paddings", {c.pad, c.pad})}, &names);
    Session<cpu> s(p, threads(state));
    const Tensor xt = filled({c.n, c.c, c.h, c.w}), ft = filled({c.m, c.c, c.k, c.k}, 7),
                 dy = filled({c.n, c.m, c.h, c.w}, 3);
    time_runs(state, s, {TargetRef(names[0][0]), TargetRef(names[1][0])}, {{"x", xt}, {"f", ft}, {"dy", dy}},
              2 * c.flop());
    state.SetLabel(c.name);
}

BENCHMARK(BM_conv_forward_dlgraph)
    ->ArgNames({"case", "threads"})
    ->ArgsProduct({{0, 1, 2}, {1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_conv_backward_dlgraph)
    ->ArgNames({"case", "threads"})
    ->ArgsProduct({{0, 1, 2}, {1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

namespace {
// The demo's CNN with its loss, accuracy-free, and an Adam step.
struct cnn_model {
    Program p;
    Var<float> x, test_logits, loss;
    TrainStep step;
    cnn_model() {
        x = p.input<float>("x", {-1, 784});
        auto label = p.input<std::int64_t>("label", {-1, 1});
        const auto l = fashion_mnist::cnn(p, x, cnn_bench::channels1, cnn_bench::channels2, cnn_bench::hidden);
        test_logits = l.test;
        loss = mean(softmax_with_cross_entropy(l.train, label).second);
        step = Adam(cnn_bench::learning_rate).minimize(loss);
    }
};

std::vector<Feed> batch(std::int64_t n, Tensor& x, Tensor& label) {
    x = filled({n, 784});
    label = Tensor(DataType::INT64, {n, 1});
    for (std::int64_t i = 0; i < n; ++i) label.data<std::int64_t>()[i] = i % 10;
    return {{"x", x}, {"label", label}};
}
}  // namespace

static void BM_cnn_inference_dlgraph(benchmark::State& state) {
    cnn_model m;
    Session<cpu> s(m.p, threads(state));
    Tensor x, label;
    auto feeds = batch(state.range(0), x, label);
    feeds.pop_back();
    time_runs(state, s, {m.test_logits}, feeds, 0);
}

static void BM_cnn_train_step_dlgraph(benchmark::State& state) {
    cnn_model m;
    Session<cpu> s(m.p, threads(state));
    Tensor x, label;
    time_runs(state, s, m.step.with({m.loss}), batch(state.range(0), x, label), 0);
}

BENCHMARK(BM_cnn_inference_dlgraph)
    ->ArgNames({"batch", "threads"})
    ->ArgsProduct({{64}, {1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_cnn_train_step_dlgraph)
    ->ArgNames({"batch", "threads"})
    ->ArgsProduct({{64}, {1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

DLGRAPH_BENCH_MAIN_BEST_REFERENCE()
