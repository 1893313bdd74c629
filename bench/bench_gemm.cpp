// dlgraph's GEMM side by side with OpenBLAS (cblas_sgemm) and Eigen 3.4 in
// one process: square products N = 256..2048 and the MLP layer shapes
// M x 784 x 512, one and two threads; and (BM_train_*) the eight products
// of a training step of the 784-512-512-10 MLP, transposed operands
// included. Counters: GFLOP/s (2*M*N*K per product).
//
// OpenBLAS runs with its auto-detected kernels (openblas_env.hpp).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <Eigen/Core>
#include <iterator>
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

// The products of one training step of the MLP at batch b: forward X W,
// then per layer dW = X^T dY and dX = dY W^T (none for the first layer).
struct product {
    const char* name;
    bool ta, tb;
    std::int64_t m, n, k;  // b stands for -1
};
constexpr product train_products[] = {
    {"X.W1", false, false, -1, 512, 784},     {"H1.W2", false, false, -1, 512, 512},
    {"H2.W3", false, false, -1, 10, 512},     {"H2^T.dY", true, false, 512, 10, -1},
    {"dY.W3^T", false, true, -1, 512, 10},    {"H1^T.dH2", true, false, 512, 512, -1},
    {"dH2.W2^T", false, true, -1, 512, 512},  {"X^T.dH1", true, false, 784, 512, -1}};

// Args: product (index into train_products), batch, threads.
template <bool Dlgraph> void BM_train(benchmark::State& st) {
    const product& p = train_products[st.range(0)];
    const std::int64_t b = st.range(1), m = p.m < 0 ? b : p.m, n = p.n < 0 ? b : p.n, k = p.k < 0 ? b : p.k;
    const std::int64_t lda = p.ta ? m : k, ldb = p.tb ? k : n;
    operands o(m, n, k);
    st.SetLabel(p.name);
    dlgraph::parallelism_scope threads(static_cast<int>(st.range(2)));
    openblas_set_num_threads(static_cast<int>(st.range(2)));
    for (auto _ : st) {
        if constexpr (Dlgraph)
            dlgraph::gemm<float>(p.ta, p.tb, m, n, k, 1.f, o.a.data(), lda, o.b.data(), ldb, false, o.c.data(), n);
        else
            cblas_sgemm(CblasRowMajor, p.ta ? CblasTrans : CblasNoTrans, p.tb ? CblasTrans : CblasNoTrans, int(m),
                        int(n), int(k), 1.f, o.a.data(), int(lda), o.b.data(), int(ldb), 0.f, o.c.data(), int(n));
        benchmark::ClobberMemory();
    }
    set_flops(st, m, n, k);
}
void train_shapes(benchmark::internal::Benchmark* b) {
    for (std::int64_t batch : {64, 256})
        for (std::int64_t i = 0; i < std::int64_t(std::size(train_products)); ++i) b->Args({i, batch, 1});
    b->ArgNames({"product", "batch", "threads"})->UseRealTime();
}
void BM_train_dlgraph(benchmark::State& st) { BM_train<true>(st); }
void BM_train_openblas(benchmark::State& st) { BM_train<false>(st); }

BENCHMARK(BM_dlgraph)->Apply([](auto* b) { shapes(b, true); });
BENCHMARK(BM_openblas)->Apply([](auto* b) { shapes(b, true); });
BENCHMARK(BM_eigen)->Apply([](auto* b) { shapes(b, false); });
BENCHMARK(BM_train_dlgraph)->Apply(train_shapes);
BENCHMARK(BM_train_openblas)->Apply(train_shapes);

}  // namespace

DLGRAPH_BENCH_MAIN_BEST_REFERENCE()
