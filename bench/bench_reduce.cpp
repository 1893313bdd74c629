// Reduction bandwidth on 16M FP32 elements (a [4096, 4096] matrix, 64 MiB):
// dlgraph's reduce ops through a Session (eval_into, the zero-allocation
// path) next to a hand-written xsimd loop and xtensor's xt::sum / xt::amax,
// all in one binary. Bytes counted: the input read once (4 B per element).
#include <benchmark/benchmark.h>

#include <dlgraph/dlgraph.hpp>
#include <xtensor/xreducer.hpp>
#include <xtensor/xsort.hpp>

using namespace dlgraph;

namespace {

constexpr std::int64_t rows = 4096, cols = 4096, numel = rows * cols;

// The input, values in [-1, 1), in a 64-byte aligned xarray (as dlgraph's
// own tensors are), so that every contender reads the same bytes with
// 64-byte loads that never straddle a cache line.
using aligned_xarray = xt::xarray<float, xt::layout_type::row_major, xsimd::aligned_allocator<float, 64>>;
template <class A> A make_input() {
    auto v = A::from_shape({static_cast<std::size_t>(rows), static_cast<std::size_t>(cols)});
    std::uint32_t s = 12345;
    for (auto& e : v) {
        s = s * 1664525u + 1013904223u;
        e = static_cast<float>(s >> 8) / static_cast<float>(1u << 23) - 1.0f;
    }
    return v;
}
const aligned_xarray& input() {
    static const aligned_xarray a = make_input<aligned_xarray>();
    return a;
}
// The same values in a plain xt::xarray<float>: its storage comes from
// malloc and is only 16-byte aligned.
const xt::xarray<float>& input16() {
    static const xt::xarray<float> a = make_input<xt::xarray<float>>();
    return a;
}

void set_bytes(benchmark::State& state) { state.SetBytesProcessed(state.iterations() * numel * 4); }

// `make` builds the reduction on x [4096, 4096]; the measured loop is
// eval_into with the input fed as an lvalue, read in place. The Feed is
// emplaced: a vector built from a braced list would copy the Feed, and a
// copied Feed holds a deep (64-byte aligned) copy of the array.
template <class Make, class A = aligned_xarray>
void session_bench(benchmark::State& state, Make make, const A& xv = input()) {
    Program p;
    auto x = p.input<float>("x", {rows, cols});
    auto y = make(x);
    Session<cpu> s(p);
    const std::vector<TargetRef> targets{y};
    std::vector<Feed> feeds;
    feeds.emplace_back(x.name(), xv);
    std::vector<Tensor> out(1);
    s.eval_into(targets, feeds, out);
    for (auto _ : state) {
        s.eval_into(targets, feeds, out);
        benchmark::DoNotOptimize(out[0].raw());
        benchmark::ClobberMemory();
    }
    set_bytes(state);
}

// ---- the hand-written reference: xsimd, 8 batches in flight -------------------------------

using B = xsimd::batch<float>;
constexpr std::int64_t W = static_cast<std::int64_t>(B::size);

// n hidden from the optimiser (GCC 12 otherwise warns, wrongly, that the
// scalar tails below overflow when n is a known constant).
std::int64_t opaque(std::int64_t n) {
    benchmark::DoNotOptimize(n);
    return n;
}

float hand_sum(const float* x, std::int64_t n) {
    B a0(0.f), a1(0.f), a2(0.f), a3(0.f), a4(0.f), a5(0.f), a6(0.f), a7(0.f);
    std::int64_t i = 0;
    for (; i + 8 * W <= n; i += 8 * W) {
        a0 += B::load_unaligned(x + i);
        a1 += B::load_unaligned(x + i + W);
        a2 += B::load_unaligned(x + i + 2 * W);
        a3 += B::load_unaligned(x + i + 3 * W);
        a4 += B::load_unaligned(x + i + 4 * W);
        a5 += B::load_unaligned(x + i + 5 * W);
        a6 += B::load_unaligned(x + i + 6 * W);
        a7 += B::load_unaligned(x + i + 7 * W);
    }
    float r = xsimd::hadd(((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)));
    for (; i < n; ++i) r += x[i];
    return r;
}

float hand_max(const float* x, std::int64_t n) {
    const B lo(-std::numeric_limits<float>::infinity());
    B a0 = lo, a1 = lo, a2 = lo, a3 = lo, a4 = lo, a5 = lo, a6 = lo, a7 = lo;
    std::int64_t i = 0;
    for (; i + 8 * W <= n; i += 8 * W) {
        a0 = xsimd::max(a0, B::load_unaligned(x + i));
        a1 = xsimd::max(a1, B::load_unaligned(x + i + W));
        a2 = xsimd::max(a2, B::load_unaligned(x + i + 2 * W));
        a3 = xsimd::max(a3, B::load_unaligned(x + i + 3 * W));
        a4 = xsimd::max(a4, B::load_unaligned(x + i + 4 * W));
        a5 = xsimd::max(a5, B::load_unaligned(x + i + 5 * W));
        a6 = xsimd::max(a6, B::load_unaligned(x + i + 6 * W));
        a7 = xsimd::max(a7, B::load_unaligned(x + i + 7 * W));
    }
    alignas(64) float t[W];
    xsimd::max(xsimd::max(xsimd::max(a0, a1), xsimd::max(a2, a3)), xsimd::max(xsimd::max(a4, a5), xsimd::max(a6, a7)))
        .store_aligned(t);
    float r = t[0];
    for (std::int64_t k = 1; k < W; ++k) r = std::max(r, t[k]);
    for (; i < n; ++i) r = std::max(r, x[i]);
    return r;
}

// ---- reduce everything -------------------------------------------------------------------

void BM_dlgraph_reduce_sum_all(benchmark::State& state) {
    session_bench(state, [](const Var<float>& x) { return reduce_sum(x); });
}
void BM_dlgraph_mean(benchmark::State& state) {
    session_bench(state, [](const Var<float>& x) { return mean(x); });
}
void BM_dlgraph_reduce_max_all(benchmark::State& state) {
    session_bench(state, [](const Var<float>& x) { return reduce_max(x); });
}
void BM_hand_sum_all(benchmark::State& state) {
    const float* x = input().data();
    for (auto _ : state) benchmark::DoNotOptimize(hand_sum(x, opaque(numel)));
    set_bytes(state);
}
void BM_hand_max_all(benchmark::State& state) {
    const float* x = input().data();
    for (auto _ : state) benchmark::DoNotOptimize(hand_max(x, opaque(numel)));
    set_bytes(state);
}
// Reading the 16-byte aligned xarray in place.
void BM_dlgraph_reduce_sum_all_xarray16(benchmark::State& state) {
    session_bench(state, [](const Var<float>& x) { return reduce_sum(x); }, input16());
}
void BM_hand_sum_all_xarray16(benchmark::State& state) {
    const float* x = input16().data();
    for (auto _ : state) benchmark::DoNotOptimize(hand_sum(x, opaque(numel)));
    set_bytes(state);
}
void BM_xt_sum_all(benchmark::State& state) {
    const auto& x = input();
    for (auto _ : state) benchmark::DoNotOptimize(xt::sum(x)());
    set_bytes(state);
}
void BM_xt_amax_all(benchmark::State& state) {
    const auto& x = input();
    for (auto _ : state) benchmark::DoNotOptimize(xt::amax(x)());
    set_bytes(state);
}

// ---- reduce the last axis: [4096, 4096] -> [4096] ----------------------------------------

void BM_dlgraph_reduce_sum_last_axis(benchmark::State& state) {
    session_bench(state, [](const Var<float>& x) { return reduce_sum(x, {1}); });
}
void BM_hand_sum_last_axis(benchmark::State& state) {
    const float* x = input().data();
    std::vector<float> y(rows);
    for (auto _ : state) {
        const std::int64_t n = opaque(cols);
        for (std::int64_t r = 0; r < rows; ++r) y[r] = hand_sum(x + r * cols, n);
        benchmark::DoNotOptimize(y.data());
        benchmark::ClobberMemory();
    }
    set_bytes(state);
}
void BM_xt_sum_last_axis(benchmark::State& state) {
    const auto& x = input();
    xt::xarray<float> y = xt::sum(x, {1});  // evaluated into y's storage after the first time
    for (auto _ : state) {
        y = xt::sum(x, {1});
        benchmark::DoNotOptimize(y.data());
        benchmark::ClobberMemory();
    }
    set_bytes(state);
}

// ---- reduce the first axis: [4096, 4096] -> [4096] ---------------------------------------

void BM_dlgraph_reduce_sum_first_axis(benchmark::State& state) {
    session_bench(state, [](const Var<float>& x) { return reduce_sum(x, {0}); });
}
// y += x[r] row after row (y, 16 KiB, stays in L1).
void BM_hand_sum_first_axis(benchmark::State& state) {
    const float* x = input().data();
    std::vector<float> y(cols);
    for (auto _ : state) {
        std::fill(y.begin(), y.end(), 0.f);
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t j = 0; j < cols; j += W)
                (B::load_unaligned(y.data() + j) + B::load_unaligned(x + r * cols + j)).store_unaligned(y.data() + j);
        benchmark::DoNotOptimize(y.data());
        benchmark::ClobberMemory();
    }
    set_bytes(state);
}
void BM_xt_sum_first_axis(benchmark::State& state) {
    const auto& x = input();
    xt::xarray<float> y = xt::sum(x, {0});
    for (auto _ : state) {
        y = xt::sum(x, {0});
        benchmark::DoNotOptimize(y.data());
        benchmark::ClobberMemory();
    }
    set_bytes(state);
}

}  // namespace

BENCHMARK(BM_dlgraph_reduce_sum_all)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_hand_sum_all)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_dlgraph_reduce_sum_all_xarray16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_hand_sum_all_xarray16)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_xt_sum_all)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_dlgraph_mean)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_dlgraph_reduce_max_all)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_hand_max_all)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_xt_amax_all)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_dlgraph_reduce_sum_last_axis)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_hand_sum_last_axis)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_xt_sum_last_axis)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_dlgraph_reduce_sum_first_axis)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_hand_sum_first_axis)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_xt_sum_first_axis)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
