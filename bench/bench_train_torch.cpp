// The LibTorch side of bench_train.cpp: the MLP 784-512-512-10 as a
// PyTorch user on a CPU writes it (torch::nn::Linear, ReLU, cross_entropy,
// autograd, torch::optim::SGD / Adam), with at::set_num_threads for the
// thread count. Same batches, same shapes, same work per step (forward,
// loss, backward, one update) as the _dlgraph benchmarks beside it.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "openblas_env.hpp"
#include "train_cases.hpp"

namespace {

// LibTorch's products run in OpenBLAS (Debian's LibTorch has no MKL), whose
// own thread pool at::set_num_threads does not size: both are set, so
// "1 thread" means one core.
void set_threads(int n) {
    at::set_num_threads(n);
    bench_env::set_openblas_threads(n);
}

struct torch_mlp : torch::nn::Module {
    torch::nn::Linear fc1{784, 512}, fc2{512, 512}, fc3{512, 10};
    torch_mlp() {
        register_module("fc1", fc1);
        register_module("fc2", fc2);
        register_module("fc3", fc3);
    }
    torch::Tensor forward(const torch::Tensor& x) {
        return fc3(torch::relu(fc2(torch::relu(fc1(x)))));
    }
};

struct batch {
    torch::Tensor x, y;
    explicit batch(std::int64_t n) : x(torch::empty({n, 784}, torch::kFloat32)), y(torch::empty({n}, torch::kInt64)) {
        train_bench::fill(n, x.data_ptr<float>(), y.data_ptr<std::int64_t>());
    }
};

template <class Optimizer, class Options> void train(benchmark::State& state, Options options) {
    set_threads(static_cast<int>(state.range(1)));
    torch::manual_seed(1);
    auto m = std::make_shared<torch_mlp>();
    Optimizer opt(m->parameters(), options);
    const batch b(state.range(0));
    auto step = [&] {
        opt.zero_grad();
        torch::Tensor loss = torch::nn::functional::cross_entropy(m->forward(b.x), b.y);
        loss.backward();
        opt.step();
        return loss;
    };
    step();
    for (auto _ : state) benchmark::DoNotOptimize(step().data_ptr());
}

}  // namespace

static void BM_mlp_train_sgd_libtorch(benchmark::State& state) {
    train<torch::optim::SGD>(state, torch::optim::SGDOptions(0.01));
}
static void BM_mlp_train_adam_libtorch(benchmark::State& state) {
    train<torch::optim::Adam>(state, torch::optim::AdamOptions(1e-3));
}
static void BM_mlp_forward_libtorch(benchmark::State& state) {
    set_threads(static_cast<int>(state.range(1)));
    torch::NoGradGuard no_grad;
    torch::manual_seed(1);
    torch_mlp m;
    const batch b(state.range(0));
    for (auto _ : state) benchmark::DoNotOptimize(m.forward(b.x).data_ptr());
}
TRAIN_BENCH_CASES(BM_mlp_train_sgd_libtorch, BM_mlp_train_adam_libtorch, BM_mlp_forward_libtorch)
