// The model's translation unit: the emitted header (model.hpp, namespace
// fmnist) behind one plain function, with its arena in .bss. Built with
// -fno-exceptions -fno-rtti; run.sh checks with nm that it needs no heap and
// no exception support. With DLGRAPH_EXPR_MODEL the same MLP is written as
// a fixed:: expression (fixed/expr.hpp) over the emitted weights; with
// DLGRAPH_EMPTY_MODEL it does nothing but copy, which gives the empty
// program the sizes are measured against. DLGRAPH_MODEL_HEADER names the
// emitted header (default "model.hpp"; run.sh also builds the INT8 one).
#include <cstddef>

#ifndef DLGRAPH_MODEL_HEADER
#define DLGRAPH_MODEL_HEADER "model.hpp"
#endif

#include "model_unit.hpp"

#if defined(DLGRAPH_EXPR_MODEL)
#include <iterator>

#include <dlgraph/fixed/expr.hpp>

#include DLGRAPH_MODEL_HEADER

namespace fx = dlgraph::fixed;

namespace {

constexpr std::int64_t hidden = std::size(fmnist::w::fc1_b);

// The demo's network over the image x: softmax(relu(x w1 + b1) w2 + b2). An
// expression is a value of a few pointers, built where it runs.
constexpr auto network(const float* x) {
    using fx::Var;
    const Var<float, 1, 784> image(x);
    const Var<float, 784, hidden> w1{fmnist::w::fc1_w};
    const Var<float, hidden> b1{fmnist::w::fc1_b};
    const Var<float, hidden, 10> w2{fmnist::w::fc2_w};
    const Var<float, 10> b2{fmnist::w::fc2_b};
    return fx::softmax(fx::matmul(fx::relu(fx::matmul(image, w1) + b1), w2) + b2);
}
using network_type = decltype(network(nullptr));
fx::arena<network_type> arena;

}  // namespace

void model_run(const float* x, float* prob) { fx::run(network(x), std::span<float, 10>(prob, 10), arena); }
std::size_t model_arena_bytes() { return network_type::arena_bytes; }
#elif !defined(DLGRAPH_EMPTY_MODEL)
#include DLGRAPH_MODEL_HEADER

alignas(64) static std::byte arena[fmnist::arena_bytes ? fmnist::arena_bytes : 1];

void model_run(const float* x, float* prob) {
    fmnist::run(*reinterpret_cast<const float(*)[784]>(x), *reinterpret_cast<float(*)[10]>(prob),
                std::span<std::byte, fmnist::arena_bytes>(arena, fmnist::arena_bytes));
}
std::size_t model_arena_bytes() { return fmnist::arena_bytes; }
#else
void model_run(const float* x, float* prob) {
    for (int i = 0; i < 10; ++i) prob[i] = x[i];
}
std::size_t model_arena_bytes() { return 0; }
#endif
