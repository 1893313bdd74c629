// The MLP of the training benchmarks (bench_train.cpp on the CPU,
// bench_cuda.cpp on the GPU): 784-512-512-10 with ReLU, softmax
// cross-entropy and one SGD or Adam update, and its batch.
#pragma once

#include <dlgraph/dlgraph.hpp>
#include <dlgraph/optimizer.hpp>

#include "train_cases.hpp"

namespace train_bench {
using namespace dlgraph;

enum class optimizer { none, sgd, adam };
struct mlp {
    Program p;
    Var<float> x, logits, loss;
    Var<std::int64_t> label;
    TrainStep step;
    // nranks > 0: data parallel over that many processes (bench_data_parallel).
    explicit mlp(optimizer opt, int nranks = 0) {
        x = p.input<float>("x", {-1, 784});
        label = p.input<std::int64_t>("label", {-1, 1});
        auto h1 = relu(matmul(x, p.parameter<float>("w1", {784, 512}, init::kaiming_uniform(1))) +
                       p.parameter<float>("b1", {512}, init::constant(0)));
        auto h2 = relu(matmul(h1, p.parameter<float>("w2", {512, 512}, init::kaiming_uniform(2))) +
                       p.parameter<float>("b2", {512}, init::constant(0)));
        logits = matmul(h2, p.parameter<float>("w3", {512, 10}, init::xavier_uniform(3))) +
                 p.parameter<float>("b3", {10}, init::constant(0));
        loss = mean(softmax_with_cross_entropy(logits, label).second);
        if (opt == optimizer::sgd) step = SGD(0.01).data_parallel(nranks).minimize(loss);
        if (opt == optimizer::adam) step = Adam(1e-3).data_parallel(nranks).minimize(loss);
    }
};

inline void fill_batch(std::int64_t n, Tensor& x, Tensor& y) {
    x.resize(DataType::FP32, {n, 784});
    y.resize(DataType::INT64, {n, 1});
    fill(n, x.data<float>(), y.data<std::int64_t>());
}

}  // namespace train_bench
