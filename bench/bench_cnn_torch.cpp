// The LibTorch side of bench_cnn.cpp: the same cases through what a
// PyTorch user on a CPU runs (torch::conv2d, autograd, torch::nn and
// torch::optim::Adam), with at::set_num_threads for the thread count.
// LibTorch 1.13 (Debian's libtorch-dev) convolves through oneDNN.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "cnn_cases.hpp"
#include "openblas_env.hpp"

using cnn_bench::conv_cases;

namespace {

torch::Tensor filled(at::IntArrayRef dims, std::int64_t salt = 0) {
    torch::Tensor t = torch::empty(dims, torch::kFloat32);
    float* p = t.data_ptr<float>();
    for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = cnn_bench::value(i + salt) - 0.5f;
    return t;
}

// OpenBLAS (the Linear layers) has a thread pool of its own: sized too.
void set_threads(const benchmark::State& state) {
    at::set_num_threads(static_cast<int>(state.range(1)));
    bench_env::set_openblas_threads(static_cast<int>(state.range(1)));
}

void count_flop(benchmark::State& state, double flop_per_run) {
    state.counters["GFLOP/s"] = benchmark::Counter(flop_per_run * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

static void BM_conv_forward_libtorch(benchmark::State& state) {
    const auto& c = conv_cases[state.range(0)];
    set_threads(state);
    torch::NoGradGuard no_grad;
    const torch::Tensor x = filled({c.n, c.c, c.h, c.w}), f = filled({c.m, c.c, c.k, c.k}, 7);
    for (auto _ : state) {
        torch::Tensor y = torch::conv2d(x, f, {}, 1, c.pad);
        benchmark::DoNotOptimize(y.data_ptr());
    }
    count_flop(state, c.flop());
    state.SetLabel(c.name);
}

static void BM_conv_backward_libtorch(benchmark::State& state) {
    const auto& c = conv_cases[state.range(0)];
    set_threads(state);
    const torch::Tensor x = filled({c.n, c.c, c.h, c.w}).requires_grad_(), f = filled({c.m, c.c, c.k, c.k}, 7).requires_grad_();
    const torch::Tensor y = torch::conv2d(x, f, {}, 1, c.pad);
    const torch::Tensor dy = filled({c.n, c.m, c.h, c.w}, 3);
    for (auto _ : state) {
        auto g = torch::autograd::grad({y}, {x, f}, {dy}, /*retain_graph=*/true);
        benchmark::DoNotOptimize(g[1].data_ptr());
    }
    count_flop(state, 2 * c.flop());
    state.SetLabel(c.name);
}

BENCHMARK(BM_conv_forward_libtorch)
    ->ArgNames({"case", "threads"})
    ->ArgsProduct({{0, 1, 2}, {1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_conv_backward_libtorch)
    ->ArgNames({"case", "threads"})
    ->ArgsProduct({{0, 1, 2}, {1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

namespace {
// examples/fashion_mnist_models.hpp's CNN in torch::nn.
torch::nn::Sequential cnn() {
    namespace nn = torch::nn;
    const std::int64_t c1 = cnn_bench::channels1, c2 = cnn_bench::channels2;
    return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, c1, 3).padding(1).bias(false)), nn::BatchNorm2d(c1),
                          nn::ReLU(), nn::MaxPool2d(2),
                          nn::Conv2d(nn::Conv2dOptions(c1, c2, 3).padding(1).bias(false)), nn::BatchNorm2d(c2),
                          nn::ReLU(), nn::MaxPool2d(2), nn::Flatten(), nn::Linear(c2 * 7 * 7, cnn_bench::hidden),
                          nn::ReLU(), nn::Dropout(0.25), nn::Linear(cnn_bench::hidden, 10));
}
torch::Tensor images(std::int64_t n) { return filled({n, 1, 28, 28}); }
}  // namespace

static void BM_cnn_inference_libtorch(benchmark::State& state) {
    set_threads(state);
    torch::NoGradGuard no_grad;
    auto net = cnn();
    net->eval();
    const torch::Tensor x = images(state.range(0));
    for (auto _ : state) {
        torch::Tensor y = net->forward(x);
        benchmark::DoNotOptimize(y.data_ptr());
    }
}

static void BM_cnn_train_step_libtorch(benchmark::State& state) {
    set_threads(state);
    auto net = cnn();
    net->train();
    torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(cnn_bench::learning_rate));
    const torch::Tensor x = images(state.range(0));
    const torch::Tensor label = torch::arange(state.range(0), torch::kInt64).remainder(10);
    for (auto _ : state) {
        adam.zero_grad();
        torch::Tensor loss = torch::nn::functional::cross_entropy(net->forward(x), label);
        loss.backward();
        adam.step();
        benchmark::DoNotOptimize(loss.data_ptr());
    }
}

BENCHMARK(BM_cnn_inference_libtorch)
    ->ArgNames({"batch", "threads"})
    ->ArgsProduct({{64}, {1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_cnn_train_step_libtorch)
    ->ArgNames({"batch", "threads"})
    ->ArgsProduct({{64}, {1, 2}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
