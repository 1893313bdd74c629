// The programs the fixed-model tests emit and compare with Session<cpu>:
// the demo's MLP (784-256-10 at batch 1; 784-64-10 at batch 16, the packed
// GEMM with its workspace, smaller to keep the header small), its CNN with
// the other window ops, and random programs of
// element-wise ops, products, softmax, reductions and shape ops, each with
// its weights. Deterministic: gen_models (which emits the headers at build
// time) and test_fixed (which runs them) build the same cases.
#pragma once

#include <dlgraph/dlgraph.hpp>
#include <dlgraph/fixed/emit.hpp>

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace fixed_cases {

using namespace dlgraph;

inline constexpr int random_count = 60;  // random programs (half FP32, half FP64)
// and the MLP at batch 1 and 16, clash_case, cnn_case and activations_case
inline constexpr int count = random_count + 5;
inline constexpr int clash_index = random_count + 2;
inline constexpr int cnn_index = random_count + 3;
inline constexpr int activations_index = random_count + 4;

struct fixed_case {
    Program program;
    std::vector<fixed::EmitFeed> feeds;
    std::vector<std::string> fetches;
    std::map<std::string, Tensor> weights;
    std::map<std::string, Tensor> extra_feeds;  // what Session needs beyond the model's feeds (the MLP's label)
};

// Numbers in [lo, hi) from 53 random bits (the same on every library).
struct rng {
    std::mt19937_64 g;
    explicit rng(std::uint64_t seed) : g(seed) {}
    double uniform(double lo, double hi) { return lo + (hi - lo) * static_cast<double>(g() >> 11) * 0x1p-53; }
    int below(int n) { return static_cast<int>(g() % static_cast<std::uint64_t>(n)); }
    bool coin() { return below(2) == 0; }
};

template <class T> Tensor random_tensor(rng& r, const Shape& s, double lo, double hi) {
    Tensor t(dtype_of<T>, s);
    for (std::int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = static_cast<T>(r.uniform(lo, hi));
    return t;
}

template <class T> struct builder {
    fixed_case c;
    rng r;
    std::vector<Var<T>> pool;
    int weights = 0;

    explicit builder(std::uint64_t seed) : r(seed) {}

    Var<T> weight(const Shape& s, double lo = -1, double hi = 1) {
        const std::string name = "w" + std::to_string(weights++) + (r.coin() ? ".weight" : "");
        auto w = c.program.template parameter<T>(name, s, init::constant(0));
        c.weights[name] = random_tensor<T>(r, s, lo, hi);
        return w;
    }
    // The latest value half the time, so that programs are mostly chains
    // (the fetched target then needs most ops), else any.
    const Var<T>& pick() {
        if (r.coin()) return pool.back();
        return pool[static_cast<std::size_t>(r.below(static_cast<int>(pool.size())))];
    }
    // A pool value of shape s other than `not_this`, if any.
    const Var<T>* same_shape(const Shape& s, const std::string& not_this) {
        std::vector<const Var<T>*> m;
        for (auto& v : pool)
            if (v.shape() == s && v.name() != not_this) m.push_back(&v);
        return m.empty() ? nullptr : m[static_cast<std::size_t>(r.below(static_cast<int>(m.size())))];
    }

    void add_op() {
        const Var<T> x = pick();
        const Shape s = x.shape();
        const int rank = s.rank();
        switch (r.below(12)) {
            case 0: case 1: {  // binary, broadcasting against a weight or another value
                Var<T> y;
                const int form = r.below(4);
                if (const Var<T>* o = same_shape(s, x.name()); o && form == 0) y = *o;
                else if (form == 1) y = weight(Shape{s[rank - 1]}, 0.5, 2);
                else if (form == 2) y = weight(Shape{1}, 0.5, 2);
                else y = weight(s, 0.5, 2);
                switch (r.below(6)) {
                    case 0: pool.push_back(x + y); break;
                    case 1: pool.push_back(x - y); break;
                    case 2: pool.push_back(x * y); break;
                    case 3: pool.push_back(x / y); break;
                    case 4: pool.push_back(maximum(x, y)); break;
                    default: pool.push_back(minimum(x, y)); break;
                }
                return;
            }
            case 2: {
                switch (r.below(25)) {
                    case 0: pool.push_back(relu(x)); break;
                    case 1: pool.push_back(sigmoid(x)); break;
                    case 2: pool.push_back(tanh(x)); break;
                    case 3: pool.push_back(abs(x)); break;
                    case 4: pool.push_back(square(x)); break;
                    case 5: pool.push_back(exp(scale(x, 0.25))); break;
                    case 6: pool.push_back(sqrt(abs(x))); break;
                    case 7: pool.push_back(log(scale(abs(x), 1.0, 0.5))); break;
                    // The activations of issue 16, attributes written into the model.
                    case 8: pool.push_back(gelu(x, r.coin())); break;
                    case 9: pool.push_back(leaky_relu(x, r.uniform(0, 0.5))); break;
                    case 10: pool.push_back(elu(x, r.uniform(0.5, 2))); break;
                    case 11: pool.push_back(relu6(x, r.uniform(0.5, 6))); break;
                    case 12: pool.push_back(hard_sigmoid(x, r.uniform(0.1, 1), r.uniform(0, 1))); break;
                    case 13: pool.push_back(hard_swish(x, 6.0, r.uniform(3, 6), r.uniform(1, 3))); break;
                    case 14: pool.push_back(softplus(x, r.uniform(0.5, 2), r.uniform(1, 20))); break;
                    case 15: pool.push_back(swish(x, r.uniform(0.5, 2))); break;
                    case 16: pool.push_back(softsign(x)); break;
                    case 17: pool.push_back(sin(x)); break;
                    case 18: pool.push_back(cos(x)); break;
                    case 19: pool.push_back(reciprocal(scale(abs(x), 1.0, 0.5))); break;
                    case 20: pool.push_back(rsqrt(scale(abs(x), 1.0, 0.5))); break;
                    case 21: pool.push_back(floor(scale(x, 3.0))); break;
                    case 22: pool.push_back(ceil(scale(x, 3.0))); break;
                    case 23: pool.push_back(round(scale(x, 3.0))); break;
                    default: pool.push_back(sign(x)); break;
                }
                return;
            }
            case 3: pool.push_back(scale(x, r.uniform(-2, 2), r.uniform(-1, 1), r.coin())); return;
            case 4: case 5: {  // products with a weight
                const std::int64_t k = s[rank - 1], g = 1 + r.below(24);
                if (rank == 2 && r.coin()) pool.push_back(mul(x, weight(Shape{k, g})));
                else if (r.coin()) pool.push_back(matmul(x, weight(Shape{g, k}), false, true, r.uniform(0.5, 2)));
                else if (r.coin()) pool.push_back(matmul(x, weight(Shape{k, g})));
                else  // Paddle 2's matmul_v2
                    pool.push_back(apply_op<T>("matmul_v2", {{"X", x}, {"Y", weight(Shape{g, k})}},
                                               {Attribute::make_bool("trans_x", false), Attribute::make_bool("trans_y", true)}));
                return;
            }
            case 6: pool.push_back(softmax(x, r.below(rank) - (r.coin() ? rank : 0))); return;
            case 7: {
                if (rank == 1) return pool.push_back(mean(x));
                std::vector<std::int64_t> dims{r.below(rank)};
                const bool keep = r.coin();
                switch (r.below(5)) {
                    case 0: pool.push_back(reduce_sum(x, dims, keep)); break;
                    case 1: pool.push_back(reduce_mean(x, dims, keep)); break;
                    case 2: pool.push_back(reduce_min(x, dims, keep)); break;
                    case 3: pool.push_back(reduce_prod(x, dims, keep)); break;
                    default: pool.push_back(reduce_max(x, dims, keep)); break;
                }
                return;
            }
            case 8: {  // reshape or transpose
                if (rank >= 2 && r.coin()) {
                    std::vector<std::int64_t> perm(static_cast<std::size_t>(rank));
                    for (int i = 0; i < rank; ++i) perm[static_cast<std::size_t>(i)] = i;
                    std::shuffle(perm.begin(), perm.end(), r.g);
                    return pool.push_back(transpose(x, perm));
                }
                const std::int64_t n = s.numel();
                std::int64_t a = 1;
                for (std::int64_t d = 2; d <= 6; ++d)
                    if (n % d == 0 && r.coin()) a = d;
                if (a > 1 && r.coin()) pool.push_back(reshape(x, {a, -1}));
                else if (a > 1) pool.push_back(reshape(x, {1, a, n / a}));
                else pool.push_back(reshape(x, {n}));
                return;
            }
            case 9: {  // concat, split
                const int axis = r.below(rank);
                if (r.coin()) {
                    const Var<T>* o = same_shape(s, x.name());
                    pool.push_back(concat(std::vector<Var<T>>{x, o ? *o : x}, axis));
                } else if (s[axis] >= 2) {
                    auto parts = split(x, std::vector<std::int64_t>{1, -1}, axis);
                    for (auto& v : parts) pool.push_back(v);
                }
                return;
            }
            case 10: {
                const Var<T>* o = same_shape(s, x.name());
                pool.push_back(sum(std::vector<Var<T>>{x, o ? *o : x, x}));
                return;
            }
            default: {  // through the other floating type and back
                if constexpr (std::is_same_v<T, float>) pool.push_back(cast<float>(cast<double>(x)));
                else pool.push_back(cast<double>(cast<float>(x)));
                return;
            }
        }
    }
};

// Random program `i` (< random_count): FP32 for even i, FP64 for odd.
template <class T> fixed_case random_case(int i) {
    builder<T> b(0x5eed0000u + static_cast<std::uint64_t>(i));
    const Shape xs = b.r.coin() ? Shape{1 + b.r.below(5), 2 + b.r.below(30)}
                                : Shape{1 + b.r.below(3), 2 + b.r.below(4), 2 + b.r.below(12)};
    b.pool.push_back(b.c.program.template input<T>("x", xs));
    b.c.feeds.push_back({"x", xs});
    const int ops = 3 + b.r.below(12);
    for (int k = 0; k < ops; ++k) b.add_op();
    b.c.fetches.push_back(b.pool.back().name());
    if (b.r.below(3) == 0) {  // a second target, perhaps the input itself
        const std::string other = b.pick().name();
        if (other != b.c.fetches[0]) b.c.fetches.push_back(other);
    }
    return std::move(b.c);
}

// The demo's model (examples/fashion_mnist.cpp, 784-hidden-10) at batch
// `batch`, with random weights.
inline fixed_case mlp_case(int batch, int hidden = 256) {
    builder<float> b(0x3170u + static_cast<std::uint64_t>(batch));
    Program& p = b.c.program;
    auto x = p.input<float>("x", {batch, 784});
    auto label = p.input<std::int64_t>("label", {batch, 1});
    auto w1 = p.parameter<float>("fc1.w", {784, hidden}, init::constant(0));
    auto b1 = p.parameter<float>("fc1.b", {hidden}, init::constant(0));
    auto w2 = p.parameter<float>("fc2.w", {hidden, 10}, init::constant(0));
    auto b2 = p.parameter<float>("fc2.b", {10}, init::constant(0));
    b.c.weights["fc1.w"] = random_tensor<float>(b.r, Shape{784, hidden}, -0.08, 0.08);
    b.c.weights["fc1.b"] = random_tensor<float>(b.r, Shape{hidden}, -0.1, 0.1);
    b.c.weights["fc2.w"] = random_tensor<float>(b.r, Shape{hidden, 10}, -0.15, 0.15);
    b.c.weights["fc2.b"] = random_tensor<float>(b.r, Shape{10}, -0.1, 0.1);
    auto h = relu(matmul(x, w1) + b1);
    auto logits = p.rename(matmul(h, w2) + b2, "logits");
    auto [prob, xent] = softmax_with_cross_entropy(logits, label);
    p.rename(prob, "prob");
    b.c.feeds.push_back({"x", Shape{batch, 784}});
    b.c.fetches = {"prob"};
    Tensor l(DataType::INT64, Shape{batch, 1});
    for (int i = 0; i < batch; ++i) l.data<std::int64_t>()[i] = i % 10;
    b.c.extra_feeds["label"] = l;
    return std::move(b.c);
}

// Names that clash with what a model declares itself (its arena `a`, its
// workspace `ws`, its sizes, its constants `walk0`, `dims1`), emitted into
// the default namespace `model`.
inline fixed_case clash_case() {
    builder<float> b(77);
    Program& p = b.c.program;
    auto a = p.input<float>("a", {2, 3});
    auto arena_bytes = p.parameter<float>("arena_bytes", {3}, init::constant(0));
    auto walk0 = p.parameter<float>("walk0", {2, 1}, init::constant(0));
    b.c.weights["arena_bytes"] = random_tensor<float>(b.r, Shape{3}, -1, 1);
    b.c.weights["walk0"] = random_tensor<float>(b.r, Shape{2, 1}, -1, 1);
    auto ws = p.rename(a + arena_bytes, "ws");
    auto dims1 = p.rename(reduce_sum(ws * walk0, {1}), "dims1");
    b.c.feeds.push_back({"a", Shape{2, 3}});
    b.c.fetches = {"ws", dims1.name()};
    return std::move(b.c);
}

// Every activation of issue 16 on one FP64 input, with non-default
// attributes (written into the model as literals), one fetch each.
inline fixed_case activations_case() {
    builder<double> b(0xac7);
    Program& p = b.c.program;
    auto x = p.input<double>("x", {3, 37});
    auto pos = scale(abs(x), 1.0, 0.25);
    const std::vector<Var<double>> outs{
        gelu(x), gelu(x, true), leaky_relu(x, 0.3), elu(x, 0.7), relu6(x, 1.5), hard_sigmoid(x, 0.4, 0.6),
        hard_swish(x, 5.0, 4.0, 2.0), softplus(x, 2.0, 3.0), swish(x, 1.3), softsign(x), sin(x), cos(x),
        reciprocal(pos), rsqrt(pos), floor(x), ceil(x), round(scale(x, 2.0)), sign(x), clip(x, -0.5, 0.7),
        pow(pos, 1.7), pow(x, 3.0)};
    b.c.feeds.push_back({"x", Shape{3, 37}});
    for (const auto& o : outs) b.c.fetches.push_back(o.name());
    return std::move(b.c);
}

// The demo's CNN (examples/fashion_mnist_models.hpp) as it evaluates, batch
// norm on its moving statistics, with random weights and statistics, and
// beside it the window ops' other paths: a strided, dilated, grouped
// convolution, a depthwise one, a 1x1 one (no column matrix) and average
// pooling with padding, ceil_mode and the padding in the divisor.
inline fixed_case cnn_case(bool small) {
    builder<float> b(0xc22u);
    Program& p = b.c.program;
    const std::int64_t c1 = small ? 4 : 32, c2 = small ? 8 : 64, batch = 2;
    auto param = [&](const std::string& name, const Shape& s, double lo, double hi) {
        auto v = p.parameter<float>(name, s, init::constant(0));
        b.c.weights[name] = random_tensor<float>(b.r, s, lo, hi);
        return v;
    };
    auto norm = [&](const Var<float>& h, const std::string& name) {
        auto y = batch_norm(h, name, BatchNorm{.is_test = true});
        const Shape c{h.shape()[1]};
        b.c.weights[name + ".scale"] = random_tensor<float>(b.r, c, 0.5, 1.5);
        b.c.weights[name + ".bias"] = random_tensor<float>(b.r, c, -0.2, 0.2);
        b.c.weights[name + ".mean"] = random_tensor<float>(b.r, c, -0.5, 0.5);
        b.c.weights[name + ".variance"] = random_tensor<float>(b.r, c, 0.5, 2.0);
        return y;
    };
    auto x = p.input<float>("x", {batch, 784});
    auto k1 = param("conv1.w", {c1, 1, 3, 3}, -0.5, 0.5);
    auto k2 = param("conv2.w", {c2, c1, 3, 3}, -0.2, 0.2);
    const Conv2d same{.paddings = {1, 1}};
    auto h = max_pool2d(relu(norm(conv2d(reshape(x, {-1, 1, 28, 28}), k1, same), "bn1")), 2);  // [2, c1, 14, 14]
    h = max_pool2d(relu(norm(conv2d(h, k2, same), "bn2")), 2);                                 // [2, c2, 7, 7]
    auto strided = conv2d(h, param("conv3.w", {c2, c2 / 2, 3, 3}, -0.2, 0.2),
                          Conv2d{.strides = {2, 2}, .paddings = {1, 1}, .dilations = {2, 2}, .groups = 2});  // [2, c2, 3, 3]
    auto deep = conv2d(relu(depthwise_conv2d(h, param("dw.w", {c2, 1, 3, 3}, -0.5, 0.5), same)),
                       param("pw.w", {c2, c2, 1, 1}, -0.3, 0.3));  // [2, c2, 7, 7]
    auto pooled = pool2d(deep, Pool2d{.pooling_type = "avg", .ksize = {3, 3}, .strides = {2, 2}, .paddings = {1, 1},
                                      .exclusive = false, .ceil_mode = true});  // [2, c2, 4, 4]
    auto logits = matmul(flatten(h), param("fc.w", {c2 * 49, 10}, -0.05, 0.05)) +
                  matmul(flatten(strided), param("fs.w", {c2 * 9, 10}, -0.05, 0.05)) +
                  matmul(flatten(pooled), param("fp.w", {c2 * 16, 10}, -0.05, 0.05)) + param("fc.b", {10}, -0.1, 0.1);
    p.rename(softmax(logits), "prob");
    b.c.feeds.push_back({"x", Shape{batch, 784}});
    b.c.fetches = {"prob"};
    return std::move(b.c);
}

// Case i < count. `small`: the MLPs with 16 hidden units and a CNN with
// fewer channels (the sanitizer builds, where compiling 200,000 weights
// costs minutes).
inline fixed_case make_case(int i, bool small = false) {
    if (i == random_count) return mlp_case(1, small ? 16 : 256);
    if (i == random_count + 1) return mlp_case(16, small ? 16 : 64);
    if (i == clash_index) return clash_case();
    if (i == cnn_index) return cnn_case(small);
    if (i == activations_index) return activations_case();
    return i % 2 == 0 ? random_case<float>(i) : random_case<double>(i);
}

// The namespace of case i in the generated header.
inline std::string case_name(int i) { return i == clash_index ? "model" : "case_" + std::to_string(i); }

inline fixed::EmittedModel emit_case(const fixed_case& c, const std::string& name, std::uint64_t budget = 0) {
    fixed::EmitOptions o;
    o.name = name;
    o.arena_budget = budget;
    o.source = "tests/fixed/cases.hpp";
    return fixed::emit(c.program.desc(), c.feeds, c.fetches, [&](const std::string& n) { return c.weights.at(n); }, o);
}

// The demo's MLP (case random_count) with INT8 products, calibrated on 64
// random images.
inline fixed::EmittedModel emit_int8_case(bool small, const std::string& name = "mlp_int8") {
    const fixed_case c = make_case(random_count, small);
    rng r(0x1b8);
    fixed::EmitOptions o;
    o.name = name;
    o.source = "tests/fixed/cases.hpp";
    o.int8 = true;
    o.calibration["x"] = random_tensor<float>(r, Shape{64, 784}, 0, 1);
    return fixed::emit(c.program.desc(), c.feeds, c.fetches, [&](const std::string& n) { return c.weights.at(n); }, o);
}

}  // namespace fixed_cases
