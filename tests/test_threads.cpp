// The thread pool (thread_pool.hpp) and the kernels that use it. These also
// run under ThreadSanitizer (dlgraph_thread_tests in scripts/test.sh).
#include <doctest/doctest.h>

#include <atomic>
#include <thread>
#include <vector>

#include <dlgraph/gemm.hpp>

#include "test_helpers.hpp"

using namespace dlgraph;

TEST_CASE("pool: every index runs exactly once, for any count of tasks") {
    ThreadPool pool(3);
    CHECK(pool.workers() == 3);
    for (int n : {0, 1, 2, 3, 4, 7, 64}) {
        std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
        auto f = [&](int i) { hits[static_cast<std::size_t>(i)].fetch_add(1); };
        pool.run(n, f);
        for (auto& h : hits) CHECK(h.load() == 1);
    }
}

TEST_CASE("pool: parallel_for uses at most parallelism() threads and runs inline at 1") {
    std::vector<std::thread::id> ids(100);
    {
        const parallelism_scope one(1);
        CHECK(parallelism() == 1);
        parallel_for(100, [&](int i) { ids[static_cast<std::size_t>(i)] = std::this_thread::get_id(); });
        for (auto& id : ids) CHECK(id == std::this_thread::get_id());
    }
    const parallelism_scope two(2);
    CHECK(parallelism() == 2);
    std::atomic<int> sum{0};
    parallel_for(100, [&](int i) { sum.fetch_add(i); });
    CHECK(sum.load() == 4950);
    const parallelism_scope all(0);
    CHECK(parallelism() == std::max(1, static_cast<int>(std::thread::hardware_concurrency())));
}

TEST_CASE("pool: a nested region and regions from two threads at once run to completion") {
    const parallelism_scope two(2);
    std::atomic<int> inner{0};
    parallel_for(4, [&](int) { parallel_for(4, [&](int) { inner.fetch_add(1); }); });
    CHECK(inner.load() == 16);

    // Two user threads, each with parallelism 2: one gets the pool, the
    // other runs inline; both finish with every index done once.
    std::atomic<int> total{0};
    auto user = [&] {
        const parallelism_scope mine(2);
        for (int rep = 0; rep < 50; ++rep) parallel_for(8, [&](int) { total.fetch_add(1); });
    };
    std::thread t1(user), t2(user);
    t1.join();
    t2.join();
    CHECK(total.load() == 2 * 50 * 8);
}

TEST_CASE("pool: GEMM row strips keep the packed path of the whole product, for any thread count") {
    // Few columns (split by rows) and enough work for several strips; row
    // counts where a strip of whole register tiles would be left with
    // fewer than gemm_small_m rows (with 6- or 12-row tiles), which would
    // take the unpacked path and round otherwise.
    const std::int64_t N = 40, K = 8192;
    for (std::int64_t M : {9, 12, 13, 19, 25, 37}) {
        CAPTURE(M);
        std::vector<float> a(static_cast<std::size_t>(M * K)), b(static_cast<std::size_t>(K * N));
        for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 37) % 101) / 50.f - 1.f;
        for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 53) % 97) / 48.f - 1.f;
        std::vector<float> c1(static_cast<std::size_t>(M * N));
        {
            const parallelism_scope one(1);
            gemm<float>(false, false, M, N, K, 1.f, a.data(), K, b.data(), N, false, c1.data(), N);
        }
        for (int threads : {2, 3, 4}) {
            CAPTURE(threads);
            std::vector<float> c2(c1.size());
            const parallelism_scope n(threads);
            gemm<float>(false, false, M, N, K, 1.f, a.data(), K, b.data(), N, false, c2.data(), N);
            CHECK(c1 == c2);
        }
    }
}

TEST_CASE("pool: GEMM and a fused chain on two threads give the one-thread bits") {
    // Over 2 x 2M multiply-adds, so two threads each take a strip of C.
    const std::int64_t M = 130, N = 300, K = 129;
    std::vector<float> a(static_cast<std::size_t>(M * K)), b(static_cast<std::size_t>(K * N));
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 37) % 101) / 50.f - 1.f;
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>((i * 53) % 97) / 48.f - 1.f;
    std::vector<float> c1(static_cast<std::size_t>(M * N)), c2(c1.size());
    {
        const parallelism_scope one(1);
        gemm<float>(false, false, M, N, K, 1.f, a.data(), K, b.data(), N, false, c1.data(), N);
    }
    const std::uint64_t regions = default_pool().regions();
    {
        const parallelism_scope two(2);
        gemm<float>(false, false, M, N, K, 1.f, a.data(), K, b.data(), N, false, c2.data(), N);
    }
    if (default_pool().workers() > 0) CHECK(default_pool().regions() > regions);  // the product was split
    CHECK(c1 == c2);

    Program p;
    auto x = p.input<float>("x", {-1});
    auto z = sigmoid(x * x + x);
    xt::xarray<float> xv = xt::arange<float>(0.f, 200000.f) / 100000.f;
    Session<cpu> s1(p, SessionOptions{1}), s2(p, SessionOptions{2});
    const auto one = s1.eval(z, {{"x", xv}});
    const std::uint64_t before = default_pool().regions();
    CHECK(one == s2.eval(z, {{"x", xv}}));
    if (default_pool().workers() > 0) CHECK(default_pool().regions() > before);  // the chain was split
}
