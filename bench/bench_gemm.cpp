// dlgraph's GEMM side by side with OpenBLAS (cblas_sgemm) and Eigen 3.4 in
// one process: square products N = 256..2048 and the MLP layer shapes
// M x 784 x 512, one and two threads. Counters: GFLOP/s (2*M*N*K per product).
//
// OpenBLAS runs with its auto-detected kernels (openblas_env.hpp).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <Eigen/Core>
#include <random>
#include <vector>

#include "dlgraph/gemm.hpp"
#include "openblas_env.hpp"

namespace {

struct operands {
    std::vector<float> a, b, c;
    operands(std::int64_t m, std::int64_t n, std::int64_t k)
        : a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n)), c(static_cast<std::size_t>(m * n)) {
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> u(-1.f, 1.f);
        for (auto& x : a) x = u(rng);
        for (auto& x : b) x = u(rng);
    }
};

void set_flops(benchmark::State& st, std::int64_t m, std::int64_t n, std::int64_t k) {
    st.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(m) * double(n) * double(k) * double(st.iterations()) / 1e9,
                                                benchmark::Counter::kIsRate);
}

// Args: M, N, K, threads.
void BM_dlgraph(benchmark::State& st) {
    const auto m = st.range(0), n = st.range(1), k = st.range(2);
    operands o(m, n, k);
    dlgraph::parallelism_scope threads(static_cast<int>(st.range(3)));
    for (auto _ : st) {
        dlgraph::gemm<float>(false, false, m, n, k, 1.f, o.a.data(), k, o.b.data(), n, false, o.c.data(), n);
        benchmark::ClobberMemory();
    }
    set_flops(st, m, n, k);
}

void BM_openblas(benchmark::State& st) {
    const auto m = st.range(0), n = st.range(1), k = st.range(2);
    operands o(m, n, k);
    openblas_set_num_threads(static_cast<int>(st.range(3)));
    for (auto _ : st) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(n), int(k), 1.f, o.a.data(), int(k),
                    o.b.data(), int(n), 0.f, o.c.data(), int(n));
        benchmark::ClobberMemory();
    }
    set_flops(st, m, n, k);
}

// Eigen without OpenMP: one thread only.
void BM_eigen(benchmark::State& st) {
    const auto m = st.range(0), n = st.range(1), k = st.range(2);
    operands o(m, n, k);
    using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    Eigen::Map<const Mat> A(o.a.data(), m, k), B(o.b.data(), k, n);
    Eigen::Map<Mat> C(o.c.data(), m, n);
    for (auto _ : st) {
        C.noalias() = A * B;
        benchmark::ClobberMemory();
    }
    set_flops(st, m, n, k);
}

void shapes(benchmark::internal::Benchmark* b, bool two_threads) {
    for (int t : {1, 2}) {
        if (t == 2 && !two_threads) continue;
        for (std::int64_t n : {256, 512, 1024, 2048}) b->Args({n, n, n, t});
        for (std::int64_t m : {1, 64, 256}) b->Args({m, 512, 784, t});
    }
    b->ArgNames({"M", "N", "K", "threads"})->UseRealTime();
}

BENCHMARK(BM_dlgraph)->Apply([](auto* b) { shapes(b, true); });
BENCHMARK(BM_openblas)->Apply([](auto* b) { shapes(b, true); });
BENCHMARK(BM_eigen)->Apply([](auto* b) { shapes(b, false); });

}  // namespace

DLGRAPH_BENCH_MAIN_WITHOUT_CORETYPE()
