// The model's translation unit: the emitted header (model.hpp, namespace
// fmnist) behind one plain function, with its arena in .bss. Built with
// -fno-exceptions -fno-rtti; run.sh checks with nm that it needs no heap and
// no exception support. With DLGRAPH_EMPTY_MODEL it does nothing but copy,
// which gives the empty program the sizes are measured against.
#include <cstddef>

#include "model_unit.hpp"

#ifndef DLGRAPH_EMPTY_MODEL
#include "model.hpp"

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
