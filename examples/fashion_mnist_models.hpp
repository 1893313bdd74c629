// The networks of the Fashion-MNIST demo (fashion_mnist.cpp), shared with
// bench/bench_cnn.cpp: an MLP and a CNN on 28x28 images fed as [N, 784].
#pragma once

#include <dlgraph/dlgraph.hpp>

#include <cstdint>

namespace fashion_mnist {

using namespace dlgraph;

// A network's logits for training, and for evaluation (the same variable
// unless the network has layers that differ between the two).
struct logits {
    Var<float> train, test;
};

// The MLP: 784-hidden-10, ReLU.
inline logits mlp(Program& p, const Var<float>& x, std::int64_t hidden) {
    auto w1 = p.parameter<float>("fc1.w", {784, hidden}, init::kaiming_uniform(1));
    auto b1 = p.parameter<float>("fc1.b", {hidden}, init::constant(0));
    auto w2 = p.parameter<float>("fc2.w", {hidden, 10}, init::xavier_uniform(2));
    auto b2 = p.parameter<float>("fc2.b", {10}, init::constant(0));
    auto y = matmul(relu(matmul(x, w1) + b1), w2) + b2;
    return {y, y};
}

// The CNN: two blocks of 3x3 convolution (c1, then c2 channels; no bias,
// batch norm follows), batch norm, ReLU and 2x2 max pooling, then a hidden
// fully connected layer with ReLU and dropout 0.25, and the output layer.
// Built twice on the same parameters: for training, and for evaluation
// with batch norm on its moving statistics and no dropout.
inline logits cnn(Program& p, const Var<float>& x, std::int64_t c1, std::int64_t c2, std::int64_t hidden) {
    auto k1 = p.parameter<float>("conv1.w", {c1, 1, 3, 3}, init::kaiming_uniform(1));
    auto k2 = p.parameter<float>("conv2.w", {c2, c1, 3, 3}, init::kaiming_uniform(2));
    auto w3 = p.parameter<float>("fc1.w", {c2 * 7 * 7, hidden}, init::kaiming_uniform(3));
    auto b3 = p.parameter<float>("fc1.b", {hidden}, init::constant(0));
    auto w4 = p.parameter<float>("fc2.w", {hidden, 10}, init::xavier_uniform(4));
    auto b4 = p.parameter<float>("fc2.b", {10}, init::constant(0));
    const Conv2d same{.paddings = {1, 1}};  // 3x3, stride 1: the image's size
    auto net = [&](bool training) {
        const BatchNorm bn{.is_test = !training};
        auto image = reshape(x, {-1, 1, 28, 28});
        auto h = max_pool2d(relu(batch_norm(conv2d(image, k1, same), "bn1", bn)), 2);  // [N, c1, 14, 14]
        h = max_pool2d(relu(batch_norm(conv2d(h, k2, same), "bn2", bn)), 2);          // [N, c2, 7, 7]
        auto f = relu(matmul(flatten(h), w3) + b3);
        if (training) f = dropout(f, "drop", Dropout{.prob = 0.25, .implementation = "upscale_in_train", .seed = 5});
        return matmul(f, w4) + b4;
    };
    // The evaluation branch first: program order is dataflow, so a branch
    // built after the training one would read the moving statistics as that
    // branch updates them, and evaluating it would run a training step's
    // batch norm.
    auto test = net(false);
    return {net(true), test};
}

}  // namespace fashion_mnist
