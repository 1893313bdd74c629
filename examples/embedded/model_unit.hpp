// The one function the firmware (and its host build) calls: the Fashion-MNIST
// MLP emitted by dlgraph emit, x [784] -> prob [10].
#pragma once
#include <cstddef>

void model_run(const float* x, float* prob);
std::size_t model_arena_bytes();
