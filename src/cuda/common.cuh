// What the CUDA backend's kernel files share (src/cuda/kernels.cu and
// src/cuda/train_kernels.cu): launch geometry, grid-stride indices, the
// fault record, a block's fold, and a whole-array sum in double. All of it
// has internal linkage: each .cu file gets its own copy.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "dlgraph/cuda/launch.hpp"
#include "dlgraph/kernels/config.hpp"

namespace dlgraph::cuda_kernels {
namespace {

namespace k = dlgraph::kernels;
using i64 = std::int64_t;

constexpr int block_threads = 256;
constexpr i64 max_blocks = i64(1) << 20;

// Blocks for a grid-stride loop over n elements.
unsigned grid_for(i64 n) {
    const i64 b = (n + block_threads - 1) / block_threads;
    return static_cast<unsigned>(b < 1 ? 1 : b > max_blocks ? max_blocks : b);
}
// Blocks for one block per item (rows, output elements).
unsigned grid_items(i64 items) { return static_cast<unsigned>(items < 1 ? 1 : items > max_blocks ? max_blocks : items); }

__device__ inline i64 first_index() { return static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline i64 stride_all() { return static_cast<i64>(gridDim.x) * blockDim.x; }

__device__ void raise_fault(device_fault* f, k::fault_code code, i64 a = 0, i64 b = 0, i64 c = 0) {
    if (atomicCAS(&f->code, 0, static_cast<int>(code)) == 0) {
        f->a = a;
        f->b = b;
        f->c = c;
    }
}

// Combines each thread's v over the block with f; every thread gets the result.
template <class T, class F> __device__ T block_fold(T v, F f) {
    __shared__ T part[block_threads];
    part[threadIdx.x] = v;
    __syncthreads();
    for (int w = block_threads / 2; w > 0; w /= 2) {
        if (static_cast<int>(threadIdx.x) < w) part[threadIdx.x] = f(part[threadIdx.x], part[threadIdx.x + w]);
        __syncthreads();
    }
    const T r = part[0];
    __syncthreads();  // part is reused by the next fold
    return r;
}

struct add_double {
    __device__ double operator()(double a, double b) const { return a + b; }
};

// ---- sums of a whole array in double ------------------------------------------------------------
//
// sum over i < n of ld(i), in double, in a fixed order (the same bits on
// every run): `sum_blocks` blocks fold grid-strided elements into partial
// sums, one block adds those. The partials live in `scratch`, which must
// hold sum_blocks doubles.
constexpr int sum_blocks = 1024;
template <class L> __global__ void sum_partials_kernel(i64 n, L ld, double* partial) {
    double acc = 0;
    for (i64 i = first_index(); i < n; i += stride_all()) acc += ld(i);
    acc = block_fold(acc, add_double{});
    if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}
// out[0] = fin(the sum): the partials' sum, made final by the caller's functor.
template <class Fin, class Out> __global__ void sum_finish_kernel(int parts, const double* partial, Out* out, Fin fin) {
    double acc = 0;
    for (int b = threadIdx.x; b < parts; b += blockDim.x) acc += partial[b];
    acc = block_fold(acc, add_double{});
    if (threadIdx.x == 0) *out = fin(acc);
}
template <class L, class Fin, class Out>
void sum_all(i64 n, L ld, double* scratch, Out* out, Fin fin, stream_t s) {
    const unsigned parts = n <= 0 ? 1 : std::min<unsigned>(grid_for(n), sum_blocks);
    sum_partials_kernel<<<parts, block_threads, 0, s>>>(n, ld, scratch);
    sum_finish_kernel<<<1, block_threads, 0, s>>>(static_cast<int>(parts), scratch, out, fin);
}

}  // namespace
}  // namespace dlgraph::cuda_kernels
