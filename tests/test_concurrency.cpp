// Sessions under concurrent load: 8 threads each with a Session of one
// program, and 8 threads sharing one Session, evaluating and training.
// Results must be the bits of a single-threaded run, ThreadSanitizer must
// find no race (this file is in dlgraph_thread_tests), and memory must stay
// flat. DLGRAPH_STRESS_SECONDS sets how long each part runs (default 2; the
// issue's soak test is 120).
#include <dlgraph/dlgraph.hpp>
#include <dlgraph/optimizer.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "test_helpers.hpp"

using namespace dlgraph;

namespace {

double stress_seconds() {
    const char* s = std::getenv("DLGRAPH_STRESS_SECONDS");
    return s ? std::atof(s) : 2.0;
}

// Resident memory in bytes (Linux), 0 elsewhere.
std::size_t resident_bytes() {
    std::ifstream f("/proc/self/statm");
    std::size_t pages = 0, resident = 0;
    if (!(f >> pages >> resident)) return 0;
    return resident * 4096;
}

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr bool sanitized = true;  // shadow memory grows as threads touch memory
#else
constexpr bool sanitized = false;
#endif

struct net {
    Program p;
    Var<float> x = p.input<float>("x", {-1, 4});
    Var<std::int64_t> label = p.input<std::int64_t>("label", {-1, 1});
    Var<float> w1 = p.parameter<float>("w1", {4, 16}, init::uniform(-0.5, 0.5, 1));
    Var<float> w2 = p.parameter<float>("w2", {16, 3}, init::uniform(-0.5, 0.5, 2));
    Var<float> prob, loss;
    TrainStep step;
    net() {
        auto [pr, xent] = softmax_with_cross_entropy(matmul(relu(matmul(x, w1)), w2), label);
        prob = pr;
        loss = mean(xent);
        step = Adam(0.01).minimize(loss);
    }
};

xt::xarray<float> batch(int seed) {
    xt::xarray<float> b = xt::zeros<float>({std::size_t(8), std::size_t(4)});
    for (std::size_t i = 0; i < b.size(); ++i) b.flat(i) = static_cast<float>((static_cast<int>(i) * 7 + seed * 13) % 11) / 5.0f - 1.0f;
    return b;
}
const xt::xtensor<std::int64_t, 2> labels = {{0}, {1}, {2}, {0}, {1}, {2}, {0}, {1}};

// The loss after each of `steps` training steps on batch(seed), in a fresh session.
std::vector<float> train_alone(const net& n, int seed, int steps) {
    Session<cpu> s(n.p);
    std::vector<float> losses;
    const auto xb = batch(seed);
    auto targets = n.step.with({n.loss});
    for (int i = 0; i < steps; ++i) losses.push_back(s.eval(targets, {{n.x, xb}, {n.label, labels}}).back().item<float>());
    return losses;
}

}  // namespace

TEST_CASE("concurrency: 8 threads, each with its own Session of one program, train to the single-thread bits") {
    net n;
    constexpr int threads = 8, steps = 20;
    std::vector<std::vector<float>> want;
    for (int t = 0; t < threads; ++t) want.push_back(train_alone(n, t, steps));
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(stress_seconds());
    std::atomic<int> rounds{0}, mismatches{0};
    std::size_t rss_warm = 0;
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            do {
                SessionOptions opts;
                opts.threads = t % 4 == 0 ? 2 : 1;  // some sessions use the shared pool
                Session<cpu> s(n.p, opts);
                const auto xb = batch(t);
                auto targets = n.step.with({n.loss});
                for (int i = 0; i < steps; ++i)
                    if (s.eval(targets, {{n.x, xb}, {n.label, labels}}).back().item<float>() != want[static_cast<std::size_t>(t)][static_cast<std::size_t>(i)])
                        ++mismatches;
                ++rounds;
            } while (std::chrono::steady_clock::now() < until);
        });
    // Warm-up: every thread through a round, then the resident size.
    while (rounds.load() < threads) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    rss_warm = resident_bytes();
    for (auto& th : pool) th.join();
    CHECK(mismatches.load() == 0);
    CHECK(rounds.load() >= threads);
    if (!sanitized && rss_warm) CHECK(resident_bytes() <= rss_warm + rss_warm / 20 + (2u << 20));
}

TEST_CASE("concurrency: 8 threads sharing one Session evaluate and train, calls are serialized, results exact") {
    net n;
    constexpr int threads = 8;
    Session<cpu> shared(n.p);
    // Reference forward results per thread's batch, at the initial weights.
    std::vector<xt::xarray<float>> want;
    {
        Session<cpu> ref(n.p);
        for (int t = 0; t < threads; ++t) want.push_back(ref.eval(n.prob, {{n.x, batch(t)}, {n.label, labels}}));
    }
    // Part 1: only evaluation; every result is the reference.
    auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(stress_seconds() / 2);
    std::atomic<int> calls{0}, mismatches{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            const auto xb = batch(t);
            std::vector<Tensor> out(1);
            const std::vector<TargetRef> targets{n.prob};
            do {
                // Half the threads reuse their output tensors (eval_into's swap), half take copies.
                if (t % 2) {
                    shared.eval_into(targets, std::vector<Feed>{{n.x, xb}, {n.label, labels}}, out);
                    if (!(to_xarray<float>(out[0]) == want[static_cast<std::size_t>(t)])) ++mismatches;
                } else if (!(shared.eval(n.prob, {{n.x, xb}, {n.label, labels}}) == want[static_cast<std::size_t>(t)])) {
                    ++mismatches;
                }
                ++calls;
            } while (std::chrono::steady_clock::now() < until);
        });
    for (auto& th : pool) th.join();
    pool.clear();
    CHECK(mismatches.load() == 0);
    CHECK(calls.load() >= threads);

    // Part 2: all threads train on one batch through the shared session;
    // whatever the interleaving, k steps give the parameters of k steps run
    // alone (each step is the same function of the last).
    const auto xb = batch(0);
    std::atomic<int> trained{0};
    until = std::chrono::steady_clock::now() + std::chrono::duration<double>(stress_seconds() / 2);
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&] {
            auto targets = n.step.targets();
            do {
                shared.eval(targets, {{n.x, xb}, {n.label, labels}});
                ++trained;
            } while (std::chrono::steady_clock::now() < until && trained.load() < 400);
        });
    for (auto& th : pool) th.join();
    Session<cpu> alone(n.p);
    for (int i = 0; i < trained.load(); ++i) alone.eval(n.step.targets(), {{n.x, xb}, {n.label, labels}});
    for (const char* name : {"w1", "w2"}) {
        const Tensor& a = shared.scope().find_local(name)->get<Tensor>();
        const Tensor& b = alone.scope().find_local(name)->get<Tensor>();
        CHECK(std::memcmp(a.raw(), b.raw(), a.bytes()) == 0);
    }
}

namespace {
struct copy_kernel {
    template <class T> static void compute(cpu, const KernelContext& c) {
        std::memcpy(c.out(0).raw(), c.in(0).raw(), c.in(0).bytes());
    }
};
void copy_infer(const InferContext& c) { c.set(0, c.dtype(0), c.shape(0)); }
}  // namespace

TEST_CASE("concurrency: ops registered from 4 threads while 4 others load and run programs with them") {
    constexpr int ops_per_thread = 50;
    std::atomic<int> registered{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([t, &registered] {
            for (int k = 0; k < ops_per_thread; ++k) {
                OpDef d{"", {{"X"}}, {{"Out"}}, {}, &copy_infer};
                const std::string type = "test_copy_" + std::to_string(t) + "_" + std::to_string(k);
                d.type = type;  // the registry keeps its own copy of the name
                d.kernels = cpu_kernels<copy_kernel, float>();
                register_op(std::move(d));
                ++registered;
            }
        });
    std::atomic<int> runs{0};
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([t, &runs] {
            for (int k = 0; k < ops_per_thread; ++k) {
                const std::string type = "test_copy_" + std::to_string(t) + "_" + std::to_string(k);
                while (!find_op(type)) std::this_thread::yield();
                Program p;
                auto x = p.input<float>("x", {2});
                auto y = apply_op<float>(type, {{"X", x}});
                Session<cpu> s(load_program(p.to_json()));
                if (to_xarray<float>(s.eval(TargetRef(y.name()), {{"x", xt::xarray<float>{1, 2}}})) ==
                    xt::xarray<float>{1, 2})
                    ++runs;
            }
        });
    for (auto& th : threads) th.join();
    CHECK(registered == 4 * ops_per_thread);
    CHECK(runs == 4 * ops_per_thread);
    CHECK(registered_ops().size() >= static_cast<std::size_t>(4 * ops_per_thread));
}
